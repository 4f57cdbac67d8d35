// Bad input that must end as a wick::Error: element counts that wrap past
// 2^64, sizes no machine can hold, views reaching past their storage. Nothing here allocates
// more than a few bytes: every huge case is refused by a size check before memory is asked for
// (the broadcast views used as inputs have stride 0 and share a one-element storage).
#include <cstdint>
#include <limits>
#include <string>

#include "test_util.hpp"

using namespace wick;

namespace {

constexpr size_t k32 = size_t(1) << 32;
constexpr size_t kWrap1 = 0xAAAAAAAAAAAAAAABull;  // 3 * kWrap1 = 2^65 + 1, which wraps to 1

// Runs f and returns the wick::Error it throws; fails the test on no throw or on any other type.
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-wick exception: " << e.what();
    return Error(ErrorKind::Internal, "non-wick exception");
  }
  ADD_FAILURE() << "did not throw";
  return Error(ErrorKind::Internal, "no throw");
}

#define EXPECT_WICK_ERROR(expr, K, op_name)                                          \
  do {                                                                               \
    Error e_ = error_of([&] { (void)(expr); });                                      \
    EXPECT_EQ(e_.kind(), ErrorKind::K) << e_.what();                                 \
    EXPECT_NE(std::string(e_.what()).find(op_name), std::string::npos) << e_.what(); \
  } while (0)

// A one-element f32 storage seen as `shape` (all strides 0): any size, no memory.
Tensor huge_view(const Shape& shape) {
  return Tensor::zeros({1}, DType::F32).reshape(Shape(shape.size(), 1)).broadcast_as(shape);
}

}  // namespace

TEST(Hardening, CheckedNumel) {
  EXPECT_EQ(checked_numel({}, "t"), 1u);
  EXPECT_EQ(checked_numel({2, 3, 4}, "t"), 24u);
  EXPECT_EQ(checked_numel({0, k32}, "t"), 0u);  // a zero dim: 0 elements
  EXPECT_EQ(checked_numel({size_t(INT64_MAX)}, "t"), size_t(INT64_MAX));
  EXPECT_WICK_ERROR(checked_numel({size_t(INT64_MAX) + 1}, "myop"), Shape, "myop");
  EXPECT_WICK_ERROR(checked_numel({k32, k32}, "myop"), Shape, "[4294967296, 4294967296]");  // 2^64 -> 0
  EXPECT_WICK_ERROR(checked_numel({3, kWrap1}, "myop"), Shape, "myop");                     // wraps to 1
  // The non-zero dims of an empty shape obey the same bound, so every partial product fits.
  EXPECT_WICK_ERROR(checked_numel({0, k32, k32}, "myop"), Shape, "myop");
  EXPECT_WICK_ERROR(shape_numel({k32, k32}), Shape, "shape_numel");
  EXPECT_EQ(checked_bytes(10, 8, "t"), 80u);
  EXPECT_WICK_ERROR(checked_bytes(size_t(1) << 62, 4, "myop"), Shape, "myop");  // 2^64 bytes
  EXPECT_WICK_ERROR(checked_bytes(size_t(1) << 61, 4, "myop"), Shape, "myop");  // 2^63 > PTRDIFF_MAX
}

TEST(Hardening, IssueCasesFromTheReport) {
  // Wrote past its buffer: n * n = 2^64 wrapped to a 0-element storage.
  EXPECT_WICK_ERROR(Tensor::eye(k32, DType::F32), Shape, "eye");
  // Returned heap garbage.
  EXPECT_WICK_ERROR(Tensor::zeros({k32, k32}, DType::F32).narrow(0, 0, 1).narrow(1, 0, 16).to_vector<float>(), Shape,
                    "zeros");
  // Read out of bounds: 3 * 0xAAAAAAAAAAAAAAAB wraps to 1, the element count of the source.
  EXPECT_WICK_ERROR(Tensor::from_vector<float>({7}, {1}).reshape({3, kWrap1}).narrow(1, 0, 4).contiguous(), Shape,
                    "reshape");
}

TEST(Hardening, ConstructorsRefuseWrappingShapes) {
  for (const Shape& s : {Shape{k32, k32}, Shape{3, kWrap1}, Shape{size_t(1) << 63}}) {
    EXPECT_WICK_ERROR(Tensor::zeros(s, DType::F32), Shape, "zeros");
    EXPECT_WICK_ERROR(Tensor::ones(s, DType::U8), Shape, "ones");
    EXPECT_WICK_ERROR(Tensor::full(s, 2.0, DType::F32), Shape, "full");
    EXPECT_WICK_ERROR(Tensor::rand(s, DType::F32, Device::cpu(), 1), Shape, "rand");
    EXPECT_WICK_ERROR(Tensor::randn(s, DType::F32, Device::cpu(), 1), Shape, "randn");
    float one = 1;
    EXPECT_WICK_ERROR(Tensor::from_data(&one, s, DType::F32), Shape, "from_data");
  }
  // from_vector: one value "fills" {3, kWrap1} when the count wraps to 1.
  EXPECT_WICK_ERROR(Tensor::from_vector<float>({7}, {3, kWrap1}), Shape, "from_vector");
  EXPECT_WICK_ERROR(Tensor::from_vector<float>({}, {k32, k32}), Shape, "from_vector");
  // Still fine: empty and ordinary shapes.
  EXPECT_EQ(Tensor::zeros({0, k32}, DType::F32).numel(), 0u);
  EXPECT_EQ(Tensor::eye(3, DType::F32).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
}

TEST(Hardening, ViewsAndShapeOpsRefuseWrappingShapes) {
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_WICK_ERROR(x.reshape({k32, k32, 2}), Shape, "reshape");
  EXPECT_WICK_ERROR(x.reshape({2, kWrap1, 3}), Shape, "reshape");
  // repeat: 2 * 2^63 = 2^64 elements.
  EXPECT_WICK_ERROR(x.repeat({size_t(1) << 63}), Shape, "repeat");
  EXPECT_WICK_ERROR(x.repeat({3, kWrap1 / 2 + 1}), Shape, "repeat");
  EXPECT_WICK_ERROR(x.reshape({1, 2}).broadcast_as({k32, k32, 2}), Shape, "broadcast_as");
  // Binary ops broadcast two views to a shape whose count wraps.
  EXPECT_WICK_ERROR(huge_view({k32, 1}).add(huge_view({1, k32})), Shape, "[4294967296, 4294967296]");
  // cat / stack: sizes along the cat dim pass 2^63 - 1 or add up past 2^64; the stacked count.
  Tensor h = huge_view({size_t(INT64_MAX)});
  EXPECT_WICK_ERROR(Tensor::cat({h, h}, 0), Shape, "cat");
  EXPECT_WICK_ERROR(Tensor::cat({h, h, h}, 0), Shape, "past 2^64");
  EXPECT_WICK_ERROR(Tensor::stack({h, h}, 0), Shape, "stack");
  EXPECT_EQ(x.repeat({2}).to_vector<float>(), (std::vector<float>{1, 2, 1, 2}));
  // index_select / one_hot: 2^32 ids (a stride-0 view) picked from 2^32 rows.
  Tensor ids = Tensor::zeros({1}, DType::U32).broadcast_as({k32});
  EXPECT_WICK_ERROR(huge_view({k32, 1}).index_select(ids, 1), Shape, "index_select");
  EXPECT_WICK_ERROR(Tensor::one_hot(ids, k32, DType::U8), Shape, "one_hot");
  EXPECT_WICK_ERROR(Tensor::meshgrid({huge_view({k32}), huge_view({k32})}), Shape, "[4294967296, 4294967296]");
}

TEST(Hardening, MatmulAndConvOutputsRefuseWrappingShapes) {
  // (2^32 x 1) @ (1 x 2^32): 2^64 outputs; refused before the stride-0 inputs are copied.
  EXPECT_WICK_ERROR(huge_view({k32, 1}).matmul(huge_view({1, k32})), Shape, "matmul");
  // Batch dims [2^32] and [2^32, 1] broadcast to [2^32, 2^32].
  EXPECT_WICK_ERROR(huge_view({k32, 1, 1}).matmul(huge_view({k32, 1, 1, 1})), Shape, "matmul");
  // conv_transpose1d: l_out = (2 - 1) * 2^46 + 1, times a batch of 2^20 > 2^63.
  Conv1dParams p1;
  p1.stride = size_t(1) << 46;
  EXPECT_WICK_ERROR(huge_view({size_t(1) << 20, 1, 2}).conv_transpose1d(Tensor::zeros({1, 1, 1}, DType::F32), p1),
                    Shape, "conv_transpose1d");
  // conv2d: batch 2^32 x c_out 2^32.
  EXPECT_WICK_ERROR(huge_view({k32, 1, 1, 1}).conv2d(huge_view({k32, 1, 1, 1}), Conv2dParams{}), Shape, "conv2d");
}

TEST(Hardening, ResamplingWithHugeSizes) {
  Tensor x1 = Tensor::zeros({1, 1, 2}, DType::F32), x2 = Tensor::zeros({1, 1, 2, 2}, DType::F32);
  // Used to throw std::length_error from a 2^62-entry index table.
  EXPECT_WICK_ERROR(x2.upsample_nearest2d(4, size_t(1) << 62), Shape, "upsample_nearest2d");
  EXPECT_WICK_ERROR(x2.upsample_nearest2d(size_t(1) << 62, 4), Shape, "upsample_nearest2d");
  EXPECT_WICK_ERROR(x1.upsample_nearest1d(size_t(1) << 62), Shape, "upsample_nearest1d");
  EXPECT_WICK_ERROR(x2.upsample_bilinear2d(k32, k32, false), Shape, "upsample_bilinear2d");
  // Representable, but more memory than the machine has (16 TiB of index table).
  EXPECT_WICK_ERROR(x1.upsample_nearest1d(size_t(1) << 40), OutOfMemory, "upsample_nearest1d");
  // An empty batch gives an empty output without asking the backend for anything.
  Tensor e = Tensor::zeros({0, 1, 2, 2}, DType::F32).upsample_nearest2d(size_t(1) << 30, size_t(1) << 30);
  EXPECT_EQ(e.shape(), (Shape{0, 1, size_t(1) << 30, size_t(1) << 30}));
}

TEST(Hardening, ViewOffsetMath) {
  // Offsets and reach are computed with overflow checks (hand values: 5 + 1*3 + 2*1 = 10).
  EXPECT_EQ(Layout({2, 3}, {3, 1}, 5).max_offset_plus_one(), 11u);
  EXPECT_EQ(Layout({2, 0}, {3, 1}, 5).max_offset_plus_one(), 0u);
  EXPECT_EQ(Layout({3}, {int64_t(1) << 62}, 0).max_offset_plus_one(), std::numeric_limits<size_t>::max());
  // start * stride = 2 * 2^62 = 2^63 does not fit an offset.
  EXPECT_WICK_ERROR(Layout({3, 2}, {int64_t(1) << 62, 1}, 0).narrow(0, 2, 1), Shape, "narrow");
  EXPECT_EQ(Layout({3, 2}, {int64_t(1) << 61, 1}, 0).narrow(0, 2, 1).offset, size_t(1) << 62);
  // start + len past the dim, with values that would wrap if added.
  EXPECT_WICK_ERROR(Tensor::zeros({4}, DType::F32).narrow(0, 2, std::numeric_limits<size_t>::max()), Shape, "narrow");
  // A tensor built from parts whose layout reaches past its storage: every view refuses it.
  Tensor small = Tensor::zeros({4}, DType::F32);
  Tensor bad(small.storage(), Layout::contiguous({8}), DType::F32, Device::cpu());
  EXPECT_WICK_ERROR(bad.narrow(0, 0, 8), Internal, "narrow");
  EXPECT_WICK_ERROR(bad.reshape({2, 4}), Internal, "reshape");
  EXPECT_EQ(bad.narrow(0, 0, 4).numel(), 4u);  // the part inside the storage is fine
}

TEST(Hardening, OnlyWickErrorsLeave) {
  // item(): one element, any rank (as PyTorch); empty used to throw std::out_of_range.
  EXPECT_WICK_ERROR(Tensor::zeros({0}, DType::F32).item<float>(), Shape, "item");
  EXPECT_WICK_ERROR(Tensor::zeros({2}, DType::F32).item<float>(), Shape, "item");
  EXPECT_EQ(Tensor::full({1, 1}, 2.5, DType::F32).item<float>(), 2.5f);
  // arange: 1e12 f64 values are 8 TB (std::bad_alloc before); past 2^63 the count is a shape error.
  EXPECT_WICK_ERROR(Tensor::arange(0, 1e12, 1, DType::F32), OutOfMemory, "arange");
  EXPECT_WICK_ERROR(Tensor::arange(0, 1e19, 1, DType::F32), Shape, "arange");
  EXPECT_WICK_ERROR(Tensor::arange(-1e308, 1e308, 1e-300, DType::F64), Shape, "arange");
  // to_vector of a 1e12-element view (4 TB of f32): refused before the vector is made.
  Tensor v = huge_view({1000000, 1000000});
  EXPECT_WICK_ERROR(v.to_vector<float>(), OutOfMemory, "to_vector");
  // CPU storage: the error names the bytes asked (2^40 f32 = 4398046511104 bytes).
  EXPECT_WICK_ERROR(Tensor::zeros({size_t(1) << 40}, DType::F32), OutOfMemory, "4398046511104 bytes");
  EXPECT_WICK_ERROR(v.contiguous(), OutOfMemory, "cpu alloc");
  EXPECT_WICK_ERROR(v.exp(), OutOfMemory, "cpu alloc");
  EXPECT_WICK_ERROR(v.sort_last_dim(), OutOfMemory, "bytes");
  EXPECT_WICK_ERROR(save_npy(v, testing::TempDir() + "/wick_hardening_never_written.npy"), OutOfMemory, "save_npy");
  EXPECT_WICK_ERROR(check_host_alloc(std::numeric_limits<size_t>::max(), "myop"), OutOfMemory, "myop");
}

// In-place writes (Tensor::slice_set with a size_t or a tensor start, copy_from) and the device
// services added with them (synchronize, peak memory) on the CPU. Expected values are written out
// by host loops here.
// tests/gpu/test_gpu_inplace.cpp runs the same cases on a GPU (shared ones: tests/inplace_cases.hpp).
#include <functional>

#include "inplace_cases.hpp"
#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::values;
namespace inplace = wick::test::inplace;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Tensor iota(const Shape& s, double first = 0) { return inplace::iota(s, first, Device::cpu()); }

}  // namespace

TEST(SliceSet, KvCacheAppendEveryDType) {
  inplace::kv_cache_append_every_dtype(Device::cpu());
  // U8 has no -1: zeros, and a negative dim.
  Tensor u = Tensor::zeros({2, 5, 3}, DType::U8);
  u.slice_set(iota({2, 1, 3}, 1).to_dtype(DType::U8), -2, 4);
  std::vector<double> want(30, 0);
  for (size_t h = 0; h < 2; ++h)
    for (size_t d = 0; d < 3; ++d) want[h * 15 + 12 + d] = double(1 + h * 3 + d);
  EXPECT_TRUE(all_close(u, want, 0, 0));
}

TEST(SliceSet, IntoAViewLeavesTheRestOfTheStorage) {
  // base (4, 5, 3) = 100..; the view is heads 1..2; src (2, 3, 3) goes to positions 2..4.
  Tensor base = iota({4, 5, 3}, 100);
  Tensor view = base.narrow(0, 1, 2);
  view.slice_set(iota({2, 3, 3}), 1, 2);
  std::vector<double> want = values(iota({4, 5, 3}, 100));
  for (size_t h = 0; h < 2; ++h)
    for (size_t t = 0; t < 3; ++t)
      for (size_t d = 0; d < 3; ++d) want[(1 + h) * 15 + (2 + t) * 3 + d] = double(h * 9 + t * 3 + d);
  EXPECT_TRUE(all_close(base, want, 0, 0));
}

TEST(SliceSet, StridedSourceAndBatchDim) {
  // src arrives as (b, t, h, d) and is permuted to (b, h, t, d) without a copy.
  Tensor src = iota({2, 3, 2, 4}).permute({0, 2, 1, 3});
  Tensor cache = Tensor::zeros({2, 2, 6, 4}, DType::F32);
  cache.slice_set(src, 2, 3);
  std::vector<double> want(2 * 2 * 6 * 4, 0);
  for (size_t b = 0; b < 2; ++b)
    for (size_t h = 0; h < 2; ++h)
      for (size_t t = 0; t < 3; ++t)
        for (size_t d = 0; d < 4; ++d) want[((b * 2 + h) * 6 + 3 + t) * 4 + d] = double(((b * 3 + t) * 2 + h) * 4 + d);
  EXPECT_TRUE(all_close(cache, want, 0, 0));
}

TEST(SliceSet, TransposedDestination) {
  // A few columns (copy2d with one-element rows) and many (the scatter path).
  for (size_t cols : {4, 200}) {
    Tensor base = Tensor::zeros({cols, 6}, DType::F32);
    Tensor dst = base.t();                    // (6, cols), strides (1, 6)
    dst.slice_set(iota({3, cols}, 1), 0, 2);  // dst[2 + i][j] = 1 + i * cols + j
    std::vector<double> want(cols * 6, 0);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < cols; ++j) want[j * 6 + 2 + i] = double(1 + i * cols + j);
    EXPECT_TRUE(all_close(base, want, 0, 0)) << cols;
  }
}

TEST(SliceSet, ManyRunsOfRowsAndEmptySource) {
  // (70, 3, 8) narrowed to columns 2..5, rows 1..2 written: 70 runs of a 2-D block (the scatter path) ...
  Tensor base = Tensor::zeros({70, 3, 8}, DType::F32);
  Tensor view = base.narrow(2, 2, 4);
  view.slice_set(iota({70, 2, 4}), 1, 1);
  std::vector<double> want(70 * 24, 0);
  for (size_t a = 0; a < 70; ++a)
    for (size_t r = 0; r < 2; ++r)
      for (size_t d = 0; d < 4; ++d) want[a * 24 + (1 + r) * 8 + 2 + d] = double(a * 8 + r * 4 + d);
  EXPECT_TRUE(all_close(base, want, 0, 0));
  // ... and a zero-length write changes nothing.
  view.slice_set(Tensor::zeros({70, 0, 4}, DType::F32), 1, 2);
  EXPECT_TRUE(all_close(base, want, 0, 0));
}

TEST(SliceSet, RandomViewsMatchLayoutMath) { inplace::random_views_match_layout_math(Device::cpu()); }

TEST(SliceSet, Errors) {
  Tensor cache = Tensor::zeros({2, 5, 3}, DType::F16);
  std::string m = error_of([&] { cache.slice_set(Tensor::zeros({2, 2, 3}, DType::F16), 1, 4); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 4 + 2)"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1, 3}, DType::F16), 1, size_t(-1)); });
  EXPECT_NE(m.find("do not fit"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1, 4}, DType::F16), 1, 0); });
  EXPECT_NE(m.find("every dim except dim 1"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1, 3}, DType::F32), 1, 0); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1, 3}, DType::F16), 3, 0); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1}, DType::F16), 1, 0); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  // A broadcast destination has several elements in one place.
  Tensor bc = Tensor::zeros({1, 3}, DType::F32).broadcast_as({4, 3});
  m = error_of([&] { bc.slice_set(Tensor::zeros({2, 3}, DType::F32), 0, 1); });
  EXPECT_NE(m.find("broadcast view"), std::string::npos) << m;
  EXPECT_TRUE(all_close(cache, std::vector<double>(30, 0), 0, 0));  // failures wrote nothing
}

TEST(SliceSetTensorStart, EveryStartDTypeAndClamping) { inplace::tensor_start_every_dtype_and_clamp(Device::cpu()); }
TEST(SliceSetTensorStart, KvCacheViewsAndOverlap) { inplace::tensor_start_views(Device::cpu()); }
TEST(SliceSetTensorStart, RandomViewsMatchLayoutMath) { inplace::random_views_match_layout_math(Device::cpu(), true); }

TEST(SliceSetTensorStart, Errors) {
  Tensor cache = Tensor::zeros({2, 5, 3}, DType::F16);
  const Tensor src = Tensor::zeros({2, 2, 3}, DType::F16), at1 = Tensor::full({1}, 1, DType::I32);
  auto kind_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Internal;
  };
  // The start: an integer, exactly one element.
  std::string m = error_of([&] { cache.slice_set(src, 1, Tensor::full({1}, 1, DType::F32)); });
  EXPECT_NE(m.find("slice_set: start must hold one integer"), std::string::npos) << m;
  EXPECT_EQ(kind_of([&] { cache.slice_set(src, 1, Tensor::full({1}, 1, DType::BF16)); }), ErrorKind::DType);
  m = error_of([&] { cache.slice_set(src, 1, Tensor::full({2}, 1, DType::I64)); });
  EXPECT_NE(m.find("slice_set: start must hold one integer"), std::string::npos) << m;
  EXPECT_EQ(kind_of([&] { cache.slice_set(src, 1, Tensor::zeros({0}, DType::I64)); }), ErrorKind::Shape);
  m = error_of([&] { cache.slice_set(src, 1, Tensor()); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  // The shapes, dtypes and dims as slice_set with a size_t start.
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1, 4}, DType::F16), 1, at1); });
  EXPECT_NE(m.find("every dim except dim 1"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 6, 3}, DType::F16), 1, at1); });
  EXPECT_NE(m.find("larger capacity"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 1, 3}, DType::F32), 1, at1); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(src, 3, at1); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  m = error_of([&] { cache.slice_set(Tensor::zeros({2, 2}, DType::F16), 1, at1); });
  EXPECT_NE(m.find("slice_set"), std::string::npos) << m;
  Tensor bc = Tensor::zeros({1, 3}, DType::F32).broadcast_as({4, 3});
  m = error_of([&] { bc.slice_set(Tensor::zeros({2, 3}, DType::F32), 0, at1); });
  EXPECT_NE(m.find("broadcast view"), std::string::npos) << m;
  EXPECT_TRUE(all_close(cache, std::vector<double>(30, 0), 0, 0));  // failures wrote nothing
  // A zero-row source writes nothing, whatever the start.
  cache.slice_set(Tensor::zeros({2, 0, 3}, DType::F16), 1, Tensor::full({1}, 9, DType::U8));
  EXPECT_TRUE(all_close(cache, std::vector<double>(30, 0), 0, 0));
}

TEST(CopyFrom, WholeViewsOverlapAndScalars) {
  Tensor x = iota({10});
  x.narrow(0, 2, 5).copy_from(x.narrow(0, 0, 5));  // overlapping: reads before it writes
  EXPECT_TRUE(all_close(x, {0, 1, 0, 1, 2, 3, 4, 7, 8, 9}, 0, 0));

  Tensor m = Tensor::zeros({3, 4}, DType::I64);
  m.t().copy_from(iota({4, 3}).to_dtype(DType::I64));  // m[j][i] = i * 3 + j
  std::vector<double> want(12);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 3; ++j) want[j * 4 + i] = double(i * 3 + j);
  EXPECT_TRUE(all_close(m, want, 0, 0));

  Tensor s = Tensor::zeros({}, DType::F64);
  s.copy_from(Tensor::full({}, 2.5, DType::F64));
  EXPECT_EQ(s.item<double>(), 2.5);
  Tensor grid = Tensor::zeros({2, 3}, DType::F32);
  grid.narrow(1, 1, 1).narrow(0, 1, 1).copy_from(Tensor::full({1, 1}, 7, DType::F32));
  EXPECT_TRUE(all_close(grid, {0, 0, 0, 0, 7, 0}, 0, 0));

  std::string e = error_of([&] { m.copy_from(Tensor::zeros({4, 3}, DType::I64)); });
  EXPECT_NE(e.find("copy_from"), std::string::npos) << e;
  e = error_of([&] { m.copy_from(Tensor::zeros({3, 4}, DType::F32)); });
  EXPECT_NE(e.find("copy_from"), std::string::npos) << e;
  e = error_of([&] { Tensor().copy_from(m); });
  EXPECT_NE(e.find("copy_from"), std::string::npos) << e;
}

TEST(DeviceServices, CpuSynchronizeAndPeakAreNoOps) {
  EXPECT_NO_THROW(synchronize(Device::cpu()));
  EXPECT_NO_THROW(reset_peak_memory(Device::cpu()));
  Tensor t = Tensor::zeros({1024}, DType::F32);
  EXPECT_EQ(memory_stats(Device::cpu()).peak, 0u);
}

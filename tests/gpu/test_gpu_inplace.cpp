// tests/test_inplace.cpp's cases on the GPU (slice_set with both starts, copy_from; the shared
// ones are in tests/inplace_cases.hpp), plus synchronize and the peak memory of the caching
// allocator. Expected values are written out by host loops here.
#include "inplace_cases.hpp"
#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
namespace inplace = wick::test::inplace;

namespace {

Device gpu() { return Device::gpu(0); }

Tensor iota(const Shape& s, double first = 0) { return inplace::iota(s, first, gpu()); }

TEST(GpuSliceSet, KvCacheAppendEveryDType) { inplace::kv_cache_append_every_dtype(gpu()); }

TEST(GpuSliceSet, ViewsStridesAndTheScatterPath) {
  // Into a view of a bigger storage.
  Tensor base = iota({4, 5, 3}, 100);
  Tensor view = base.narrow(0, 1, 2);
  view.slice_set(iota({2, 3, 3}), 1, 2);
  std::vector<double> want(60);
  for (size_t i = 0; i < 60; ++i) want[i] = double(100 + i);
  for (size_t h = 0; h < 2; ++h)
    for (size_t t = 0; t < 3; ++t)
      for (size_t d = 0; d < 3; ++d) want[(1 + h) * 15 + (2 + t) * 3 + d] = double(h * 9 + t * 3 + d);
  EXPECT_TRUE(all_close(base, want, 0, 0));

  // A permuted source into a (b, h, cap, d) cache.
  Tensor cache = Tensor::zeros({2, 2, 6, 4}, DType::F16, gpu());
  cache.slice_set(iota({2, 3, 2, 4}).to_dtype(DType::F16).permute({0, 2, 1, 3}), 2, 3);
  std::vector<double> want2(96, 0);
  for (size_t b = 0; b < 2; ++b)
    for (size_t h = 0; h < 2; ++h)
      for (size_t t = 0; t < 3; ++t)
        for (size_t d = 0; d < 4; ++d) want2[((b * 2 + h) * 6 + 3 + t) * 4 + d] = double(((b * 3 + t) * 2 + h) * 4 + d);
  EXPECT_TRUE(all_close(cache, want2, 0, 0));

  // Transposed destinations: one-element rows (few) and the scatter path (many).
  for (size_t cols : {4, 200}) {
    Tensor b2 = Tensor::zeros({cols, 6}, DType::F32, gpu());
    b2.t().slice_set(iota({3, cols}, 1), 0, 2);
    std::vector<double> w(cols * 6, 0);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < cols; ++j) w[j * 6 + 2 + i] = double(1 + i * cols + j);
    EXPECT_TRUE(all_close(b2, w, 0, 0)) << cols;
  }

  // Overlapping copy_from within one storage.
  Tensor x = iota({10});
  x.narrow(0, 2, 5).copy_from(x.narrow(0, 0, 5));
  EXPECT_TRUE(all_close(x, {0, 1, 0, 1, 2, 3, 4, 7, 8, 9}, 0, 0));

  // Mixed devices are an error.
  Tensor host = Tensor::zeros({2, 1, 3}, DType::F32);
  Tensor dev = Tensor::zeros({2, 5, 3}, DType::F32, gpu());
  EXPECT_THROW(dev.slice_set(host, 1, 0), Error);
}

TEST(GpuSliceSet, RandomViewsMatchLayoutMath) { inplace::random_views_match_layout_math(gpu()); }

TEST(GpuSliceSetTensorStart, EveryStartDTypeAndClamping) { inplace::tensor_start_every_dtype_and_clamp(gpu()); }
TEST(GpuSliceSetTensorStart, KvCacheViewsAndOverlap) { inplace::tensor_start_views(gpu()); }
TEST(GpuSliceSetTensorStart, RandomViewsMatchLayoutMath) { inplace::random_views_match_layout_math(gpu(), true); }

// A decode-sized append: one token per head into an f16/bf16 (1, 4, 1100, 128) cache at positions
// kept on the device, each write checked against the same write with a size_t start on the CPU.
TEST(GpuSliceSetTensorStart, DecodeAppendMatchesTheCpu) {
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor host = Tensor::zeros({1, 4, 1100, 128}, dt);
    Tensor dev = host.to_device(gpu());
    for (size_t p : {size_t(0), size_t(1), size_t(255), size_t(256), size_t(257), size_t(1099)}) {
      Tensor tok = Tensor::randn({1, 4, 1, 128}, DType::F32, Device::cpu(), 40 + p).to_dtype(dt);
      host.slice_set(tok, 2, p);
      dev.slice_set(tok.to_device(gpu()), 2, Tensor::full({1}, double(p), DType::I32, gpu()));
    }
    // and a clamped start: past the end writes the last row
    Tensor tok = Tensor::randn({1, 4, 1, 128}, DType::F32, Device::cpu(), 39).to_dtype(dt);
    host.slice_set(tok, 2, size_t(1099));
    dev.slice_set(tok.to_device(gpu()), 2, Tensor::full({1}, 5000, DType::I64, gpu()));
    EXPECT_TRUE(all_close(dev, wick::test::values(host), 0, 0)) << dtype_name(dt);
  }
  // The start on another device than the destination.
  Tensor d = Tensor::zeros({2, 5, 3}, DType::F32, gpu());
  EXPECT_THROW(d.slice_set(Tensor::zeros({2, 1, 3}, DType::F32, gpu()), 1, Tensor::full({1}, 1, DType::I32)), Error);
}

TEST(GpuDeviceServices, SynchronizeAndPeakMemory) {
  Device d = gpu();
  EXPECT_NO_THROW(synchronize(d));
  reset_peak_memory(d);
  const MemoryStats start = memory_stats(d);
  EXPECT_EQ(start.peak, start.in_use);
  {
    Tensor big = Tensor::zeros({size_t(8) << 20}, DType::U8, d);  // 8 MiB
    synchronize(d);
    EXPECT_GE(memory_stats(d).peak, start.in_use + (size_t(8) << 20));
  }
  const MemoryStats after = memory_stats(d);
  EXPECT_EQ(after.in_use, start.in_use);
  EXPECT_GE(after.peak, start.in_use + (size_t(8) << 20));  // the high-water mark stays
  reset_peak_memory(d);
  EXPECT_EQ(memory_stats(d).peak, after.in_use);
}

}  // namespace

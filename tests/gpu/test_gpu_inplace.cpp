// tests/test_inplace.cpp's cases on the GPU (slice_set, copy_from), plus synchronize and the peak
// memory of the caching allocator. Expected values are written out by host loops here.
#include <algorithm>
#include <random>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::values;

namespace {

Device gpu() { return Device::gpu(0); }

Tensor iota(const Shape& s, double first = 0) {
  return Tensor::arange(first, first + double(shape_numel(s)), 1, DType::F32, gpu()).reshape(s);
}

TEST(GpuSliceSet, KvCacheAppendEveryDType) {
  for (DType dt : kAllDTypes) {
    if (dt == DType::U8 || dt == DType::U32) continue;  // -1 is not a value of theirs
    Tensor cache = Tensor::full({2, 5, 3}, -1, dt, gpu());
    cache.slice_set(iota({2, 2, 3}).to_dtype(dt), 1, 1);
    std::vector<double> want(30, -1);
    for (size_t h = 0; h < 2; ++h)
      for (size_t t = 0; t < 2; ++t)
        for (size_t d = 0; d < 3; ++d) want[h * 15 + (1 + t) * 3 + d] = double(h * 6 + t * 3 + d);
    EXPECT_TRUE(all_close(cache, want, 0, 0)) << dtype_name(dt);
  }
}

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

TEST(GpuSliceSet, RandomViewsMatchLayoutMath) {
  // As tests/test_inplace.cpp: random permuted and narrowed views, checked through their strides.
  std::mt19937 rng(12345);
  auto pick = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rank = pick(1, 4);
    Shape shape(rank);
    for (size_t& d : shape) d = pick(1, trial % 3 == 0 && rank <= 3 ? 40 : 6);
    Tensor base = iota(shape, 1000);
    std::vector<double> storage = values(base);
    std::vector<int64_t> order(rank);
    for (size_t i = 0; i < rank; ++i) order[i] = int64_t(i);
    std::shuffle(order.begin(), order.end(), rng);
    Tensor view = base.permute(order);
    for (size_t d = 0; d < rank; ++d) {
      const size_t n = view.dim(int64_t(d)), start = pick(0, n - 1);
      view = view.narrow(int64_t(d), start, pick(1, n - start));
    }
    const size_t dim = pick(0, rank - 1), n = view.dim(int64_t(dim));
    const size_t start = pick(0, n - 1), len = pick(0, n - start);
    Shape src_shape = view.shape();
    src_shape[dim] = len;
    const Tensor src = iota(src_shape);
    view.slice_set(src, int64_t(dim), start);

    const Layout& l = view.layout();
    std::vector<size_t> idx(rank, 0);
    for (size_t i = 0; i < src.numel(); ++i) {
      size_t off = l.offset;
      for (size_t d = 0; d < rank; ++d) off += (idx[d] + (d == dim ? start : 0)) * size_t(l.strides[d]);
      storage[off] = double(i);
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < src_shape[d]) break;
        idx[d] = 0;
      }
    }
    ASSERT_TRUE(all_close(base, storage, 0, 0))
        << "trial " << trial << " view " << l.str() << " dim " << dim << " start " << start << " len " << len;
  }
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

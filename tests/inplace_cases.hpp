#pragma once
// In-place write cases (Tensor::slice_set) shared by tests/test_inplace.cpp (CPU) and
// tests/gpu/test_gpu_inplace.cpp (GPU): each runs on the device it is given. Expected values are
// written out by host loops here.
#include <algorithm>
#include <random>

#include "test_util.hpp"

namespace wick::test::inplace {

// first, first + 1, ... in f32 on `dev`, shaped `s`.
inline Tensor iota(const Shape& s, double first, const Device& dev) {
  return Tensor::arange(first, first + double(shape_numel(s)), 1, DType::F32, dev).reshape(s);
}

// cache (h=2, cap=5, d=3), -1 everywhere; then rows 1..2 of each head get src (2, 2, 3) = 0..11,
// in every dtype that has -1.
inline void kv_cache_append_every_dtype(const Device& dev) {
  for (DType dt : kAllDTypes) {
    if (dt == DType::U8 || dt == DType::U32) continue;  // -1 is not a value of theirs
    Tensor cache = Tensor::full({2, 5, 3}, -1, dt, dev);
    cache.slice_set(iota({2, 2, 3}, 0, dev).to_dtype(dt), 1, 1);
    std::vector<double> want(30, -1);
    for (size_t h = 0; h < 2; ++h)
      for (size_t t = 0; t < 2; ++t)
        for (size_t d = 0; d < 3; ++d) want[h * 15 + (1 + t) * 3 + d] = double(h * 6 + t * 3 + d);
    EXPECT_TRUE(all_close(cache, want, 0, 0)) << dtype_name(dt);
  }
}

// Random bases, permuted and narrowed into views, written at random ranges; the expectation
// applies each element through the view's strides on a host copy of the storage.
inline void random_views_match_layout_math(const Device& dev) {
  std::mt19937 rng(12345);
  auto pick = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rank = pick(1, 4);
    Shape shape(rank);
    for (size_t& d : shape) d = pick(1, trial % 3 == 0 && rank <= 3 ? 40 : 6);
    Tensor base = iota(shape, 1000, dev);
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
    const Tensor src = iota(src_shape, 0, dev);
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

}  // namespace wick::test::inplace

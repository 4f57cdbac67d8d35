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

// slice_set with the start in a tensor of every index dtype: cache (2, 5, 3) = -1, src (2, 2, 3) =
// 0..11 at rows [r, r + 2) of dim 1, where r is the start clamped to [0, 3].
inline void tensor_start_every_dtype_and_clamp(const Device& dev) {
  struct Start {
    DType dt;
    double given;
    size_t row;  // where the rows go
  };
  const Start starts[] = {{DType::U8, 2, 2},   {DType::U32, 0, 0},           {DType::I16, 1, 1},
                          {DType::I32, 3, 3},  {DType::I64, 2, 2},           {DType::U8, 4, 3},
                          {DType::U8, 255, 3}, {DType::U32, 4294967295., 3}, {DType::I16, -1, 0},
                          {DType::I32, -7, 0}, {DType::I64, -1e12, 0},       {DType::I64, 1e12, 3}};
  for (const Start& st : starts) {
    Tensor cache = Tensor::full({2, 5, 3}, -1, DType::F32, dev);
    cache.slice_set(iota({2, 2, 3}, 0, dev), 1, Tensor::full({1}, st.given, st.dt, dev));
    std::vector<double> want(30, -1);
    for (size_t h = 0; h < 2; ++h)
      for (size_t t = 0; t < 2; ++t)
        for (size_t d = 0; d < 3; ++d) want[h * 15 + (st.row + t) * 3 + d] = double(h * 6 + t * 3 + d);
    EXPECT_TRUE(all_close(cache, want, 0, 0)) << dtype_name(st.dt) << " " << st.given;
  }
}

// A (1, 2, 8, 4) KV-cache view (rows 1..8 of a (1, 2, 10, 4) storage = 100..) written at dim 2
// from a permuted (b, t, h, d) source, with rank-0 and offset start tensors, one of them clamped;
// then sources and starts that share the destination's storage.
inline void tensor_start_views(const Device& dev) {
  Tensor base = iota({1, 2, 10, 4}, 100, dev);
  Tensor cache = base.narrow(2, 1, 8);
  const Tensor src = iota({1, 3, 2, 4}, 0, dev).permute({0, 2, 1, 3});  // (1, 2, 3, 4), src[h][t][d] = (t*2+h)*4+d
  auto expect_rows = [&](std::vector<double>& want, size_t row) {
    for (size_t h = 0; h < 2; ++h)
      for (size_t t = 0; t < 3; ++t)
        for (size_t d = 0; d < 4; ++d) want[(h * 10 + 1 + row + t) * 4 + d] = double((t * 2 + h) * 4 + d);
  };
  std::vector<double> want = values(iota({1, 2, 10, 4}, 100, Device::cpu()));
  cache.slice_set(src, 2, Tensor::full({}, 2, DType::I32, dev));  // view rows 2..4
  expect_rows(want, 2);
  EXPECT_TRUE(all_close(base, want, 0, 0));
  // start 7 (element 7 of an arange, a view with an offset) clamps to 8 - 3 = 5: rows 5..7.
  cache.slice_set(src, -2, Tensor::arange(0, 10, 1, DType::I64, dev).narrow(0, 7, 1).reshape({1, 1}));
  expect_rows(want, 5);
  EXPECT_TRUE(all_close(base, want, 0, 0));

  // The source overlaps the destination: read out first (as memmove).
  Tensor x = iota({10}, 0, dev);
  x.slice_set(x.narrow(0, 0, 5), 0, Tensor::full({1}, 2, DType::U32, dev));
  EXPECT_TRUE(all_close(x, {0, 1, 0, 1, 2, 3, 4, 7, 8, 9}, 0, 0));
  // The start is an element the write overwrites: it is read before (0, not 9 clamped to 3).
  Tensor ids = Tensor::zeros({5}, DType::I64, dev);
  ids.slice_set(Tensor::full({2}, 9, DType::I64, dev), 0, ids.narrow(0, 0, 1));
  EXPECT_TRUE(all_close(ids, {9, 9, 0, 0, 0}, 0, 0));
}

// Random bases, permuted and narrowed into views, written at random ranges; the expectation
// applies each element through the view's strides on a host copy of the storage. tensor_start:
// the start goes in a tensor of a random index dtype instead.
inline void random_views_match_layout_math(const Device& dev, bool tensor_start = false) {
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
    if (tensor_start) {
      const DType sdt[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};
      view.slice_set(src, int64_t(dim), Tensor::full({}, double(start), sdt[trial % 5], dev));
    } else {
      view.slice_set(src, int64_t(dim), start);
    }

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

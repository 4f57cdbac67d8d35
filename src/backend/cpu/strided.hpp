#pragma once
// Walking strided layouts on the CPU: N operands over one logical shape, visited as runs
// along the innermost merged dim so that contiguous runs become tight (vectorisable) loops.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/thread_pool.hpp"
#include "wick/layout.hpp"


namespace wick::cpu {

template <size_t N> struct StridedPlan {
  std::vector<size_t> dims;                       // merged dims, outermost first (at least one)
  std::array<std::vector<int64_t>, N> strides;    // per operand, per merged dim
  std::array<size_t, N> offsets{};                // start offsets
  size_t numel = 0;
};

// All layouts must have `shape`. Dims of size 1 are dropped; neighbours that are contiguous
// with each other in every operand are merged.
template <size_t N> StridedPlan<N> plan_strided(const Shape& shape, const std::array<const Layout*, N>& ls) {
  StridedPlan<N> p;
  p.numel = shape_numel(shape);
  for (size_t k = 0; k < N; ++k) p.offsets[k] = ls[k]->offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = p.strides[k].back() == ls[k]->strides[d] * int64_t(shape[d]);
    if (merge) {
      p.dims.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) p.strides[k].back() = ls[k]->strides[d];
    } else {
      p.dims.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) p.strides[k].push_back(ls[k]->strides[d]);
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) p.strides[k].push_back(1);
  }
  return p;
}

// Calls run(i, len, offs, inner) for the row-major elements [begin, end): elements i..i+len
// of the result sit, for operand k, at offs[k] + j * inner[k] for j < len.
template <size_t N, class Run>
void for_each_run(const StridedPlan<N>& p, size_t begin, size_t end, Run&& run) {
  if (begin >= end) return;
  const size_t r = p.dims.size();
  const size_t inner_n = p.dims[r - 1];
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = p.strides[k][r - 1];
  // multi-index of `begin`
  std::vector<size_t> idx(r);
  size_t rem = begin;
  for (size_t d = r; d-- > 0;) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
  }
  std::array<size_t, N> offs;
  for (size_t k = 0; k < N; ++k) {
    int64_t o = int64_t(p.offsets[k]);
    for (size_t d = 0; d < r; ++d) o += int64_t(idx[d]) * p.strides[k][d];
    offs[k] = size_t(o);
  }
  size_t i = begin;
  while (i < end) {
    size_t len = std::min(inner_n - idx[r - 1], end - i);
    run(i, len, offs, inner);
    i += len;
    if (i >= end) break;
    // advance to the start of the next run
    for (size_t k = 0; k < N; ++k) offs[k] = size_t(int64_t(offs[k]) + int64_t(len) * inner[k]);
    idx[r - 1] += len;
    for (size_t d = r - 1; d > 0 && idx[d] == p.dims[d]; --d) {
      idx[d] = 0;
      idx[d - 1]++;
      for (size_t k = 0; k < N; ++k)
        offs[k] = size_t(int64_t(offs[k]) - int64_t(p.dims[d]) * p.strides[k][d] + p.strides[k][d - 1]);
    }
  }
}

// Splits [0, n) into chunks run on all cores (thread_pool.hpp); small work stays on the calling
// thread. Chunks are claimed dynamically, several per thread, so that a thread the OS preempts
// delays the op by at most one chunk.
constexpr size_t kParallelGrain = 32768;
template <class F> void parallel_for(size_t n, F&& f, size_t grain = kParallelGrain) {
  const size_t threads = pool_threads();
  if (threads > 1 && n >= 2 * grain) {
    struct Ctx {
      std::remove_reference_t<F>* f;
      size_t n, chunks;
    } ctx{&f, n, std::min(n / grain, threads * 8)};
    parallel_chunks(ctx.chunks, [](void* p, size_t c) {
      const Ctx& x = *static_cast<const Ctx*>(p);
      (*x.f)(x.n * c / x.chunks, x.n * (c + 1) / x.chunks);
    }, &ctx);
    return;
  }
  f(size_t(0), n);
}

namespace detail {
// A one-operand map whose innermost merged dim is strided while the dim above it is contiguous
// (a transposed matrix, batched or not). Walking the output in order would read one element per
// cache line and page; this goes by 32 x 32 tiles instead: each tile reads 32 contiguous source
// runs and writes 32 output rows, all of which stay in L1.
template <class Out, class In, class F>
void map_transposed_tiles(Out* out, const StridedPlan<1>& p, F& f, const In* in) {
  constexpr size_t kTile = 32;
  const size_t r = p.dims.size();
  const size_t rows = p.dims[r - 2], cols = p.dims[r - 1];
  const int64_t col_stride = p.strides[0][r - 1];  // the row stride is 1
  const size_t row_tiles = (rows + kTile - 1) / kTile;
  const size_t outer = p.numel / (rows * cols);
  parallel_for(
      outer * row_tiles,
      [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) {
          const size_t o = t / row_tiles, r0 = (t % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
          int64_t base = int64_t(p.offsets[0]);  // source offset of outer index o
          for (size_t d = r - 2, rem = o; d-- > 0; rem /= p.dims[d]) base += int64_t(rem % p.dims[d]) * p.strides[0][d];
          Out* ob = out + o * rows * cols;
          for (size_t c0 = 0; c0 < cols; c0 += kTile) {
            const size_t c1 = std::min(cols, c0 + kTile);
            for (size_t c = c0; c < c1; ++c) {
              const In* src = in + base + int64_t(c) * col_stride;
              for (size_t i = r0; i < r1; ++i) ob[i * cols + c] = f(src[i]);
            }
          }
        }
      },
      std::max<size_t>(1, kParallelGrain / (kTile * cols)));
}

template <class Out, class F, class Tup, size_t... K>
void map_strided_impl(Out* out, const Shape& shape, F& f, const std::array<const Layout*, sizeof...(K)>& ls,
                      const Tup& in, std::index_sequence<K...>) {
  constexpr size_t N = sizeof...(K);
  auto plan = plan_strided<N>(shape, ls);
  if constexpr (N == 1) {
    const size_t r = plan.dims.size();
    if (r >= 2 && plan.strides[0][r - 2] == 1 && plan.strides[0][r - 1] != 1 && plan.dims[r - 2] >= 16 &&
        plan.dims[r - 1] >= 16) {
      map_transposed_tiles(out, plan, f, std::get<0>(in));
      return;
    }
  }
  parallel_for(plan.numel, [&](size_t b, size_t e) {
    for_each_run<N>(plan, b, e, [&](size_t i, size_t len, const std::array<size_t, N>& offs,
                                    const std::array<int64_t, N>& inner) {
      Out* o = out + i;
      if (((inner[K] == 1) && ...)) {
        for (size_t j = 0; j < len; ++j) o[j] = f((std::get<K>(in) + offs[K])[j]...);
      } else {
        for (size_t j = 0; j < len; ++j) o[j] = f(std::get<K>(in)[int64_t(offs[K]) + int64_t(j) * inner[K]]...);
      }
    });
  });
}
}  // namespace detail

// out[i] = f(in0[..], in1[..], ...) for the row-major elements i of `shape`; the inputs are
// read through their layouts (any strides); out is contiguous. Runs on all cores.
template <class Out, class F, class... In>
void map_strided(Out* out, const Shape& shape, F&& f, const std::array<const Layout*, sizeof...(In)>& ls,
                 const In*... in) {
  detail::map_strided_impl(out, shape, f, ls, std::make_tuple(in...), std::index_sequence_for<In...>{});
}

}  // namespace wick::cpu

// GPU fused nn ops: softmax / log_softmax over the last dim, rms_norm / layer_norm, rotary
// embeddings and silu_mul. The math is src/ops/nn.hpp's (as the CPU's src/backend/cpu/nn.cpp).
//
// Row ops read each input element from global memory once and write it once: a row is held
// in registers (E elements per thread, a template, picked on the host from the row length),
// loaded with 16-byte vectors when the row start is aligned and the length is a multiple of
// the vector width. Rows of up to tune::kNnSmallRowCols columns go to groups of <= 32 threads
// (several rows per block, shuffle-only reductions: a group never straddles a warp of 32 or
// 64 lanes); longer rows get one block each (warp shuffles, then partials through shared
// memory). Rows too long for the registers take a block that re-reads the row (3 passes).
// Half types and f8 compute and accumulate in f32, f64 in f64, one rounding at the output.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/q8_1_store.cuh"
#include "ops/dtype_dispatch.hpp"
#include "ops/nn.hpp"
#include "ops/numeric.hpp"
#include "ops/op_dispatch.hpp"
#include "ops/positions.hpp"

namespace wick::gpu {
namespace {

// ---- vector loads: V elements of T as one 2- to 16-byte word (p aligned to V * sizeof(T)).
template <int B> struct RawWord;
template <> struct RawWord<2> { using type = unsigned short; };
template <> struct RawWord<4> { using type = unsigned int; };
template <> struct RawWord<8> { using type = uint2; };
template <> struct RawWord<16> { using type = uint4; };

// Vector width of the aligned path: 16 bytes, at most 8 elements (f8 reads 8 bytes).
template <class T> constexpr int kVec = 16 / int(sizeof(T)) < 8 ? 16 / int(sizeof(T)) : 8;

// A load kept as its raw word until it is used (fewer registers than V converted values).
template <class T, int V> struct Raw {
  using type = typename RawWord<sizeof(T) * V>::type;
};
template <class T> struct Raw<T, 1> {
  using type = T;
};
template <class T, int V> __device__ __forceinline__ typename Raw<T, V>::type load_raw(const T* p) {
  return *reinterpret_cast<const typename Raw<T, V>::type*>(p);
}
template <class T, int V> __device__ __forceinline__ void unpack_raw(const typename Raw<T, V>::type& w, compute_t<T>* x) {
  if constexpr (V == 1) {
    x[0] = to_compute(w);
  } else {
    T t[V];
    __builtin_memcpy(t, &w, sizeof(w));
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = to_compute(t[j]);
  }
}
template <class T, int V> __device__ __forceinline__ void load_vec(const T* p, compute_t<T>* x) {
  unpack_raw<T, V>(load_raw<T, V>(p), x);
}
template <class T, int V> __device__ __forceinline__ void store_vec(T* p, const compute_t<T>* c) {
  if constexpr (V == 1) {
    p[0] = cast<T>(c[0]);
  } else {
    using W = typename RawWord<sizeof(T) * V>::type;
    T t[V];
#pragma unroll
    for (int j = 0; j < V; ++j) t[j] = cast<T>(c[j]);
    W w;
    __builtin_memcpy(&w, t, sizeof(W));
    *reinterpret_cast<W*>(p) = w;
  }
}

bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// ---- reductions over the threads of one row.
struct SumOp {
  template <class C> __device__ C operator()(C a, C b) const { return a + b; }
};
// A NaN never wins (as the CPU): it reaches the output through the sum instead.
struct MaxOp {
  template <class C> __device__ C operator()(C a, C b) const { return b > a ? b : a; }
};

// This thread's chunk k of a row (V elements) starts at column (lane + k * g) * V; it exists
// when the column is below n (a dead row has n = 0). Registers rows have n <= 32768, so int
// columns; V > 1 needs n % V == 0.
__device__ __forceinline__ int chunk_col(int k, int lane, int g, int v) { return (lane + k * g) * v; }

// Loads this thread's share of a row; absent chunks read as 0.
template <class T, int V, int K>
__device__ __forceinline__ void load_row(const T* p, int n, int lane, int g, compute_t<T>* x) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int col = chunk_col(k, lane, g, V);
    if (col < n) {
      load_vec<T, V>(p + col, x + k * V);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) x[k * V + j] = compute_t<T>(0);
    }
  }
}

// add_rms_norm: x += the residual's row, each element rounded to T as add() rounds, and that sum
// stored (one chunk of V at a time, so no second row of registers).
template <class T, int V, int K>
__device__ __forceinline__ void add_residual(const T* r, T* sum, int n, int lane, int g, compute_t<T>* x) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int col = chunk_col(k, lane, g, V);
    if (col < n) {
      compute_t<T> rv[V];
      load_vec<T, V>(r + col, rv);
#pragma unroll
      for (int j = 0; j < V; ++j) x[k * V + j] = to_compute(cast<T>(x[k * V + j] + rv[j]));
      store_vec<T, V>(sum + col, x + k * V);
    }
  }
}

// ---- softmax / log_softmax, rows in registers. Rows base.. of a round go to the block's
// groups of g threads; the loop bound is uniform over the block (barriers inside).
template <class T, int V, int E>
__global__ void WICK_LAUNCH_BOUNDS(tune::kNnMaxRowBlock)
    softmax_rows_kernel(const T* WICK_RESTRICT in, T* WICK_RESTRICT out, int64_t rows, int n_cols, int g, bool log) {
  kernel_entry();
  using C = compute_t<T>;
  constexpr int K = E / V;
  __shared__ C red[2][kMaxWarpsPerBlock];
  const int per_block = int(blockDim.x) / g, lane = int(threadIdx.x) % g, sub = int(threadIdx.x) / g;
  const int64_t step = int64_t(gridDim.x) * per_block;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows; base += step) {
    const int64_t row = base + sub;
    const int n = row < rows ? n_cols : 0;  // a dead row loads nothing but joins the reductions
    const int64_t off = (row < rows ? row : 0) * n_cols;
    C x[E];
    load_row<T, V, K>(in + off, n, lane, g, x);
    C mx = -std::numeric_limits<C>::infinity();
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (chunk_col(k, lane, g, V) < n)
#pragma unroll
        for (int j = 0; j < V; ++j) mx = MaxOp{}(mx, x[k * V + j]);
    mx = row_reduce(mx, MaxOp{}, -std::numeric_limits<C>::infinity(), g, red[0]);
    // softmax keeps exp(x - max) in x: out = that / sum, nn::softmax_out's value without a
    // second exp. log_softmax keeps x for nn::softmax_out.
    C s = 0;
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (chunk_col(k, lane, g, V) < n)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const C e = fmath::exp(x[k * V + j] - mx);
          s += e;
          if (!log) x[k * V + j] = e;
        }
    s = row_reduce(s, SumOp{}, C(0), g, red[1]);
    const C inv_s = C(1) / s;  // a multiply per element instead of a divide (<= 1 ulp of C apart)
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int col = chunk_col(k, lane, g, V);
      if (col < n) {
#pragma unroll
        for (int j = 0; j < V; ++j)
          x[k * V + j] = log ? nn::softmax_out(x[k * V + j], mx, s, true) : x[k * V + j] * inv_s;
        store_vec<T, V>(out + off + col, x + k * V);
      }
    }
  }
}

// Long rows (tune::kNnOnlineCols and up, and any row too long for the registers): a block per
// row, two passes. The first keeps a running (max, sum of exp(x - max)) per thread, rescaling
// the sum once per V-element chunk; the second re-reads the row, which the first has just
// brought into L2, and writes the output. Few registers, so two 1024-thread blocks share an
// SM and one row's reads overlap another's writes (a register-held 32000-column row fills an
// SM alone and leaves its memory pipe idle between phases).
template <class T, int V>
__global__ void WICK_LAUNCH_BOUNDS(tune::kNnMaxRowBlock)
    softmax_online_kernel(const T* WICK_RESTRICT in, T* WICK_RESTRICT out, int64_t rows, int64_t n, bool log) {
  kernel_entry();
  using C = compute_t<T>;
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  __shared__ C red[2][kMaxWarpsPerBlock];
  const int g = int(blockDim.x);
  const int64_t nv = n / V;  // V > 1 only when n % V == 0 and the rows are aligned
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = in + row * n;
    T* q = out + row * n;
    C m = kNegInf, l = C(0);
    for (int64_t i = threadIdx.x; i < nv; i += g) {
      C x[V];
      load_vec<T, V>(p + i * V, x);
      C cm = m;
#pragma unroll
      for (int j = 0; j < V; ++j) cm = MaxOp{}(cm, x[j]);
      if (cm == kNegInf) {  // nothing finite yet: only a NaN can matter (it makes the row NaN)
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (x[j] != x[j]) l = x[j];
        continue;
      }
      if (m != kNegInf) l *= fmath::exp(m - cm);  // else l is 0, or NaN from an earlier chunk
#pragma unroll
      for (int j = 0; j < V; ++j) l += fmath::exp(x[j] - cm);
      m = cm;
    }
    const C mx = row_reduce(m, MaxOp{}, kNegInf, g, red[0]);
    // This thread's sum rescaled to the row max (l is 0 or NaN when it saw nothing finite); a
    // row with nothing finite gives l * exp(NaN): NaN, as the CPU.
    const C mine = (m == kNegInf && mx != kNegInf) ? l : l * fmath::exp(m - mx);
    const C sum = row_reduce(mine, SumOp{}, C(0), g, red[1]);
    const C inv_s = C(1) / sum;
    for (int64_t i = threadIdx.x; i < nv; i += g) {
      C x[V];
      load_vec<T, V>(p + i * V, x);
#pragma unroll
      for (int j = 0; j < V; ++j) x[j] = log ? nn::softmax_out(x[j], mx, sum, true) : fmath::exp(x[j] - mx) * inv_s;
      store_vec<T, V>(q + i * V, x);
    }
  }
}

// ---- rms_norm / layer_norm (w, b may be null: 1 and 0). mean = sum * inv_n (as the CPU);
// the variance is a second pass around the mean over the registers. Q8: the output rows in Q8_1
// at q8 too (a block's 32 values in 32 / V lanes of one group: the launch checks that g is a
// multiple of that and n_cols of 32); a template so the plain kernels keep their registers.
template <class T, int V, int E, bool Q8 = false>
__global__ void WICK_LAUNCH_BOUNDS(tune::kNnMaxRowBlock)
    norm_rows_kernel(const T* WICK_RESTRICT in, const T* WICK_RESTRICT w, const T* WICK_RESTRICT b,
                     T* WICK_RESTRICT out, const T* WICK_RESTRICT res, T* WICK_RESTRICT sum, int64_t rows, int n_cols,
                     int g, compute_t<T> inv_n, double eps, bool rms, uint8_t* WICK_RESTRICT q8) {
  kernel_entry();
  using C = compute_t<T>;
  constexpr int K = E / V;
  constexpr bool kEarlyW = E <= 16 && K * ((V * sizeof(T) + 3) / 4) <= 8;  // the weight's words: 8 registers
  __shared__ C red[2][kMaxWarpsPerBlock];
  int ph = 0;  // which red buffer the next reduction uses (rms_norm has one per row)
  const int per_block = int(blockDim.x) / g, lane = int(threadIdx.x) % g, sub = int(threadIdx.x) / g;
  const int64_t step = int64_t(gridDim.x) * per_block;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows; base += step) {
    const int64_t row = base + sub;
    const int n = row < rows ? n_cols : 0;
    const int64_t off = (row < rows ? row : 0) * n_cols;
    C x[E];
    load_row<T, V, K>(in + off, n, lane, g, x);
    // The weight's chunks load with the row, before the reduction: loaded after it they were one
    // more round trip to memory on the path of a one-row (decode step) norm. Only where they fit
    // the registers beside the row (the 64 of the launch bound; larger shares spilled).
    typename Raw<T, V>::type wq[kEarlyW ? K : 1] = {};
    if constexpr (kEarlyW)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int col = chunk_col(k, lane, g, V);
        if (w && col < n) wq[k] = load_raw<T, V>(w + col);
      }
    if (res) add_residual<T, V, K>(res + off, sum + off, n, lane, g, x);
    C mean = 0;
    if (!rms) {
      C s = 0;
#pragma unroll
      for (int k = 0; k < E; ++k) s += x[k];  // absent elements are 0
      mean = row_reduce(s, SumOp{}, C(0), g, red[ph]) * inv_n;
      ph ^= 1;
    }
    C ss = 0;
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (chunk_col(k, lane, g, V) < n)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const C dx = x[k * V + j] - mean;
          ss += dx * dx;
        }
    ss = row_reduce(ss, SumOp{}, C(0), g, red[ph]);
    ph ^= 1;
    const C rstd = nn::norm_rstd(ss * inv_n, eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int col = chunk_col(k, lane, g, V);
      if (col < n) {
        C wv[V], bv[V];
        if (w) {
          if constexpr (kEarlyW)
            unpack_raw<T, V>(wq[k], wv);
          else
            load_vec<T, V>(w + col, wv);
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) wv[j] = C(1);
        }
        if (b) {
          load_vec<T, V>(b + col, bv);
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) bv[j] = C(0);
        }
#pragma unroll
        for (int j = 0; j < V; ++j) x[k * V + j] = nn::norm_out(x[k * V + j], mean, rstd, wv[j], bv[j]);
        store_vec<T, V>(out + off + col, x + k * V);
      }
      if constexpr (Q8) {  // every lane of the wave reaches the shuffles
        float qv[V];
#pragma unroll
        for (int j = 0; j < V; ++j) qv[j] = col < n ? float(to_compute(cast<T>(x[k * V + j]))) : 0.0f;
        const int64_t blk = col < n ? (row * n_cols + col) / 32 : 0;
        store_q8_1<V>(qv, lane % (32 / V), col < n, q8 + blk * quant::dot::kQ8_1Bytes);
      }
    }
  }
}

template <class T>
__global__ void WICK_LAUNCH_BOUNDS(tune::kNnMaxRowBlock)
    norm_long_kernel(const T* WICK_RESTRICT in, const T* WICK_RESTRICT w, const T* WICK_RESTRICT b,
                     T* WICK_RESTRICT out, const T* WICK_RESTRICT res, T* WICK_RESTRICT sum, int64_t rows, int64_t n,
                     compute_t<T> inv_n, double eps, bool rms) {
  kernel_entry();
  using C = compute_t<T>;
  __shared__ C red[2][kMaxWarpsPerBlock];
  int ph = 0;
  const int g = int(blockDim.x);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = in + row * n;
    T* q = out + row * n;
    if (res) {
      // add_rms_norm: the rounded sums first; every later pass reads them (each thread its own j's).
      T* sp = sum + row * n;
      for (int64_t j = threadIdx.x; j < n; j += g) sp[j] = cast<T>(to_compute(p[j]) + to_compute(res[row * n + j]));
      p = sp;
    }
    C mean = 0;
    if (!rms) {
      C s = 0;
      for (int64_t j = threadIdx.x; j < n; j += g) s += to_compute(p[j]);
      mean = row_reduce(s, SumOp{}, C(0), g, red[ph]) * inv_n;
      ph ^= 1;
    }
    C ss = 0;
    for (int64_t j = threadIdx.x; j < n; j += g) {
      const C dx = to_compute(p[j]) - mean;
      ss += dx * dx;
    }
    ss = row_reduce(ss, SumOp{}, C(0), g, red[ph]);
    ph ^= 1;
    const C rstd = nn::norm_rstd(ss * inv_n, eps);
    for (int64_t j = threadIdx.x; j < n; j += g)
      q[j] = cast<T>(nn::norm_out(to_compute(p[j]), mean, rstd, w ? to_compute(w[j]) : C(1), b ? to_compute(b[j]) : C(0)));
  }
}

// ---- launch plans of the row ops.
struct RowPlan {
  int g;      // threads per row
  int block;  // threads per block
  int e;      // elements per thread held in registers; 0: the row is too long (long kernel)
};

int pow2_at_least(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p <<= 1;
  return p;
}

// The most elements per thread that stay in registers without spilling at 1024 threads
// (64 registers, checked with ptxas -v; hip-clang's resource remarks for gfx90a): 32, but 8
// for f64 and for scalar loads 16 (AMD: 8), which keep an address per element.
template <class T, int V>
constexpr int kMaxE = sizeof(compute_t<T>) == 8 ? 8 : V == 1 ? (tune::kAmd ? 8 : 16) : 32;

template <class T> RowPlan plan_rows(int64_t n, bool vec) {
  const int max_e = vec ? kMaxE<T, kVec<T>> : kMaxE<T, 1>;
  auto fit = [&](int64_t threads) {
    for (int e = 8; e <= max_e; e *= 2)
      if (threads * e >= n) return e;
    return 0;
  };
  if (n <= tune::kNnSmallRowCols) {
    int g = pow2_at_least((n + tune::kNnSmallElems - 1) / tune::kNnSmallElems);
    g = g > 32 ? 32 : g;
    if (const int e = fit(g)) return {g, tune::kNnSmallBlock, e};
  }
  int block = pow2_at_least((n + tune::kNnRowElems - 1) / tune::kNnRowElems);
  if (block < tune::kNnMinRowBlock) block = tune::kNnMinRowBlock;
  if (block > tune::kNnMaxRowBlock) block = tune::kNnMaxRowBlock;
  for (; block <= tune::kNnMaxRowBlock; block *= 2)
    if (const int e = fit(block)) return {block, block, e};
  return {tune::kNnMaxRowBlock, tune::kNnMaxRowBlock, 0};
}

unsigned row_grid(int64_t rows, const RowPlan& p) {
  const int64_t per_block = p.e ? p.block / p.g : 1;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  return unsigned(blocks < tune::kNnMaxGrid ? blocks : tune::kNnMaxGrid);
}

// Calls f(integral_constant<V>, integral_constant<E>) for the plan's register count.
template <class T, int V, class F> void with_e(int e, F&& f) {
  if (e == 8) f(std::integral_constant<int, V>{}, std::integral_constant<int, 8>{});
  if constexpr (kMaxE<T, V> >= 16)
    if (e == 16) f(std::integral_constant<int, V>{}, std::integral_constant<int, 16>{});
  if constexpr (kMaxE<T, V> >= 32)
    if (e == 32) f(std::integral_constant<int, V>{}, std::integral_constant<int, 32>{});
}
template <class T, class F> void with_row_config(bool vec, int e, F&& f) {
  if (vec) with_e<T, kVec<T>>(e, f);
  else with_e<T, 1>(e, f);
}

// ---- rope: one thread per (x0, x1) pair; I is uint32_t when every index fits.
// Pair p of x (contiguous rows (b, h, t), or (b, t, h) for rope_thd): the row, the pair's two
// element offsets and their rotated values.
template <class T, class I> struct RopeAt {
  I row, f, s;
  T o0, o1;
};
template <class T, class I>
__device__ __forceinline__ RopeAt<T, I> rope_at(const T* x, const T* cs, const T* sn, I p, I half, I h, I t,
                                                RopeKind kind, bool per_batch) {
  using C = compute_t<T>;
  const I row = p / half, i = p - row * half;
  I ti, bi;
  if (kind == RopeKind::HalfSplitThd) {  // row is (b, t, h)
    const I q = row / h;
    ti = q % t;
    bi = q / t;
  } else {  // row is (b, h, t)
    ti = row % t;
    bi = row / (h * t);
  }
  const I table = ((per_batch ? bi * t : I(0)) + ti) * half + i;
  const I base = row * 2 * half;
  const I f = kind == RopeKind::Interleaved ? base + 2 * i : base + i;
  const I s = kind == RopeKind::Interleaved ? f + 1 : f + half;
  const C x0 = to_compute(x[f]), x1 = to_compute(x[s]);
  const C c = to_compute(cs[table]), sv = to_compute(sn[table]);
  return {row, f, s, cast<T>(nn::rope_first(x0, x1, c, sv)), cast<T>(nn::rope_second(x0, x1, c, sv))};
}

template <class T, class I>
__global__ void WICK_LAUNCH_BOUNDS(tune::kNnRopeBlock)
    rope_kernel(const T* WICK_RESTRICT x, const T* WICK_RESTRICT cs, const T* WICK_RESTRICT sn, T* WICK_RESTRICT out,
                I npairs, I half, I h, I t, RopeKind kind, bool per_batch) {
  kernel_entry();
  const I step = I(gridDim.x) * blockDim.x;
  for (I p = I(blockIdx.x) * blockDim.x + threadIdx.x; p < npairs; p += step) {
    const RopeAt<T, I> r = rope_at(x, cs, sn, p, half, h, t, kind, per_batch);
    out[r.f] = r.o0;
    out[r.s] = r.o1;
  }
}

// rope_kv_append's cache writes (KvAppend), element strides and offsets; nv = b * h_kv * t * d_v.
struct KvAppendArgs {
  void* k_cache;
  void* v_cache;
  const void* v;
  int64_t ks[4], vcs[4], vs[4];
  int64_t k_off, vc_off, v_off;
  int64_t q_heads, dv, nv;  // v's heads: the h - q_heads k heads
  const void* start;
  DType start_dt;
  int64_t start_offset, max_start;
};

// rope_kernel's pairs (rows (b, h, t)), the k heads' pairs also written to the cache, then one
// thread per element of v copied to its cache: a decode step's rope and two cache writes in one
// launch. The start row is read on the device (the launch replays in a graph). I indexes the pairs
// and v's elements (uint32_t when they fit); cache offsets are int64_t.
template <class T, class I>
__global__ void WICK_LAUNCH_BOUNDS(tune::kNnRopeBlock)
    rope_kv_append_kernel(const T* WICK_RESTRICT x, const T* WICK_RESTRICT cs, const T* WICK_RESTRICT sn,
                          T* WICK_RESTRICT out, I npairs, I half, I h, I t, RopeKind kind, bool per_batch,
                          KvAppendArgs a) {
  kernel_entry();
  const int64_t r0 = pos::clamp_start(pos::load(a.start, a.start_dt, a.start_offset), a.max_start);
  T* WICK_RESTRICT kc = static_cast<T*>(a.k_cache);
  T* WICK_RESTRICT vc = static_cast<T*>(a.v_cache);
  const T* WICK_RESTRICT v = static_cast<const T*>(a.v);
  const I step = I(gridDim.x) * blockDim.x, n = npairs + I(a.nv), q_heads = I(a.q_heads), dv = I(a.dv);
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (i < npairs) {
      const RopeAt<T, I> r = rope_at(x, cs, sn, i, half, h, t, kind, per_batch);
      out[r.f] = r.o0;
      out[r.s] = r.o1;
      const I bh = r.row / t, head = bh % h;
      if (head >= q_heads) {
        const I ti = r.row - bh * t, bi = bh / h, base = r.row * 2 * half;
        T* kp = kc + a.k_off + int64_t(bi) * a.ks[0] + int64_t(head - q_heads) * a.ks[1] + (int64_t(ti) + r0) * a.ks[2];
        kp[int64_t(r.f - base) * a.ks[3]] = r.o0;
        kp[int64_t(r.s - base) * a.ks[3]] = r.o1;
      }
    } else {
      I e = i - npairs;
      const I c = e % dv;
      e /= dv;
      const I ti = e % t;
      e /= t;
      const I h_kv = h - q_heads, kh = e % h_kv, bi = e / h_kv;
      vc[a.vc_off + int64_t(bi) * a.vcs[0] + int64_t(kh) * a.vcs[1] + (int64_t(ti) + r0) * a.vcs[2] +
         int64_t(c) * a.vcs[3]] =
          v[a.v_off + int64_t(bi) * a.vs[0] + int64_t(kh) * a.vs[1] + int64_t(ti) * a.vs[2] + int64_t(c) * a.vs[3]];
    }
  }
}

template <class T> struct SiluMulMap {
  __device__ T operator()(T a, T b) const { return cast<T>(nn::SiluMul{}(to_compute(a), to_compute(b))); }
};

// silu_mul over rows of n_cols (a multiple of 32) with unit last strides, written contiguous and
// as Q8_1 rows: V = 8 consecutive values per thread (16-byte loads for 2-byte types), a Q8_1
// block in 32 / V lanes. The loop bound is uniform over each wave (shuffles inside).
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    silu_mul_q8_kernel(const T* WICK_RESTRICT a, int64_t a_stride, const T* WICK_RESTRICT b, int64_t b_stride,
                       T* WICK_RESTRICT out, uint8_t* WICK_RESTRICT q8, int64_t rows, int64_t n_cols) {
  kernel_entry();
  constexpr int V = 8;
  const int64_t per_row = n_cols / V, chunks = rows * per_row, step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x; base < chunks; base += step) {
    const int64_t c = base + threadIdx.x;
    const bool valid = c < chunks;
    const int64_t row = valid ? c / per_row : 0, col = valid ? (c - row * per_row) * V : 0;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = 0.0f;
    if (valid) {
      compute_t<T> x[V], u[V];
      load_vec<T, V>(a + row * a_stride + col, x);
      load_vec<T, V>(b + row * b_stride + col, u);
#pragma unroll
      for (int j = 0; j < V; ++j) x[j] = to_compute(SiluMulMap<T>{}(cast<T>(x[j]), cast<T>(u[j])));
      store_vec<T, V>(out + row * n_cols + col, x);
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = float(x[j]);
    }
    store_q8_1<V>(v, int(threadIdx.x) % (32 / V), valid,
                  q8 + (valid ? (row * n_cols + col) / 32 : 0) * quant::dot::kQ8_1Bytes);
  }
}

}  // namespace

StoragePtr GpuStorage::softmax_last_dim(const Layout& l, bool log) const {
  DeviceGuard dg(ordinal());
  const int64_t numel = int64_t(l.numel());
  auto out = new_storage(ordinal(), size_t(numel), dtype_);
  if (numel == 0) return out;
  const int64_t n = int64_t(l.shape.back()), rows = numel / n;
  const char* op = log ? "log_softmax_last_dim" : "softmax_last_dim";
  return dispatch_float(dtype_, op, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    const T* in = ptr<T>() + l.offset;
    T* o = out->template ptr<T>();
    constexpr size_t vb = sizeof(T) * size_t(kVec<T>);
    const bool vec = n % kVec<T> == 0 && aligned_to(in, vb) && aligned_to(o, vb);
    const RowPlan p = plan_rows<T>(n, vec);
    if (p.e == 0 || n >= tune::kNnOnlineCols) {
      const unsigned grid = unsigned(rows < tune::kNnMaxGrid ? rows : tune::kNnMaxGrid);
      if (vec)
        launch_kernel(softmax_online_kernel<T, kVec<T>>, grid, tune::kNnMaxRowBlock, 0, stream(), in, o, rows, n, log);
      else
        launch_kernel(softmax_online_kernel<T, 1>, grid, tune::kNnMaxRowBlock, 0, stream(), in, o, rows, n, log);
    } else {
      const unsigned grid = row_grid(rows, p);
      with_row_config<T>(vec, p.e, [&](auto v, auto e) {
        launch_kernel(softmax_rows_kernel<T, decltype(v)::value, decltype(e)::value>, grid, p.block, 0, stream(), in, o,
                      rows, int(n), p.g, log);
      });
    }
    check_launch(op);
    return out;
  });
}

StoragePtr GpuStorage::norm_last_dim(const Layout& l, const NormArgs& a) const {
  DeviceGuard dg(ordinal());
  const int64_t numel = int64_t(l.numel());
  auto out = new_storage(ordinal(), size_t(numel), dtype_);
  std::shared_ptr<GpuStorage> sum_s;
  if (a.residual) *a.sum = sum_s = new_storage(ordinal(), size_t(numel), dtype_);
  if (numel == 0) return out;
  const int64_t n = int64_t(l.shape.back()), rows = numel / n;
  const char* op = a.residual ? "add_rms_norm" : a.rms ? "rms_norm" : "layer_norm";
  return dispatch_float(dtype_, op, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* in = ptr<T>() + l.offset;
    const T* w = a.weight ? as_gpu(*a.weight).template ptr<T>() + a.weight_offset : nullptr;
    const T* b = a.bias ? as_gpu(*a.bias).template ptr<T>() + a.bias_offset : nullptr;
    T* o = out->template ptr<T>();
    const T* res = a.residual ? as_gpu(*a.residual).template ptr<T>() + a.residual_offset : nullptr;
    T* sum = sum_s ? sum_s->template ptr<T>() : nullptr;
    const C inv_n = C(1) / C(n);
    constexpr size_t vb = sizeof(T) * size_t(kVec<T>);
    const bool vec = n % kVec<T> == 0 && aligned_to(in, vb) && aligned_to(o, vb) && (!w || aligned_to(w, vb)) &&
                     (!b || aligned_to(b, vb)) && (!res || (aligned_to(res, vb) && aligned_to(sum, vb)));
    const RowPlan p = plan_rows<T>(n, vec);
    const unsigned grid = row_grid(rows, p);
    // The Q8_1 rows come from the register path with 16-byte chunks of f32/f16/bf16, a block's
    // lanes in one group, and at most 16 values a thread (32 spill registers with the encoder).
    constexpr bool q8_type = sizeof(T) == 2 || sizeof(T) == 4;
    uint8_t* q8 = nullptr;
    if (q8_type && a.q8_1 && vec && p.e != 0 && p.e <= 16 && n % 32 == 0 && p.g % (32 / kVec<T>) == 0) {
      auto qs = new_storage(ordinal(), size_t(numel / 32) * quant::dot::kQ8_1Bytes, DType::U8);
      q8 = qs->template ptr<uint8_t>();
      *a.q8_1 = qs;
    }
    if (p.e == 0) {
      launch_kernel(norm_long_kernel<T>, grid, p.block, 0, stream(), in, w, b, o, res, sum, rows, n, inv_n, a.eps,
                    a.rms);
    } else {
      with_row_config<T>(vec, p.e, [&](auto v, auto e) {
        constexpr int V = decltype(v)::value, E = decltype(e)::value;
        if constexpr (q8_type && V == kVec<T> && E <= 16) {
          if (q8) {
            launch_kernel(norm_rows_kernel<T, V, E, true>, grid, p.block, 0, stream(), in, w, b, o, res, sum, rows,
                          int(n), p.g, inv_n, a.eps, a.rms, q8);
            return;
          }
        }
        launch_kernel(norm_rows_kernel<T, V, E>, grid, p.block, 0, stream(), in, w, b, o, res, sum, rows, int(n), p.g,
                      inv_n, a.eps, a.rms, q8);
      });
    }
    check_launch(op);
    return out;
  });
}

StoragePtr GpuStorage::rope(RopeKind k, const Layout& l, const Storage& cos_s, const Layout& cos_l,
                            const Storage& sin_s, const Layout& sin_l, const RopeDims& dm) const {
  DeviceGuard dg(ordinal());
  const size_t numel = l.numel();
  auto out = new_storage(ordinal(), numel, dtype_);
  if (numel == 0) return out;
  const char* op = k == RopeKind::Interleaved ? "rope_i" : k == RopeKind::HalfSplit ? "rope" : "rope_thd";
  return dispatch_float(dtype_, op, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    const T* x = ptr<T>() + l.offset;
    const T* cs = as_gpu(cos_s).template ptr<T>() + cos_l.offset;
    const T* sn = as_gpu(sin_s).template ptr<T>() + sin_l.offset;
    T* o = out->template ptr<T>();
    const size_t half = dm.d / 2, npairs = numel / 2;
    const size_t table = (dm.per_batch ? dm.b : 1) * dm.t * half;
    const unsigned grid = grid_for(int64_t(npairs), tune::kNnRopeBlock);
    if (numel < (size_t(1) << 31) && table < (size_t(1) << 31)) {
      launch_kernel(rope_kernel<T, uint32_t>, grid, tune::kNnRopeBlock, 0, stream(), x, cs, sn, o, uint32_t(npairs),
                    uint32_t(half), uint32_t(dm.h), uint32_t(dm.t), k, dm.per_batch);
    } else {
      launch_kernel(rope_kernel<T, uint64_t>, grid, tune::kNnRopeBlock, 0, stream(), x, cs, sn, o, uint64_t(npairs),
                    uint64_t(half), uint64_t(dm.h), uint64_t(dm.t), k, dm.per_batch);
    }
    check_launch(op);
    return out;
  });
}

StoragePtr GpuStorage::rope_kv_append(RopeKind k, const Layout& l, const Storage& cos_s, const Layout& cos_l,
                                      const Storage& sin_s, const Layout& sin_l, const RopeDims& dm,
                                      const KvAppend& a) const {
  DeviceGuard dg(ordinal());
  const size_t numel = l.numel();
  auto out = new_storage(ordinal(), numel, dtype_);
  KvAppendArgs d{as_gpu(*a.k_cache).data(), as_gpu(*a.v_cache).data(), as_gpu(*a.v).data(), {}, {}, {},
                 int64_t(a.k_l.offset), int64_t(a.vc_l.offset), int64_t(a.v_l.offset), int64_t(a.q_heads),
                 int64_t(a.v_l.shape[3]), int64_t(a.v_l.numel()),
                 as_gpu(*a.start).data(), a.start->dtype(), int64_t(a.start_offset), int64_t(a.max_start)};
  for (int i = 0; i < 4; ++i) {
    d.ks[i] = a.k_l.strides[size_t(i)];
    d.vcs[i] = a.vc_l.strides[size_t(i)];
    d.vs[i] = a.v_l.strides[size_t(i)];
  }
  const int64_t npairs = int64_t(numel / 2);
  if (npairs + d.nv == 0) return out;
  const char* op = "rope_kv_append";
  return dispatch_float(dtype_, op, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    const T* x = ptr<T>() + l.offset;
    const T* cs = as_gpu(cos_s).template ptr<T>() + cos_l.offset;
    const T* sn = as_gpu(sin_s).template ptr<T>() + sin_l.offset;
    const unsigned grid = grid_for(npairs + d.nv, tune::kNnRopeBlock);
    // As rope: 32-bit indices when every pair, element and table index fits (a decode step).
    const size_t table = (dm.per_batch ? dm.b : 1) * dm.t * (dm.d / 2);
    if (numel + size_t(d.nv) < (size_t(1) << 31) && table < (size_t(1) << 31)) {
      launch_kernel(rope_kv_append_kernel<T, uint32_t>, grid, tune::kNnRopeBlock, 0, stream(), x, cs, sn,
                    out->template ptr<T>(), uint32_t(npairs), uint32_t(dm.d / 2), uint32_t(dm.h), uint32_t(dm.t), k,
                    dm.per_batch, d);
    } else {
      launch_kernel(rope_kv_append_kernel<T, uint64_t>, grid, tune::kNnRopeBlock, 0, stream(), x, cs, sn,
                    out->template ptr<T>(), uint64_t(npairs), uint64_t(dm.d / 2), uint64_t(dm.h), uint64_t(dm.t), k,
                    dm.per_batch, d);
    }
    check_launch(op);
    return out;
  });
}

// The row stride of a layout whose leading dims collapse onto rows of unit-stride elements, or
// -1 (rank 1: one row).
int64_t collapsed_row_stride(const Layout& l) {
  const size_t r = l.shape.size();
  if (r == 0 || l.strides[r - 1] != 1) return -1;
  if (r == 1) return int64_t(l.shape[0]);
  for (size_t i = 0; i + 2 < r; ++i)
    if (l.shape[i] != 1 && l.strides[i] != l.strides[i + 1] * int64_t(l.shape[i + 1])) return -1;
  return l.strides[r - 2];
}

StoragePtr GpuStorage::silu_mul(const Layout& l, const Storage& up_s, const Layout& up_l, StoragePtr* q8_1) const {
  DeviceGuard dg(ordinal());
  const GpuStorage& up = as_gpu(up_s);
  auto out = new_storage(ordinal(), l.numel(), dtype_);
  return dispatch_float(dtype_, "silu_mul", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2) {
      // With Q8_1 rows asked for: one kernel writes both (16-byte aligned rows of whole blocks).
      const int64_t n = l.shape.empty() ? 1 : int64_t(l.shape.back()), numel = int64_t(l.numel());
      const int64_t sa = collapsed_row_stride(l), sb = collapsed_row_stride(up_l);
      const T* a = ptr<T>() + l.offset;
      const T* b = up.ptr<T>() + up_l.offset;
      if (q8_1 && numel > 0 && n % 32 == 0 && sa >= 0 && sb >= 0 && sa % 8 == 0 && sb % 8 == 0 && aligned_to(a, 16) &&
          aligned_to(b, 16)) {
        auto qs = new_storage(ordinal(), size_t(numel / 32) * quant::dot::kQ8_1Bytes, DType::U8);
        const int64_t rows = numel / n;
        launch_kernel(silu_mul_q8_kernel<T>, grid_for(numel / 8), kBlock, 0, stream(), a, sa, b, sb,
                      out->template ptr<T>(), qs->template ptr<uint8_t>(), rows, n);
        check_launch("silu_mul");
        *q8_1 = qs;
        return out;
      }
    }
    launch_map(stream(), out->template ptr<T>(), l.shape, SiluMulMap<T>{}, {&l, &up_l}, ptr<T>(), up.ptr<T>());
    return out;
  });
}

}  // namespace wick::gpu

// GPU quantized matmul y = x @ W^T. Up to tune::kQmvMaxRows rows of x: the matrix-vector path
// here (llama.cpp's mmvq scheme, our code): x quantized on the device to Q8_1 (the bytes of
// quant_encode.hpp's quantize_block_q8_1), then one pass over W in which every weight chunk is
// unpacked once and dotted with all rows through dot4_i8 (ops/quant_dot.hpp). More rows: the
// prefill path of kernels/quant.cu (qmatmul_prefill). qmatmul_rms_norm: the staged kernel with the
// norm before the product (add_rms_norm's) done by each of its blocks.
#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/q8_1_store.cuh"
#include "backend/gpu/kernels/qmatvec.hpp"
#include "backend/gpu/kernels/quant.hpp"
#include "backend/options.hpp"
#include "ops/nn.hpp"
#include "ops/quant_dot.hpp"
#include "ops/quant_encode.hpp"

namespace wick::gpu {
namespace {

using quant::dot::kQ8_1Bytes;

// Rows of x padded to the kernel's row count (1, 2, 4 or 8); the padded rows are zeros.
int padded_rows(size_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

// One Q8_1 block per 32 lanes (lane j: element j). Rows >= m are zero.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQmvQuantBlock)
    quantize_q8_1_kernel(const T* WICK_RESTRICT x, int64_t x_off, int64_t x_stride, int64_t m, int64_t rows, int64_t xb,
                         uint8_t* WICK_RESTRICT out) {
  kernel_entry();
  const int64_t blk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = int(threadIdx.x & 31);
  const bool valid = blk < rows * xb;  // every lane takes part in the shuffles
  const int64_t row = valid ? blk / xb : 0, b = blk - row * xb;
  const float v[1] = {valid && row < m ? cast<float>(x[x_off + row * x_stride + b * 32 + lane]) : 0.0f};
  store_q8_1<1>(v, lane, valid, out + (valid ? blk : 0) * kQ8_1Bytes);
}

// The output's dtype code: 0 f32, 1 f16, 2 bf16, -1 none of them.
int y_code(DType dt) { return dt == DType::F32 ? 0 : dt == DType::F16 ? 1 : dt == DType::BF16 ? 2 : -1; }

// Output element (i, r) of dtype code: 0 f32, 1 f16, 2 bf16 (one kernel for every x dtype).
__device__ __forceinline__ void store_y(void* y, int dt, int64_t idx, float v) {
  if (dt == 0)
    static_cast<float*>(y)[idx] = v;
  else if (dt == 1)
    static_cast<f16*>(y)[idx] = from_f32<f16>(v);
  else
    static_cast<bf16*>(y)[idx] = from_f32<bf16>(v);
}

// R weight rows per block; the block's threads stride over the rows' chunks (consecutive
// threads: consecutive bytes), each chunk dotted with the M activation rows. Then a warp
// reduction, partial sums of the warps in shared memory, one thread per output.
template <class Tr, int M, int R>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQmvMaxBlock)
    qmv_kernel(const uint8_t* WICK_RESTRICT w, size_t row_bytes, int nblk, const uint8_t* WICK_RESTRICT xq,
               size_t xq_row_bytes, int64_t n, int m, void* WICK_RESTRICT y, int y_dt) {
  kernel_entry();
  constexpr int U = tune::kQmvUnroll;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const uint8_t* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + size_t(row0 + r < n ? row0 + r : n - 1) * row_bytes;  // past n: not stored
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;
  const int units = nblk * Tr::C, step = int(blockDim.x);
  for (int u0 = int(threadIdx.x); u0 < units; u0 += step * U) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int u = u0 + j * step;
      if (u < units) {
        const int ib = u / Tr::C, c = u % Tr::C;
        const quant::dot::XRows xr{xq + size_t(ib) * (Tr::QK / 32) * kQ8_1Bytes, xq_row_bytes};
#pragma unroll
        for (int r = 0; r < R; ++r) Tr::template run<M>(wr[r] + size_t(ib) * Tr::BB, c, xr, acc[r]);
      }
    }
  }
  float s;
  if (block_sum<R, M>(acc, &s)) {
    const int r = int(threadIdx.x) / M, i = int(threadIdx.x) % M;
    if (row0 + r < n && i < m) store_y(y, y_dt, int64_t(i) * n + row0 + r, s);
  }
}

// ---- The staged kernel: one row of x; Q4_0 and Q8_0 rows of whole 8-block groups (k a multiple of
// 256: 144 / 272 bytes, so every row starts 16-byte aligned) that fit one warp's portion. qmv_kernel's
// lanes read 2- and 4-byte pieces of 18- / 34-byte weight blocks and 36-byte activation blocks,
// several cache lines per warp load. Here a warp copies a whole row to its shared memory in 16-byte
// loads (512 contiguous bytes per warp load), then each lane dots whole pairs of blocks (PairDot)
// with x, which the block staged once as XPairs. The grid is one wave of resident blocks whose
// warps walk the rows, each loading its next row before it computes the current one.
template <GGMLType T>
struct Staged {
  using P = quant::dot::PairDot<T>;
  static constexpr int kGroup = 16 * P::kWords;  // 8 blocks = 4 pairs of 4 * kWords bytes
  static constexpr int kLoads = tune::kQmvStagedLoads;
  static constexpr int kSlot = kWarpSize * kLoads * 16;  // a warp's shared memory: one round of loads
  static constexpr int kPortionGroups = kSlot / kGroup;  // the longest row, in groups
  static constexpr int kPairsPerLane = (4 * kPortionGroups + kWarpSize - 1) / kWarpSize;
};

// Dynamic shared memory of a block: x's pairs, then a warp's round of loads per warp (threads * 16 *
// loads bytes in all, the same for 32- and 64-lane waves).
size_t staged_smem(int xblocks, int threads) {
  return size_t(xblocks / 2) * sizeof(quant::dot::XPair) + size_t(threads) * tune::kQmvStagedLoads * 16;
}

// 16 bytes of a row. On AMD a clang vector: an array of structs (uint4, VecOf) copied into LDS
// stayed in scratch under clang 21.
#if defined(WICK_GPU_HIP)
typedef uint32_t Piece __attribute__((ext_vector_type(4)));
#else
using Piece = uint4;
#endif

// A warp's loads of one row: lane l takes pieces l, l + wave, ... (512 contiguous bytes per warp
// load on 32 lanes).
template <int L>
__device__ __forceinline__ void load_row(Piece (&buf)[L], const uint8_t* row, int lane, int pieces) {
  const auto* src = reinterpret_cast<const Piece*>(row);
#pragma unroll
  for (int j = 0; j < L; ++j)
    if (lane + j * kWarpSize < pieces) buf[j] = src[lane + j * kWarpSize];
}

// The staged kernel's optional prologue (X a float dtype; NoNorm: x comes in Q8_1): every block
// normalises the row itself, add_rms_norm's math (the sum x + res rounded to X, rms over it, times
// w, rounded to X) then encode_q8_1's, into its staged pairs, so no norm kernel runs before it.
// Block 0 also stores the sum (the residual stream's next value). The row is read as 16-byte
// chunks, at most C per thread (the launch checks it); a Q8_1 block is 32 / V lanes' chunks.
struct NoNorm {};
template <class X, int C> struct StagedNorm {
  const X* x;    // the row (k)
  const X* res;  // added to x first, or null
  const X* w;    // the norm's weight (k)
  X* sum;        // x + res (block 0 stores it), null without res
  float inv_n;
  double eps;
};

template <class X, int C>
__device__ __forceinline__ void stage_normed_row(const StagedNorm<X, C>& a, int k, quant::dot::XPair* xs) {
  constexpr int V = 16 / int(sizeof(X)), L = 32 / V;
  using Cm = compute_t<X>;
  __shared__ float red[kMaxWarpsPerBlock];
  const int chunks = k / V, t = int(threadIdx.x), nt = int(blockDim.x);
  uint4 xr[C], wr[C];
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = t + i * nt;
    if (c < chunks) {
      xr[i] = reinterpret_cast<const uint4*>(a.x)[c];
      wr[i] = reinterpret_cast<const uint4*>(a.w)[c];
    }
  }
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = t + i * nt;
    if (c < chunks) {
      X v[V];
      __builtin_memcpy(v, &xr[i], 16);
      if (a.res) {
        const uint4 rr = reinterpret_cast<const uint4*>(a.res)[c];
        X r[V];
        __builtin_memcpy(r, &rr, 16);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = cast<X>(to_compute(v[j]) + to_compute(r[j]));
        __builtin_memcpy(&xr[i], v, 16);
        if (blockIdx.x == 0) reinterpret_cast<uint4*>(a.sum)[c] = xr[i];
      }
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const Cm e = to_compute(v[j]);
        ss += float(e * e);
      }
    }
  }
  ss = row_reduce(ss, [](float p, float q) { return p + q; }, 0.0f, nt, red);
  const Cm rstd = nn::norm_rstd(Cm(ss) * Cm(a.inv_n), a.eps);
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = t + i * nt;  // every lane of the wave reaches the shuffles
    float o[V];
    if (c < chunks) {
      X v[V], w[V];
      __builtin_memcpy(v, &xr[i], 16);
      __builtin_memcpy(w, &wr[i], 16);
#pragma unroll
      for (int j = 0; j < V; ++j)
        o[j] = float(to_compute(cast<X>(nn::norm_out(to_compute(v[j]), Cm(0), rstd, to_compute(w[j]), Cm(0)))));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = 0.0f;
    }
    const Q8_1Lane<V> q = encode_q8_1<V>(o, c % L);
    if (c < chunks) {
      const int b = c / L, lj = c % L;
      quant::dot::XPair& p = xs[b / 2];
#pragma unroll
      for (int wd = 0; wd < V / 4; ++wd) p.q[8 * (b % 2) + (V / 4) * lj + wd] = int(q.q[wd]);
      if (lj == 0) {
        uint8_t hb[2];
        quant::detail::st_f16(hb, q.d);  // the scale as the Q8_1 bytes hold it
        p.d[b % 2] = quant::dot::ld_h(hb);
        p.s[b % 2] = q.sum;
      }
    }
  }
}

// Threads of a staged block: tune::kQmvStagedBlock, or the norm prologue's (fewer, larger blocks
// read the row fewer times an SM), which Options::qmv_norm_block (WICK_QMV_NORM_BLOCK) may set.
template <class N> constexpr int staged_bound() {
  return std::is_same_v<N, NoNorm> ? tune::kQmvStagedBlock : tune::kQmvStagedNormMaxBlock;
}
int staged_norm_block() {
  const int b = backend::options().qmv_norm_block;
  return b ? b : tune::kQmvStagedNormBlock;
}

template <GGMLType T, class N = NoNorm>
__global__ void WICK_LAUNCH_BOUNDS(staged_bound<N>())
    qmv_staged_kernel(const uint8_t* WICK_RESTRICT w, int gpr, int64_t n, const uint8_t* WICK_RESTRICT xq,
                      int xblocks, void* WICK_RESTRICT y, int y_dt, N norm) {
  kernel_entry();
  using S = Staged<T>;
  using P = typename S::P;
  using quant::dot::XPair;
  extern __shared__ Piece smem[];
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int nwarps = int(blockDim.x) / kWarpSize;
  auto* xs = reinterpret_cast<XPair*>(smem);
  Piece* ws = smem + size_t(xblocks / 2) * (sizeof(XPair) / 16) + size_t(warp) * (S::kSlot / 16);
  const int64_t row_bytes = int64_t(gpr) * S::kGroup, tw = int64_t(gridDim.x) * nwarps;
  const int pieces = gpr * (S::kGroup / 16), pairs = 4 * gpr;  // of a row (the host keeps gpr <= kPortionGroups)

  Piece buf[S::kLoads];
  int64_t row = int64_t(blockIdx.x) * nwarps + warp;
  if (row < n) load_row(buf, w + row * row_bytes, lane, pieces);  // in flight while x is staged

  if constexpr (std::is_same_v<N, NoNorm>) {
    (void)norm;
    for (int b = int(threadIdx.x); b < xblocks; b += int(blockDim.x))
      quant::dot::set_xpair_half(xs[b / 2], b % 2, xq + size_t(b) * kQ8_1Bytes);
  } else {
    stage_normed_row(norm, xblocks * 32, xs);
  }
  __syncthreads();

  const auto* wsw = reinterpret_cast<const uint32_t*>(ws);
  for (; row < n; row += tw) {
#pragma unroll
    for (int j = 0; j < S::kLoads; ++j)
      if (lane + j * kWarpSize < pieces) ws[lane + j * kWarpSize] = buf[j];
    wave_sync();
    if (row + tw < n) load_row(buf, w + (row + tw) * row_bytes, lane, pieces);
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < S::kPairsPerLane; ++i) {
      const int p = lane + i * kWarpSize;
      if (p < pairs) {
        uint32_t wv[P::kWords];
#pragma unroll
        for (int t = 0; t < P::kWords; ++t) wv[t] = wsw[p * P::kWords + t];
        acc += P::run(wv, xs[p]);
      }
    }
    wave_sync();  // every lane has read the row before the next one is stored
    acc = warp_reduce(acc, [](float a, float b) { return a + b; });
    if (lane == 0) store_y(y, y_dt, row, acc);
  }
}

// Whether the staged kernel may take this product by its shape (the one it was measured to win,
// tune::kQmvStaged*); never under Options::qmv_unstaged (WICK_QMV_STAGED=0), which tests the other
// kernel on these shapes. The caller then checks that a row fits one warp's portion
// (staged_row_fits) at the device's wave size.
bool staged_shape(GGMLType t, size_t n, size_t k, size_t m) {
  return !backend::options().qmv_unstaged && m == 1 && (t == GGMLType::Q4_0 || t == GGMLType::Q8_0) && k % 256 == 0 &&
         k >= size_t(tune::kQmvStagedMinK) && n >= size_t(tune::kQmvStagedMinRows);
}
// A row of k within one warp's portion at the host's idea of the wave size (a wider device wave,
// as in the cdna emulation, only holds more).
bool staged_row_fits(GGMLType t, size_t k, int wave_size) {
  const size_t group = t == GGMLType::Q4_0 ? Staged<GGMLType::Q4_0>::kGroup : Staged<GGMLType::Q8_0>::kGroup;
  return k / 256 <= size_t(wave_size) * tune::kQmvStagedLoads * 16 / group;
}

template <GGMLType T, class N = NoNorm>
void launch_staged(gpuStream_t s, const uint8_t* w, size_t n, size_t k, const uint8_t* xq, void* y, int y_dt,
                   const gpuDeviceProp_t& prop, int dev, N norm = {}) {
  const int threads = std::is_same_v<N, NoNorm> ? tune::kQmvStagedBlock : staged_norm_block(), xblocks = int(k / 32);
  const size_t smem = staged_smem(xblocks, threads);
  allow_dynamic_smem(reinterpret_cast<const void*>(qmv_staged_kernel<T, N>), smem, "qmatvec (staged)");
  const int64_t warps = std::max(1, threads / std::max(1, prop.warpSize));
  const int64_t need = (int64_t(n) + warps - 1) / warps;
  const int64_t wave = int64_t(std::max(1, prop.multiProcessorCount)) *
                       resident_blocks(dev, reinterpret_cast<const void*>(qmv_staged_kernel<T, N>), threads, smem);
  const unsigned grid = unsigned(std::max<int64_t>(1, std::min(need, wave)));
  launch_kernel(qmv_staged_kernel<T, N>, grid, threads, smem, s, w, int(k / 256), int64_t(n), xq, xblocks, y, y_dt,
                norm);
  check_launch(std::is_same_v<N, NoNorm> ? "qmatvec (staged)" : "qmatvec (staged, normalising x)");
}

// The 16-byte chunks of a row of k elements of x_dtype that each thread of a norm prologue's block
// holds (tune::kQmvStagedNormChunks at most: qmatvec_normed_takes checks it).
size_t staged_norm_chunks(size_t k, DType x_dtype) {
  const size_t v = 16 / dtype_size(x_dtype), threads = size_t(staged_norm_block());
  return (k / v + threads - 1) / threads;
}

// Calls f(std::integral_constant<int, C>) with C the fewest chunks a thread (1, 2, 4 or 8) that hold
// a row of k elements of x_dtype: the norm prologue's instantiation.
template <class F>
void by_norm_chunks(size_t k, DType x_dtype, F&& f) {
  const size_t per_thread = staged_norm_chunks(k, x_dtype);
  static_assert(tune::kQmvStagedNormChunks == 8, "the instantiations below cover 1 to 8 chunks a thread");
  if (per_thread <= 1) return f(std::integral_constant<int, 1>{});
  if (per_thread <= 2) return f(std::integral_constant<int, 2>{});
  if (per_thread <= 4) return f(std::integral_constant<int, 4>{});
  f(std::integral_constant<int, 8>{});
}

// The norm prologue's launch for x of dtype X, T's weights.
template <GGMLType T, class X>
void launch_staged_norm(gpuStream_t s, const uint8_t* w, size_t n, size_t k, const NormedRow& r, void* y, int y_dt,
                        const gpuDeviceProp_t& prop, int dev) {
  by_norm_chunks(k, dtype_of<X>::value, [&](auto c) {
    constexpr int C = decltype(c)::value;
    const StagedNorm<X, C> a{static_cast<const X*>(r.x), static_cast<const X*>(r.res), static_cast<const X*>(r.w),
                             static_cast<X*>(r.sum), 1.0f / float(k), r.eps};
    launch_staged<T>(s, w, n, k, nullptr, y, y_dt, prop, dev, a);
  });
}

// Calls f(X{}) for the activation dtype code y_dt (0 f32, 1 f16, 2 bf16: y_code).
template <class F>
void by_x_code(int y_dt, F&& f) {
  if (y_dt == 0)
    f(float{});
  else if (y_dt == 1)
    f(f16{});
  else
    f(bf16{});
}

// Static shared memory of the norm prologue's kernel for (t, x_dtype, k): its dynamic bytes come on
// top (the cdna emulation's wave exchange is 3.75 KiB of it).
size_t staged_norm_static_smem(GGMLType t, size_t k, DType x_dtype) {
  size_t bytes = 0;
  by_x_code(y_code(x_dtype), [&](auto xtag) {
    using X = decltype(xtag);
    by_norm_chunks(k, x_dtype, [&](auto c) {
      constexpr int C = decltype(c)::value;
      const void* kern = t == GGMLType::Q4_0
                             ? reinterpret_cast<const void*>(qmv_staged_kernel<GGMLType::Q4_0, StagedNorm<X, C>>)
                             : reinterpret_cast<const void*>(qmv_staged_kernel<GGMLType::Q8_0, StagedNorm<X, C>>);
      bytes = static_smem(kern);
    });
  });
  return bytes;
}

template <int M, int R>
void launch_qmv_r(gpuStream_t s, GGMLType t, const uint8_t* w, size_t n, size_t k, const uint8_t* xq,
                  size_t xq_row_bytes, int m, void* y, int y_dt, int threads) {
  const unsigned grid = unsigned((n + R - 1) / R);
  const bool known = quant::dot::dispatch_dot(t, [&](auto tr) {
    using Tr = decltype(tr);
    const size_t nblk = k / Tr::QK;
    launch_kernel(qmv_kernel<Tr, M, R>, grid, threads, 0, s, w, nblk * Tr::BB, int(nblk), xq, xq_row_bytes, int64_t(n),
                  m, y, y_dt);
  });
  if (!known)
    throw Error(ErrorKind::Unsupported, std::string("qmatmul: no GPU matrix-vector kernel for ") + ggml_type_name(t) +
                                            "; supported: " + ggml_supported_types());
  check_launch("qmatvec");
}

// One activation row may take 1, 2, 4 or 8 weight rows per block (rows_per_block, 0: the tuned
// choice); more rows keep a fixed R (each weight row costs M accumulators).
template <int M>
void launch_qmv(gpuStream_t s, GGMLType t, const uint8_t* w, size_t n, size_t k, const uint8_t* xq, size_t xq_row_bytes,
                int m, void* y, int y_dt, int rows_per_block, int threads) {
  if constexpr (M == 1) {
    switch (rows_per_block ? rows_per_block : tune::kQmvRows1) {
      case 1:
        return launch_qmv_r<1, 1>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      case 2:
        return launch_qmv_r<1, 2>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      case 4:
        return launch_qmv_r<1, 4>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      case 8:
        return launch_qmv_r<1, 8>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      default:
        break;
    }
    throw Error(ErrorKind::Argument,
                "qmatvec: rows_per_block must be 0, 1, 2, 4 or 8, got " + std::to_string(rows_per_block));
  } else {
    launch_qmv_r<M, tune::kQmvRows>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
  }
}

// Rows per block and threads for one row of x of type t over n rows of k elements, where the
// caller asked for the tuned choice (tune::kQmvQ4K*, kQmvShort*, kQmvLongK*; {0, 0}: the tuned
// defaults).
std::pair<int, int> one_row_choice(GGMLType t, size_t n, size_t k) {
  const bool q40 = t == GGMLType::Q4_0, q4k = t == GGMLType::Q4_K;
  if (k <= size_t(tune::kQmvShortK) && n >= size_t(tune::kQmvManyRows)) {
    if (q40) return {tune::kQmvShortQ40Rows, tune::kQmvShortQ40Block};
    if (q4k) return {tune::kQmvShortQ4KRows, tune::kQmvShortQ4KBlock};
  }
  if (q4k && k >= size_t(tune::kQmvQ4KLongK)) return {tune::kQmvQ4KLongRows, 0};
  if ((q40 || t == GGMLType::Q8_0) && k >= size_t(tune::kQmvLongK)) return {tune::kQmvLongKRows, tune::kQmvLongKBlock};
  return {0, 0};
}

}  // namespace

size_t qmatvec_scratch_bytes(size_t m, size_t k) { return size_t(padded_rows(m)) * (k / 32) * kQ8_1Bytes; }

void qmatvec(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, const void* x, DType x_dtype, size_t m,
             size_t x_offset, size_t x_row_stride, void* scratch, void* y, int rows_per_block, int block_threads) {
  if (m == 0 || m > size_t(tune::kQmvMaxRows))
    throw Error(ErrorKind::Internal, "qmatvec: " + std::to_string(m) + " rows; the matrix-vector path takes 1 to " +
                                         std::to_string(tune::kQmvMaxRows));
  if (n == 0 || k == 0) return;
  const int rows = padded_rows(m);
  const int64_t xb = int64_t(k / 32);
  auto* xq = static_cast<uint8_t*>(scratch);
  const int64_t lanes = int64_t(rows) * xb * 32;
  const unsigned qgrid = unsigned((lanes + tune::kQmvQuantBlock - 1) / tune::kQmvQuantBlock);
  auto quantize = [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(quantize_q8_1_kernel<T>, qgrid, tune::kQmvQuantBlock, 0, s, static_cast<const T*>(x),
                  int64_t(x_offset), int64_t(x_row_stride), int64_t(m), rows, xb, xq);
  };
  switch (x_dtype) {
    case DType::F32:
      quantize(float{});
      break;
    case DType::F16:
      quantize(f16{});
      break;
    case DType::BF16:
      quantize(bf16{});
      break;
    default:
      throw Error(ErrorKind::DType, std::string("qmatmul: x must be f32, f16 or bf16, got ") + dtype_name(x_dtype));
  }
  check_launch("qmatvec quantize");
  qmatvec_q8_1(s, t, w, n, k, xq, size_t(rows), m, y, x_dtype, rows_per_block, block_threads);
}

void qmatvec_q8_1(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, const void* xq, size_t xq_rows,
                  size_t m, void* y, DType y_dtype, int rows_per_block, int block_threads) {
  const int rows = padded_rows(m);
  if (m == 0 || m > size_t(tune::kQmvMaxRows) || xq_rows < size_t(rows))
    throw Error(ErrorKind::Internal, "qmatvec: " + std::to_string(m) + " rows with " + std::to_string(xq_rows) +
                                         " Q8_1 rows; the matrix-vector path takes 1 to " +
                                         std::to_string(tune::kQmvMaxRows) + " rows, padded to 1, 2, 4 or 8");
  if (n == 0 || k == 0) return;
  // The dot products load whole words of weight blocks, 16 bytes for Q4_K/Q5_K (quant_dot.hpp):
  // rows are whole blocks, so the weights' start must be 16-byte aligned (storage starts are).
  if (reinterpret_cast<uintptr_t>(w) % 16 != 0)
    throw Error(ErrorKind::Internal, "qmatvec: the weights start at a pointer that is not 16-byte aligned");
  const int y_dt = y_code(y_dtype);
  if (y_dt < 0)
    throw Error(ErrorKind::DType, std::string("qmatmul: y must be f32, f16 or bf16, got ") + dtype_name(y_dtype));
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xq);
  if (rows_per_block == 0 && block_threads == 0) {
    if (staged_shape(t, n, k, m)) {
      int dev = 0;
      (void)gpuGetDevice(&dev);
      const gpuDeviceProp_t& prop = context(dev).prop;
      if (staged_row_fits(t, k, prop.warpSize))
        return t == GGMLType::Q4_0 ? launch_staged<GGMLType::Q4_0>(s, wb, n, k, xb, y, y_dt, prop, dev)
                                   : launch_staged<GGMLType::Q8_0>(s, wb, n, k, xb, y, y_dt, prop, dev);
    }
    if (m == 1) std::tie(rows_per_block, block_threads) = one_row_choice(t, n, k);
  }
  const int threads = block_threads ? block_threads : tune::kQmvBlock;
  if (threads % 64 != 0 || threads > tune::kQmvMaxBlock)
    throw Error(ErrorKind::Argument, "qmatvec: block_threads must be 0 or a multiple of 64 up to " +
                                         std::to_string(tune::kQmvMaxBlock) + ", got " + std::to_string(block_threads));
  const size_t xq_row_bytes = (k / 32) * kQ8_1Bytes;
  switch (rows) {
    case 1:
      launch_qmv<1>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
    case 2:
      launch_qmv<2>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
    case 4:
      launch_qmv<4>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
    default:
      launch_qmv<8>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
  }
}

// The most dynamic shared memory a block may have: CUDA's opt-in limit (past the 48 KiB a launch gets
// unasked); HIP's workgroup LDS (ROCm 5.7's hipDeviceProp_t has no opt-in field).
size_t block_smem_limit(const gpuDeviceProp_t& p) {
#if defined(WICK_GPU_HIP)
  return size_t(p.sharedMemPerBlock);
#else
  return size_t(p.sharedMemPerBlockOptin);
#endif
}

bool qmatvec_normed_takes(GGMLType t, const void* w, size_t n, size_t k, DType x_dtype, const NormedRow& r) {
  if (n == 0 || k == 0 || y_code(x_dtype) < 0 || !staged_shape(t, n, k, 1) ||
      staged_norm_chunks(k, x_dtype) > size_t(tune::kQmvStagedNormChunks))
    return false;
  const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!a16(w) || !a16(r.x) || !a16(r.w) || (r.res && !a16(r.res))) return false;
  int dev = 0;
  (void)gpuGetDevice(&dev);
  const gpuDeviceProp_t& prop = context(dev).prop;
  return staged_row_fits(t, k, prop.warpSize) &&
         staged_smem(int(k / 32), staged_norm_block()) + staged_norm_static_smem(t, k, x_dtype) <=
             block_smem_limit(prop);
}

void qmatvec_normed(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, DType x_dtype, const NormedRow& r,
                    void* y) {
  if (r.res && (!r.sum || reinterpret_cast<uintptr_t>(r.sum) % 16 != 0))
    throw Error(ErrorKind::Internal, "qmatvec_normed: a residual needs a 16-byte aligned sum");
  int dev = 0;
  (void)gpuGetDevice(&dev);
  const gpuDeviceProp_t& prop = context(dev).prop;
  const int y_dt = y_code(x_dtype);
  const auto* wb = static_cast<const uint8_t*>(w);
  by_x_code(y_dt, [&](auto xtag) {
    using X = decltype(xtag);
    if (t == GGMLType::Q4_0)
      launch_staged_norm<GGMLType::Q4_0, X>(s, wb, n, k, r, y, y_dt, prop, dev);
    else
      launch_staged_norm<GGMLType::Q8_0, X>(s, wb, n, k, r, y, y_dt, prop, dev);
  });
}

StoragePtr GpuStorage::qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l, const Storage* xq) const {
  const size_t m = x_l.shape[0];
  if (m > size_t(tune::kQmvMaxRows)) return qmatmul_prefill(*this, q, x, x_l);
  DeviceGuard dg(ordinal());
  auto out = new_storage(ordinal(), m * q.rows, x.dtype());
  // Rows already quantized by their producer (norms, silu_mul): no quantization kernel. The
  // kernel reads padded rows, so only row counts that need no padding take them.
  if (xq != nullptr && size_t(padded_rows(m)) == m) {
    qmatvec_q8_1(stream(), q.type, data(), q.rows, q.cols, as_gpu(*xq).data(), m, m, out->data(), x.dtype());
    return out;
  }
  Scratch xs(ordinal(), qmatvec_scratch_bytes(m, q.cols));
  qmatvec(stream(), q.type, data(), q.rows, q.cols, as_gpu(x).data(), x.dtype(), m, x_l.offset, size_t(x_l.strides[0]),
          xs.b.ptr, out->data());
  return out;
}

StoragePtr GpuStorage::qmatmul_rms_norm(const QuantDims& q, const Storage& x, const Layout& x_l,
                                        const NormArgs& a) const {
  const DType dt = x.dtype();
  if (a.bias || !a.rms || !a.weight || x_l.shape.size() != 2 || x_l.shape[0] != 1 || x_l.shape[1] != q.cols ||
      a.weight->dtype() != dt || (a.residual && a.residual->dtype() != dt))
    return nullptr;
  DeviceGuard dg(ordinal());
  const size_t esz = dtype_size(dt);
  auto at = [&](const Storage& st, size_t off) { return static_cast<const uint8_t*>(as_gpu(st).data()) + off * esz; };
  NormedRow r{at(x, x_l.offset), a.residual ? at(*a.residual, a.residual_offset) : nullptr,
              at(*a.weight, a.weight_offset), nullptr, a.eps};
  if (!qmatvec_normed_takes(q.type, data(), q.rows, q.cols, dt, r)) return nullptr;  // before any allocation
  std::shared_ptr<GpuStorage> sum;
  if (a.residual) {
    sum = new_storage(ordinal(), q.cols, dt);
    r.sum = sum->data();
  }
  auto out = new_storage(ordinal(), q.rows, dt);
  qmatvec_normed(stream(), q.type, data(), q.rows, q.cols, dt, r, out->data());
  if (a.residual) *a.sum = sum;
  return out;
}

}  // namespace wick::gpu

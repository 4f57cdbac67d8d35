// Batched matmul on the GPU: cuBLAS/rocBLAS strided-batched gemm (through blas.cu) for
// f16/bf16/f32/f64, f8e4m3 widened to f32 around an f32 gemm, and a tiled kernel in
// wrapping unsigned arithmetic for the integers (bit-identical to the CPU).
#include <algorithm>
#include <climits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/gpu/blas.hpp"
#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/matvec.hpp"
#include "backend/matmul_block.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/nn.hpp"
#include "ops/numeric.hpp"

namespace wick::gpu {

namespace {

// The batch dims (all but the last two, already merged by the core) of both operands and of
// the contiguous output. One dim, `inner`, is handed to the batched call or kernel with its
// stride; the host loops over the others (the core merges batches, so there is rarely more
// than one dim).
struct BatchPlan {
  std::vector<int64_t> dims, sa, sb, so;
  size_t inner = 0;
};

BatchPlan plan_batches(const Layout& la, const Layout& lb, const MatmulDims& d) {
  BatchPlan p;
  const size_t nb = la.rank() - 2;
  if (lb.rank() != la.rank())
    throw Error(ErrorKind::Internal, "matmul: operand ranks differ: " + la.str() + " and " + lb.str());
  int64_t total = 1;
  for (size_t i = 0; i < nb; ++i) {
    if (la.shape[i] != lb.shape[i])
      throw Error(ErrorKind::Internal, "matmul: batch dims differ: " + la.str() + " and " + lb.str());
    p.dims.push_back(int64_t(la.shape[i]));
    p.sa.push_back(la.strides[i]);
    p.sb.push_back(lb.strides[i]);
    total *= int64_t(la.shape[i]);
  }
  if (nb == 0) {  // as the CPU: b products of the same matrices
    p.dims = {int64_t(d.b)};
    p.sa = {0};
    p.sb = {0};
  } else if (total != int64_t(d.b)) {
    throw Error(ErrorKind::Internal, "matmul: batch count " + std::to_string(d.b) + " does not match " + la.str());
  }
  p.so.assign(p.dims.size(), 0);
  int64_t s = int64_t(d.m * d.n);
  for (size_t i = p.dims.size(); i-- > 0;) {
    p.so[i] = s;
    s *= p.dims[i];
  }
  p.inner = size_t(std::max_element(p.dims.begin(), p.dims.end()) - p.dims.begin());
  return p;
}

// Calls f(off_a, off_b, off_out, count, stride_a, stride_b, stride_out) for every index of
// the batch dims other than p.inner; offsets in elements, starting from the layouts' offsets.
template <class F> void for_each_batch_run(const BatchPlan& p, int64_t oa0, int64_t ob0, F f) {
  const size_t nd = p.dims.size();
  std::vector<int64_t> idx(nd, 0);
  while (true) {
    int64_t oa = oa0, ob = ob0, oo = 0;
    for (size_t i = 0; i < nd; ++i)
      if (i != p.inner) oa += idx[i] * p.sa[i], ob += idx[i] * p.sb[i], oo += idx[i] * p.so[i];
    f(oa, ob, oo, p.dims[p.inner], p.sa[p.inner], p.sb[p.inner], p.so[p.inner]);
    size_t i = nd;
    while (i-- > 0) {
      if (i == p.inner) continue;
      if (++idx[i] < p.dims[i]) break;
      idx[i] = 0;
    }
    if (i == size_t(-1)) return;
  }
}

// Row-major out (m x n) = A (m x k) * B (k x n) per batch is, in BLAS's column-major terms,
// out^T (n x m) = B^T A^T: B goes first with its own transposition flag, then A.
void gemm_batches(DeviceContext& ctx, DType dt, const MatmulDims& d, const char* a, const Layout& la,
                  const MatmulBlock& ab, const char* b, const Layout& lb, const MatmulBlock& bb, char* out) {
  check_blas_int(int64_t(d.m), "m");
  check_blas_int(int64_t(d.n), "n");
  check_blas_int(int64_t(d.k), "k");
  check_blas_int(ab.ld, "lhs leading dim");
  check_blas_int(bb.ld, "rhs leading dim");
  const size_t es = dtype_size(dt);
  const BatchPlan p = plan_batches(la, lb, d);
  for_each_batch_run(p, int64_t(la.offset), int64_t(lb.offset),
                     [&](int64_t oa, int64_t ob, int64_t oo, int64_t count, int64_t sa, int64_t sb, int64_t so) {
                       for (int64_t i0 = 0; i0 < count; i0 += INT_MAX) {
                         const int64_t c = std::min<int64_t>(INT_MAX, count - i0);
                         blas_gemm(ctx, dt, bb.trans, ab.trans, int(d.n), int(d.m), int(d.k),
                                   b + (ob + i0 * sb) * int64_t(es), int(bb.ld), sb,
                                   a + (oa + i0 * sa) * int64_t(es), int(ab.ld), sa,
                                   out + (oo + i0 * so) * int64_t(es), int(d.n), so, int(c));
                       }
                     });
}

template <class To, class From> struct MatmulCastF {
  __device__ To operator()(From x) const { return cast<To>(x); }
};

// f8e4m3 operand widened to f32. Zero-stride (broadcast) batch dims are widened once, so the
// f32 copy is no bigger than the distinct data; the returned layout has the same shape.
template <class T>
std::shared_ptr<GpuStorage> widen_to_f32(const GpuStorage& src, const Layout& l, Layout* f32_l) {
  Shape compact = l.shape;
  const size_t nb = l.rank() - 2;
  for (size_t i = 0; i < nb; ++i)
    if (l.strides[i] == 0) compact[i] = 1;
  auto buf = new_storage(src.ordinal(), shape_numel(compact), DType::F32);
  const Layout read(compact, l.strides, l.offset);
  launch_map(src.stream(), buf->ptr<float>(), compact, MatmulCastF<float, T>{}, {&read}, src.ptr<T>());
  std::vector<int64_t> strides = contiguous_strides(compact);
  for (size_t i = 0; i < nb; ++i)
    if (l.strides[i] == 0) strides[i] = 0;
  *f32_l = Layout(l.shape, strides, 0);
  return buf;
}

// Integers: 16 x 16 output tiles, operand tiles staged in shared memory. Arithmetic wraps in
// Acc (u32 for types up to 32 bits, u64 for i64), which gives exactly T's wrapping result.
constexpr int kTile = 16;

template <class T, class Acc>
__global__ void WICK_LAUNCH_BOUNDS(kTile* kTile)
    int_matmul_kernel(const T* WICK_RESTRICT a, int64_t a_rs, int64_t a_cs, int64_t a_bs, const T* WICK_RESTRICT b,
                      int64_t b_rs, int64_t b_cs, int64_t b_bs, T* WICK_RESTRICT out, int64_t o_bs, int64_t m,
                      int64_t n, int64_t k, int64_t batch) {
  kernel_entry();
  __shared__ Acc as[kTile][kTile + 1];
  __shared__ Acc bs[kTile][kTile + 1];
  const int tx = int(threadIdx.x) % kTile, ty = int(threadIdx.x) / kTile;
  const int64_t tiles_m = (m + kTile - 1) / kTile;
  const int64_t col = int64_t(blockIdx.x) * kTile + tx;
  // The y/z loops are uniform across the block, so the barriers inside are safe.
  for (int64_t bi = blockIdx.z; bi < batch; bi += gridDim.z) {
    const T* ab = a + bi * a_bs;
    const T* bb = b + bi * b_bs;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      const int64_t row = tm * kTile + ty;
      Acc acc = 0;
      for (int64_t p0 = 0; p0 < k; p0 += kTile) {
        as[ty][tx] = (row < m && p0 + tx < k) ? Acc(ab[row * a_rs + (p0 + tx) * a_cs]) : Acc(0);
        bs[ty][tx] = (p0 + ty < k && col < n) ? Acc(bb[(p0 + ty) * b_rs + col * b_cs]) : Acc(0);
        __syncthreads();
#pragma unroll
        for (int q = 0; q < kTile; ++q) acc = Acc(acc + Acc(as[ty][q] * bs[q][tx]));
        __syncthreads();
      }
      if (row < m && col < n) out[bi * o_bs + row * n + col] = T(acc);
    }
  }
}

template <class T>
void int_matmul(gpuStream_t s, const MatmulDims& d, const T* a, const Layout& la, const MatmulBlock& ab, const T* b,
                const Layout& lb, const MatmulBlock& bb, T* out) {
  using Acc = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
  const BatchPlan p = plan_batches(la, lb, d);
  const int64_t m = int64_t(d.m), n = int64_t(d.n), k = int64_t(d.k);
  const int64_t tiles_n = (n + kTile - 1) / kTile, tiles_m = (m + kTile - 1) / kTile;
  if (tiles_n > int64_t(INT_MAX))
    throw Error(ErrorKind::Unsupported, "matmul: n = " + std::to_string(n) + " is too large for one GPU launch");
  for_each_batch_run(p, int64_t(la.offset), int64_t(lb.offset),
                     [&](int64_t oa, int64_t ob, int64_t oo, int64_t count, int64_t sa, int64_t sb, int64_t so) {
                       const dim3 grid(unsigned(tiles_n), unsigned(std::min<int64_t>(tiles_m, 65535)),
                                       unsigned(std::min<int64_t>(count, 65535)));
                       launch_kernel(int_matmul_kernel<T, Acc>, grid, kTile * kTile, 0, s, a + oa, ab.rs, ab.cs, sa,
                                     b + ob, bb.rs, bb.cs, sb, out + oo, so, m, n, k, count);
                       check_launch("matmul(int)");
                     });
}

// ---- Few rows of x times a row-major weight: y (m x n) = x (m x k) W^T with W (n x k), m <= 8,
// f16/bf16, the LLM decode shape. cuBLAS/rocBLAS run it as a gemm with most of the GPU idle and
// below copy bandwidth; here R weight rows per block, the block's threads striding over each row in
// 16-byte vectors (consecutive threads: consecutive bytes), every vector dotted with all m rows of
// x in f32. A warp reduction, the warps' partial sums in shared memory, one rounding per output
// (as the f32-accumulating gemm). Rows of x past m (padded to 1/2/4/8) are never read.
// kSwiglu (matmul_swiglu): W has 2n rows, gate rows then up rows, and y (m x n) is
// silu(gate) * up; a block takes R / 2 gate rows and the up rows of the same outputs, and rounds
// both products to T before SiluMul, as matmul then swiglu (whose sums may run in another order:
// tune::kMvSwigluBlock threads).
template <class T, int M, int R, bool kSwiglu = false>
__global__ void WICK_LAUNCH_BOUNDS(tune::kMvMaxBlock)
    matvec_kernel(const T* WICK_RESTRICT x, int64_t x_ld, int m, const T* WICK_RESTRICT w, int64_t w_ld, int64_t n,
                  int64_t k, T* WICK_RESTRICT y) {
  kernel_entry();
  constexpr int V = 8;  // 8 x 16-bit = 16 bytes
  constexpr int U = tune::kMvUnroll;
  constexpr int P = kSwiglu ? R / 2 : R;  // outputs per block
  static_assert(!kSwiglu || R % 2 == 0, "a swiglu block holds pairs of rows");
  const int64_t row0 = int64_t(blockIdx.x) * P;
  const T* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t o = row0 + r % P < n ? row0 + r % P : n - 1;  // past n: not stored
    wr[r] = w + (kSwiglu && r >= P ? n + o : o) * w_ld;
  }
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;
  const int64_t vecs = k / V, step = blockDim.x;
  for (int64_t v0 = threadIdx.x; v0 < vecs; v0 += step * U) {
    VecOf<T, V> wv[U][R];
#pragma unroll
    for (int j = 0; j < U; ++j)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (v0 + j * step < vecs) wv[j][r] = reinterpret_cast<const VecOf<T, V>*>(wr[r])[v0 + j * step];
          // Guards, not breaks: clang 17 (ROCm 5.7) refuses to unroll a loop that breaks.
#pragma unroll
    for (int j = 0; j < U; ++j) {
      if (v0 + j * step < vecs) {
#pragma unroll
        for (int i = 0; i < M; ++i) {
          if (i < m) {
            const VecOf<T, V> xv = reinterpret_cast<const VecOf<T, V>*>(x + i * x_ld)[v0 + j * step];
            float xf[V];
#pragma unroll
            for (int e = 0; e < V; ++e) xf[e] = to_compute(xv.v[e]);
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
              for (int e = 0; e < V; ++e) acc[r][i] = ::fmaf(to_compute(wv[j][r].v[e]), xf[e], acc[r][i]);
          }
        }
      }
    }
  }
  float s;
  const bool has = block_sum<R, M>(acc, &s);
  if constexpr (!kSwiglu) {
    if (has) {
      const int r = int(threadIdx.x) / M, i = int(threadIdx.x) % M;
      if (row0 + r < n && i < m) y[int64_t(i) * n + row0 + r] = cast<T>(s);
    }
  } else {
    __shared__ float sums[R * M];  // (row, x row): gate rows first
    if (has) sums[threadIdx.x] = s;
    __syncthreads();
    const int t = int(threadIdx.x), p = t / M, i = t % M;
    if (t < P * M && row0 + p < n && i < m)
      y[int64_t(i) * n + row0 + p] =
          cast<T>(nn::SiluMul{}(to_compute(cast<T>(sums[t])), to_compute(cast<T>(sums[(P + p) * M + i]))));
  }
}

// The matrix-vector path applies when there is one product, m <= kMvMaxRows, x's rows and W's rows
// are contiguous with 16-byte aligned starts and strides (W: the transposed rhs of x.matmul(w.t())).
bool matvec_applies(const MatmulDims& d, DType dt, const void* a, const Layout& la, const MatmulBlock& ab,
                    const void* b, const Layout& lb, const MatmulBlock& bb) {
  if (dt != DType::F16 && dt != DType::BF16) return false;
  if (d.b != 1 || d.m > size_t(tune::kMvMaxRows) || ab.trans || !bb.trans) return false;
  if (d.m > 1 && ab.cs != 1) return false;
  if (d.n > 1 && bb.rs != 1) return false;
  const size_t es = 2;
  auto ok = [&](const void* p, size_t off, int64_t ld) {
    return aligned16(static_cast<const char*>(p) + off * es) && (size_t(ld) * es) % 16 == 0;
  };
  return d.k % 8 == 0 && ok(a, la.offset, ab.ld) && ok(b, lb.offset, bb.ld);
}

template <class T, int M, int R, bool S>
void launch_matvec_r(gpuStream_t s, const T* x, int64_t x_ld, int m, const T* w, int64_t w_ld, int64_t n, int64_t k,
                     T* y, int threads) {
  constexpr int P = S ? R / 2 : R;
  const unsigned grid = unsigned((n + P - 1) / P);
  launch_kernel(matvec_kernel<T, M, R, S>, grid, threads, 0, s, x, x_ld, m, w, w_ld, n, k, y);
  check_launch(S ? "matmul_swiglu(matvec)" : "matmul(matvec)");
}

// One row of x may take 1, 2 or 4 weight rows per block (rows_per_block, 0: the tuned choice, as
// qmatvec's sweep; 8 rows held 32 16-byte vectors and spilled on AMD wave64); more rows keep the tuned count.
template <class T, int M>
void launch_matvec_m(gpuStream_t s, const T* x, int64_t x_ld, int m, const T* w, int64_t w_ld, int64_t n, int64_t k,
                     T* y, int rows_per_block, int threads) {
  if constexpr (M == 1) {
    switch (rows_per_block ? rows_per_block : tune::kMvRows) {
      case 1:
        return launch_matvec_r<T, 1, 1, false>(s, x, x_ld, m, w, w_ld, n, k, y, threads);
      case 2:
        return launch_matvec_r<T, 1, 2, false>(s, x, x_ld, m, w, w_ld, n, k, y, threads);
      case 4:
        return launch_matvec_r<T, 1, 4, false>(s, x, x_ld, m, w, w_ld, n, k, y, threads);
      default:
        throw Error(ErrorKind::Argument,
                    "matvec: rows_per_block must be 0, 1, 2 or 4, got " + std::to_string(rows_per_block));
    }
  } else {
    launch_matvec_r<T, M, tune::kMvRows, false>(s, x, x_ld, m, w, w_ld, n, k, y, threads);
  }
}

// Rows per block and threads for one f16 row of x, where the caller asked for the tuned choice:
// rows whose last round of loads (on the tuned kMvBlock threads) is at most half full take
// tune::kMvHalfRoundRows per block of tune::kMvHalfRoundBlock threads.
std::pair<int, int> half_round_choice(int64_t k) {
  const int64_t round = int64_t(tune::kMvBlock) * tune::kMvUnroll, last = (k / 8) % round;  // 8 halves a load
  return last > 0 && last <= round / 2 ? std::pair<int, int>{tune::kMvHalfRoundRows, tune::kMvHalfRoundBlock}
                                       : std::pair<int, int>{0, 0};
}

template <class T>
void launch_matvec(gpuStream_t s, int64_t m_rows, int64_t n, int64_t k, const T* x, int64_t x_ld, const T* w,
                   int64_t w_ld, T* y, int rows_per_block = 0, int threads = 0) {
  if ((n + tune::kMvRows - 1) / tune::kMvRows > int64_t(INT_MAX))
    throw Error(ErrorKind::Unsupported, "matmul: n = " + std::to_string(n) + " is too large for one GPU launch");
  if constexpr (std::is_same_v<T, f16>)
    if (threads == 0 && rows_per_block == 0 && m_rows == 1)
      std::tie(rows_per_block, threads) = half_round_choice(k);
  const int th = threads ? threads : tune::kMvBlock;
  if (th % 64 != 0 || th > tune::kMvMaxBlock)
    throw Error(ErrorKind::Argument, "matvec: block_threads must be 0 or a multiple of 64 up to " +
                                         std::to_string(tune::kMvMaxBlock) + ", got " + std::to_string(threads));
  const int m = int(m_rows);
  if (m <= 1) return launch_matvec_m<T, 1>(s, x, x_ld, m, w, w_ld, n, k, y, rows_per_block, th);
  if (m <= 2) return launch_matvec_m<T, 2>(s, x, x_ld, m, w, w_ld, n, k, y, rows_per_block, th);
  if (m <= 4) return launch_matvec_m<T, 4>(s, x, x_ld, m, w, w_ld, n, k, y, rows_per_block, th);
  launch_matvec_m<T, 8>(s, x, x_ld, m, w, w_ld, n, k, y, rows_per_block, th);
}

}  // namespace

void matvec(gpuStream_t s, DType dt, const void* x, int64_t x_ld, size_t m, const void* w, int64_t w_ld, size_t n,
            size_t k, void* y, int rows_per_block, int block_threads) {
  if (m == 0 || m > size_t(tune::kMvMaxRows))  // the kernels hold at most 8 rows of x (as qmatvec)
    throw Error(ErrorKind::Internal, "matvec: " + std::to_string(m) + " rows; the matrix-vector path takes 1 to " +
                                         std::to_string(tune::kMvMaxRows));
  if (dt == DType::F16)
    launch_matvec<f16>(s, int64_t(m), int64_t(n), int64_t(k), static_cast<const f16*>(x), x_ld,
                       static_cast<const f16*>(w), w_ld, static_cast<f16*>(y), rows_per_block, block_threads);
  else if (dt == DType::BF16)
    launch_matvec<bf16>(s, int64_t(m), int64_t(n), int64_t(k), static_cast<const bf16*>(x), x_ld,
                        static_cast<const bf16*>(w), w_ld, static_cast<bf16*>(y), rows_per_block, block_threads);
  else
    throw Error(ErrorKind::DType, std::string("matvec: f16 or bf16, got ") + dtype_name(dt));
}

StoragePtr GpuStorage::matmul(const Storage& rhs_s, const MatmulDims& d, const Layout& lhs_l,
                              const Layout& rhs_l) const {
  const GpuStorage& rhs = as_gpu(rhs_s);
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), d.b * d.m * d.n, dtype_);
  if (d.b * d.m * d.n == 0) return out;
  if (d.k == 0) {
    check(gpuMemsetAsync(out->data(), 0, d.b * d.m * d.n * dtype_size(dtype_), stream()), "MemsetAsync");
    return out;
  }
  const MatmulBlock ab = inner_block(lhs_l, d.m, d.k, "lhs"), bb = inner_block(rhs_l, d.k, d.n, "rhs");
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, f8e4m3>) {
      // Widen, multiply in f32, round once (as the CPU).
      Layout fa, fb;
      auto wa = widen_to_f32<T>(*this, lhs_l, &fa);
      auto wb = widen_to_f32<T>(rhs, rhs_l, &fb);
      auto c = new_storage(ordinal(), d.b * d.m * d.n, DType::F32);
      gemm_batches(ctx(), DType::F32, d, static_cast<const char*>(wa->data()), fa, inner_block(fa, d.m, d.k, "lhs"),
                   static_cast<const char*>(wb->data()), fb, inner_block(fb, d.k, d.n, "rhs"),
                   static_cast<char*>(c->data()));
      const Shape flat{d.b * d.m * d.n};
      const Layout cl = Layout::contiguous(flat);
      launch_map(stream(), out->ptr<T>(), flat, MatmulCastF<T, float>{}, {&cl}, c->ptr<float>());
    } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      if (matvec_applies(d, dtype_, data(), lhs_l, ab, rhs.data(), rhs_l, bb)) {
        launch_matvec<T>(stream(), int64_t(d.m), int64_t(d.n), int64_t(d.k), ptr<T>() + lhs_l.offset, ab.ld,
                         rhs.ptr<T>() + rhs_l.offset, bb.ld, out->ptr<T>());
      } else {
        gemm_batches(ctx(), dtype_, d, static_cast<const char*>(data()), lhs_l, ab,
                     static_cast<const char*>(rhs.data()), rhs_l, bb, static_cast<char*>(out->data()));
      }
    } else if constexpr (is_float_v<T>) {
      gemm_batches(ctx(), dtype_, d, static_cast<const char*>(data()), lhs_l, ab, static_cast<const char*>(rhs.data()),
                   rhs_l, bb, static_cast<char*>(out->data()));
    } else {
      int_matmul<T>(stream(), d, ptr<T>(), lhs_l, ab, rhs.ptr<T>(), rhs_l, bb, out->ptr<T>());
    }
  });
  return out;
}

// One f16 row times W fused with swiglu (d.n = 2 x the outputs) where the plain product takes two
// rows per block; other operands: null, and the core runs matmul then swiglu.
StoragePtr GpuStorage::matmul_swiglu(const Storage& rhs_s, const MatmulDims& d, const Layout& lhs_l,
                                     const Layout& rhs_l) const {
  const GpuStorage& rhs = as_gpu(rhs_s);
  if (dtype_ != DType::F16 || d.m != 1 || d.n == 0 || d.k == 0) return nullptr;
  const MatmulBlock ab = inner_block(lhs_l, d.m, d.k, "lhs"), bb = inner_block(rhs_l, d.k, d.n, "rhs");
  if (!matvec_applies(d, dtype_, data(), lhs_l, ab, rhs.data(), rhs_l, bb)) return nullptr;
  // Only where the plain product would take two rows per block (tune::kMvSwigluBlock's note).
  if (half_round_choice(int64_t(d.k)).first != 2) return nullptr;
  DeviceGuard g(ordinal());
  const int64_t h = int64_t(d.n / 2);  // outputs: gate rows [0, h), up rows [h, 2h) of W
  auto out = new_storage(ordinal(), size_t(h), dtype_);
  launch_matvec_r<f16, 1, 2, true>(stream(), ptr<f16>() + lhs_l.offset, ab.ld, 1, rhs.ptr<f16>() + rhs_l.offset,
                                   bb.ld, h, int64_t(d.k), out->ptr<f16>(), tune::kMvSwigluBlock);
  return out;
}

}  // namespace wick::gpu

// Batched matmul on the CPU: OpenBLAS gemm for the floats (f16/bf16/f8 through f32), a
// blocked kernel in wrapping unsigned arithmetic for the integers.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend/matmul_block.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"

namespace wick::cpu {

namespace {

// Storage offset of each batch: batch dims are every dim but the last two (any strides).
std::vector<size_t> batch_offsets(const Layout& l, size_t b) {
  const size_t nb = l.rank() - 2;
  std::vector<size_t> offs(b);
  std::vector<size_t> idx(nb, 0);
  int64_t o = int64_t(l.offset);
  for (size_t i = 0; i < b; ++i) {
    offs[i] = size_t(o);
    for (size_t d = nb; d-- > 0;) {
      o += l.strides[d];
      if (++idx[d] < l.shape[d]) break;
      o -= l.strides[d] * int64_t(l.shape[d]);
      idx[d] = 0;
    }
  }
  return offs;
}

// OpenBLAS runs single-threaded inside libwick; the gemms are split over the backend's pool
// instead. With its own threads, OpenBLAS's idle workers spin (sched_yield) for a long time after
// every gemm (OPENBLAS_THREAD_TIMEOUT, read only at load time), so on 2 cores an exp of 1M floats
// right after a 1024^3 matmul took 0.89 ms instead of 0.24; one pool also means no two sets of
// threads contending for the cores. Trade-off: openblas_set_num_threads is process-wide, so other
// code in the process that calls OpenBLAS directly runs it single-threaded too (it can call
// openblas_set_num_threads again; wick's own gemms stay split over its pool either way).
void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

template <class T>
void gemm_1(bool ta, bool tb, size_t m, size_t n, size_t k, const T* a, size_t lda, const T* b, size_t ldb, T* c,
            size_t ldc) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb), 0.0f, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, TA, TB, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), 0.0, c, int(ldc));
}

constexpr size_t kSmallGemm = 4 * 65536;  // below this, a gemm is not worth splitting

// C (m x n, row-major, ldc = n) = op(A) op(B) on all cores: one panel of C per thread (rows when
// m >= n, else columns), each a single-threaded gemm. One panel per thread and no more, since
// every panel packs the whole of the other operand again; panels are rounded to 32 rows/columns
// (a multiple of OpenBLAS's micro-kernel tiles).
template <class T>
void gemm(bool ta, bool tb, size_t m, size_t n, size_t k, const T* a, size_t lda, const T* b, size_t ldb, T* c) {
  blas_single_threaded();
  const size_t threads = pool_threads();
  const bool rows = m >= n;
  const size_t len = rows ? m : n;
  const size_t panels = std::min(threads, (len + 31) / 32);
  if (panels < 2 || m * n * k <= kSmallGemm) return gemm_1(ta, tb, m, n, k, a, lda, b, ldb, c, n);
  const size_t step = ((len + panels - 1) / panels + 31) / 32 * 32;
  struct Ctx {
    bool ta, tb, rows;
    size_t m, n, k, lda, ldb, step, len;
    const T *a, *b;
    T* c;
  } ctx{ta, tb, rows, m, n, k, lda, ldb, step, len, a, b, c};
  parallel_chunks((len + step - 1) / step, [](void* p, size_t i) {
    const Ctx& x = *static_cast<const Ctx*>(p);
    const size_t s = i * x.step, e = std::min(x.len, s + x.step);
    if (x.rows)  // A's row s: a + s * lda, or a + s when A is stored transposed (k x m)
      gemm_1(x.ta, x.tb, e - s, x.n, x.k, x.a + (x.ta ? s : s * x.lda), x.lda, x.b, x.ldb, x.c + s * x.n, x.n);
    else  // B's column s: b + s, or b + s * ldb when B is stored transposed (n x k)
      gemm_1(x.ta, x.tb, x.m, e - s, x.k, x.a, x.lda, x.b + (x.tb ? s * x.ldb : s), x.ldb, x.c + s, x.n);
  }, &ctx);
}

template <class T>
void matmul_blas(const T* lhs, const T* rhs, T* out, const MatmulDims& d, const MatmulBlock& ab,
                 const MatmulBlock& bb, const std::vector<size_t>& lo, const std::vector<size_t>& ro) {
  auto one = [&](size_t i) {
    gemm<T>(ab.trans, bb.trans, d.m, d.n, d.k, lhs + lo[i], size_t(ab.ld), rhs + ro[i], size_t(bb.ld),
            out + i * d.m * d.n);
  };
  // A batch of small products (each too small to split) is spread over the pool by batch
  // instead (concurrent calls are safe in OpenBLAS >= 0.3.7).
  if (d.b > 1 && d.m * d.n * d.k <= kSmallGemm) {
    parallel_for(d.b, [&](size_t b0, size_t b1) {
      for (size_t i = b0; i < b1; ++i) one(i);
    }, std::max<size_t>(1, kSmallGemm / std::max<size_t>(d.m * d.n * d.k, 1)));
    return;
  }
  for (size_t i = 0; i < d.b; ++i) one(i);
}

// Copies a (rows x cols) strided block into a contiguous row-major f32 buffer.
template <class T> void block_to_f32(const T* src, const MatmulBlock& b, size_t rows, size_t cols, float* dst) {
  parallel_for(
      rows,
      [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r) {
          const T* s = src + int64_t(r) * b.rs;
          float* o = dst + r * cols;
          if (b.cs == 1)
            for (size_t c = 0; c < cols; ++c) o[c] = float(s[c]);
          else
            for (size_t c = 0; c < cols; ++c) o[c] = float(s[int64_t(c) * b.cs]);
        }
      },
      std::max<size_t>(1, kParallelGrain / std::max<size_t>(cols, 1)));
}

// f16/bf16/f8: each batch's operands are widened to f32, multiplied by sgemm (f32
// accumulation), and the result rounded once to T.
template <class T>
void matmul_small_float(const T* lhs, const T* rhs, T* out, const MatmulDims& d, const MatmulBlock& ab,
                        const MatmulBlock& bb, const std::vector<size_t>& lo, const std::vector<size_t>& ro) {
  std::vector<float> a(d.m * d.k), b(d.k * d.n), c(d.m * d.n);
  size_t last_a = SIZE_MAX, last_b = SIZE_MAX;  // broadcast batches reuse the widened operand
  for (size_t i = 0; i < d.b; ++i) {
    if (lo[i] != last_a) block_to_f32(lhs + lo[i], ab, d.m, d.k, a.data()), last_a = lo[i];
    if (ro[i] != last_b) block_to_f32(rhs + ro[i], bb, d.k, d.n, b.data()), last_b = ro[i];
    gemm<float>(false, false, d.m, d.n, d.k, a.data(), d.k, b.data(), d.n, c.data());
    T* o = out + i * d.m * d.n;
    parallel_for(d.m * d.n, [&](size_t s, size_t e) {
      for (size_t j = s; j < e; ++j) o[j] = T(c[j]);
    });
  }
}

// Integers: wrapping arithmetic in the unsigned type of T's width (u16 for u8, so that the
// multiply vectorises), which gives exactly T's wrapping result. B is widened to a row-major
// panel per batch so that the inner loop is a contiguous axpy.
template <class T>
void matmul_int(const T* lhs, const T* rhs, T* out, const MatmulDims& d, const MatmulBlock& ab, const MatmulBlock& bb,
                const std::vector<size_t>& lo, const std::vector<size_t>& ro) {
  using A = std::conditional_t<sizeof(T) == 1, uint16_t, std::make_unsigned_t<T>>;
  using Wide = std::conditional_t<(sizeof(A) < 4), uint32_t, A>;  // avoids int promotion in u16 * u16
  constexpr size_t kJBlock = 256;
  std::vector<A> bw(d.k * d.n);
  size_t last_b = SIZE_MAX;
  for (size_t bi = 0; bi < d.b; ++bi) {
    if (ro[bi] != last_b) {
      const T* src = rhs + ro[bi];
      for (size_t p = 0; p < d.k; ++p)
        for (size_t j = 0; j < d.n; ++j) bw[p * d.n + j] = A(src[int64_t(p) * bb.rs + int64_t(j) * bb.cs]);
      last_b = ro[bi];
    }
    const T* a = lhs + lo[bi];
    T* o = out + bi * d.m * d.n;
    const size_t grain = std::max<size_t>(1, kParallelGrain / std::max<size_t>(d.n * d.k, 1));
    parallel_for(
        d.m,
        [&](size_t r0, size_t r1) {
          A acc[kJBlock];
          for (size_t i = r0; i < r1; ++i) {
            for (size_t j0 = 0; j0 < d.n; j0 += kJBlock) {
              const size_t jn = std::min(kJBlock, d.n - j0);
              std::fill(acc, acc + jn, A(0));
              for (size_t p = 0; p < d.k; ++p) {
                const Wide av = A(a[int64_t(i) * ab.rs + int64_t(p) * ab.cs]);
                const A* brow = bw.data() + p * d.n + j0;
                for (size_t j = 0; j < jn; ++j) acc[j] = A(acc[j] + A(av * Wide(brow[j])));
              }
              for (size_t j = 0; j < jn; ++j) o[i * d.n + j0 + j] = T(acc[j]);
            }
          }
        },
        grain);
  }
}

}  // namespace

StoragePtr CpuStorage::matmul(const Storage& rhs_s, const MatmulDims& d, const Layout& lhs_l,
                              const Layout& rhs_l) const {
  const CpuStorage& rhs = as_cpu(rhs_s);
  auto out = new_storage(d.b * d.m * d.n, dtype_);
  if (d.b * d.m * d.n == 0) return out;
  if (d.k == 0) {
    std::memset(out->data(), 0, d.b * d.m * d.n * dtype_size(dtype_));
    return out;
  }
  const MatmulBlock ab = inner_block(lhs_l, d.m, d.k, "lhs"), bb = inner_block(rhs_l, d.k, d.n, "rhs");
  const std::vector<size_t> lo = batch_offsets(lhs_l, d.b), ro = batch_offsets(rhs_l, d.b);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* a = ptr<T>();
    const T* b = rhs.ptr<T>();
    T* o = out->ptr<T>();
    if constexpr (std::is_floating_point_v<T> || is_small_float_v<T>) {
      check_blas_int(int64_t(d.m), "m");
      check_blas_int(int64_t(d.n), "n");
      check_blas_int(int64_t(d.k), "k");
      check_blas_int(ab.ld, "lhs leading dim");
      check_blas_int(bb.ld, "rhs leading dim");
      if constexpr (std::is_floating_point_v<T>) matmul_blas<T>(a, b, o, d, ab, bb, lo, ro);
      else matmul_small_float<T>(a, b, o, d, ab, bb, lo, ro);
    } else {
      matmul_int<T>(a, b, o, d, ab, bb, lo, ro);
    }
  });
  return out;
}

}  // namespace wick::cpu

// CPU quantized matmul y = x @ W^T (W: n rows of k elements in a ggml block type).
//
// Up to 8 rows of x (decode): the rows are quantized once to the type's activation format
// (llama.cpp's Q8_0 / Q8_K, ops/quant_encode.hpp) and every weight row is dotted with all of them
// in integer arithmetic by the kernel level the CPU supports (qdot.hpp), weight rows split over
// the thread pool. Each weight block is read from memory once, which is what bounds a decode step.
// More rows (prefill) take the AVX-512 panel kernels where the type has one (qdot_kernels.hpp: 16
// weight rows repacked into vector lanes, 1.8-2.9x the row kernels at m = 64), else the row kernels,
// 8 rows of x per weight read, groups of x rows outermost within a chunk of weight rows (both stay
// in cache). The alternative, panels of W dequantized to f32 times OpenBLAS sgemm
// (WICK_QMATMUL_PATH=sgemm), was 3-18x slower than the row kernels for m = 16 to 512 on the 2-core
// machine (bench/cpu_qmatvec.cpp, bench/results/cpu_qmatvec_2cpu_*.txt).
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/qdot.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend/options.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"

namespace wick::cpu {
namespace {

constexpr size_t kMaxMatvecRows = 8;  // rows one kernel call takes (qdot::RowDot)

// Options::qmatmul_path (WICK_QMATMUL_PATH) picks the path of m > 8 rows, for measuring
// (bench/cpu_qmatvec.cpp) and for the tests of every path: sgemm dequantize + sgemm, rows the row
// kernels where a panel kernel exists. Read on every call, which costs nothing next to such a matmul.
bool many_rows_path_is(backend::QMatmulPath path) { return backend::options().qmatmul_path == path; }

// buf grown to at least `bytes` + 64 and its first 64-byte aligned byte.
uint8_t* aligned64(std::vector<uint8_t>& buf, size_t bytes) {
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  return buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
}

// Row i of x (unit last stride) as k floats in dst.
void row_to_f32(const Storage& x, const Layout& l, size_t i, size_t k, float* dst) {
  dispatch_float(x.dtype(), "qmatmul", [&](auto tag) {
    using T = decltype(tag);
    const T* p = as_cpu(x).ptr<T>() + l.offset + i * size_t(l.strides[0]);
    for (size_t j = 0; j < k; ++j) dst[j] = cast<float>(p[j]);
  });
}

constexpr size_t kChunk = 2048;  // activation elements quantized per chunk (a multiple of 256)

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The quantized activation rows: one buffer, per row the int8 values (64-byte aligned), the block
// scales and the integer sums (see qdot::XRow).
struct Activations {
  std::vector<uint8_t> buf;
  std::vector<qdot::XRow> rows;
};

void quantize_activations(const Storage& x, const Layout& l, size_t m, size_t k, GGMLType act, Activations& a) {
  const bool qk = act == GGMLType::Q8_K;
  const size_t be = qk ? 256 : 32, nb = k / be;
  const size_t q_bytes = round_up(k, 64), d_bytes = round_up(nb * 4, 64);
  const size_t s_bytes = round_up(qk ? (k / 16) * 2 : nb * 4, 64);
  const size_t sd_bytes = qk ? 0 : round_up(nb * 4, 64);
  const size_t qn_bytes = qk ? 0 : q_bytes;
  const size_t row_bytes = q_bytes + d_bytes + s_bytes + sd_bytes + qn_bytes;
  uint8_t* base = aligned64(a.buf, m * row_bytes);
  a.rows.resize(m);
  for (size_t i = 0; i < m; ++i) {
    uint8_t* r = base + i * row_bytes;
    a.rows[i] = {reinterpret_cast<int8_t*>(r), reinterpret_cast<float*>(r + q_bytes),
                 reinterpret_cast<int32_t*>(r + q_bytes + d_bytes), reinterpret_cast<int16_t*>(r + q_bytes + d_bytes),
                 reinterpret_cast<float*>(r + q_bytes + d_bytes + s_bytes),
                 qk ? nullptr : reinterpret_cast<int8_t*>(r + q_bytes + d_bytes + s_bytes + sd_bytes)};
  }
  // Chunks of up to kChunk elements of one row: f32 x through a stack buffer, each block encoded
  // as the shared encoder does (the bytes llama.cpp writes; by qdot::quantize_row_q8_0 / _q8_K, the
  // AVX-512 level vectorised) into the row's arrays.
  const size_t per_row = (k + kChunk - 1) / kChunk;
  struct Ctx {
    const Storage* x;
    const Layout* l;
    size_t k, per_row;
    bool qk;
    qdot::Isa isa;
    const qdot::XRow* rows;
  } ctx{&x, &l, k, per_row, qk, qdot::active_isa(), a.rows.data()};
  parallel_chunks(
      m * per_row,
      [](void* p, size_t c) {
        const Ctx& cx = *static_cast<const Ctx*>(p);
        const size_t i = c / cx.per_row, j0 = (c % cx.per_row) * kChunk;
        const size_t len = std::min(kChunk, cx.k - j0);
        float xf[kChunk];
        // Only this chunk's part of the row is converted.
        dispatch_float(cx.x->dtype(), "qmatmul", [&](auto tag) {
          using T = decltype(tag);
          const T* xp = as_cpu(*cx.x).ptr<T>() + cx.l->offset + i * size_t(cx.l->strides[0]) + j0;
          for (size_t j = 0; j < len; ++j) xf[j] = cast<float>(xp[j]);
        });
        const qdot::XRow& r = cx.rows[i];
        auto* q = const_cast<int8_t*>(r.q) + j0;
        auto* d = const_cast<float*>(r.d);
        if (!cx.qk) {  // j0 is a multiple of 128: the chunk's groups of 4 blocks are the row's
          const size_t ib = j0 / 32;
          qdot::quantize_row_q8_0(xf, len / 32, q, d + ib, const_cast<int32_t*>(r.s) + ib, const_cast<float*>(r.sd) + ib,
                                  const_cast<int8_t*>(r.qn) + j0, cx.isa);
          return;
        }
        const size_t ib = j0 / 256;
        qdot::quantize_row_q8_K(xf, len / 256, q, d + ib, const_cast<int16_t*>(r.bs) + ib * 16, cx.isa);
      },
      &ctx);
}

// y[i * n + j] = v in the output dtype.
inline void store(DType dt, void* y, size_t idx, float v) {
  switch (dt) {
    case DType::F16:
      static_cast<f16*>(y)[idx] = cast<f16>(v);
      break;
    case DType::BF16:
      static_cast<bf16*>(y)[idx] = cast<bf16>(v);
      break;
    default:
      static_cast<float*>(y)[idx] = v;
  }
}

// Rows [r0, r1) of y for x rows [0, m): groups of 8 x rows outermost, so a group's activations
// stay in cache across the weight rows, and (prefill) a chunk's ~32 KiB of weights across groups.
void rows_dot(qdot::RowDot kern, const uint8_t* w, size_t row_bytes, size_t nb, size_t n, const qdot::XRow* x,
              size_t m, DType dt, void* y, size_t r0, size_t r1) {
  float out[kMaxMatvecRows];
  for (size_t i0 = 0; i0 < m; i0 += kMaxMatvecRows) {
    const int mm = int(std::min(kMaxMatvecRows, m - i0));
    for (size_t r = r0; r < r1; ++r) {
      kern(w + r * row_bytes, nb, x + i0, mm, out);
      for (int i = 0; i < mm; ++i) store(dt, y, (i0 + i) * n + r, out[i]);
    }
  }
}

// Decode (m <= 8): every thread owns a contiguous share of the weight rows (one long read, which
// the prefetchers follow) and claims it in pieces of ~64 KiB from a cursor on its own cache line
// (an uncontended atomic); a thread done with its share takes pieces of the others', so a thread
// that started late or was preempted delays the op by at most a piece. The pool's chunks of 32
// KiB this replaces cost two contended atomics each and cut every thread's read into short
// streams: 1.1B Q8_0 tg32 on the 2-core machine went from 31 tok/s to 40 with chunks of >= 256
// KiB (same run as llama.cpp's 35-40), and a step's 155 Q4_0 matvecs alone from 12.4 to 12.15 ms
// with shares (49 GB/s, the machine's read bandwidth).
struct alignas(64) Cursor {
  std::atomic<size_t> next{0};
  size_t end = 0;
};

void matvec_shares(const QuantDims& q, const uint8_t* w, size_t row_bytes, const Activations& a, size_t m, DType dt,
                   void* y) {
  const size_t n = q.rows, rb = std::max<size_t>(1, row_bytes);
  const size_t shares = std::max<size_t>(1, std::min(pool_threads(), n * rb / (size_t(64) << 10)));
  struct Ctx {
    qdot::RowDot kern;
    const uint8_t* w;
    size_t row_bytes, nb, n, m, piece, shares;
    const qdot::XRow* x;
    DType dt;
    void* y;
    std::unique_ptr<Cursor[]> cur;
  } ctx{qdot::kernel(q.type, qdot::active_isa()),
        w,
        row_bytes,
        q.cols / quant::ggml_type_info(q.type)->block_elems,
        n,
        m,
        std::max<size_t>(1, (size_t(64) << 10) / rb),
        shares,
        a.rows.data(),
        dt,
        y,
        std::make_unique<Cursor[]>(shares)};
  for (size_t c = 0; c < shares; ++c) {
    ctx.cur[c].next.store(c * n / shares, std::memory_order_relaxed);
    ctx.cur[c].end = (c + 1) * n / shares;
  }
  parallel_chunks(
      shares,
      [](void* p, size_t c) {
        const Ctx& cx = *static_cast<const Ctx*>(p);
        for (size_t o = 0; o < cx.shares; ++o) {  // its own share first, then the others'
          Cursor& cu = cx.cur[(c + o) % cx.shares];
          for (;;) {
            const size_t r0 = cu.next.fetch_add(cx.piece, std::memory_order_relaxed);
            if (r0 >= cu.end) break;
            rows_dot(cx.kern, cx.w, cx.row_bytes, cx.nb, cx.n, cx.x, cx.m, cx.dt, cx.y, r0,
                     std::min(cu.end, r0 + cx.piece));
          }
        }
      },
      &ctx);
}

// The x rows as the panel kernels take them (qdot_kernels.hpp, kXTile*Bytes): groups of 8 rows,
// each group's blocks one after another, the rows of a block interleaved.
void fill_xtiles(const qdot::XRow* x, size_t m, size_t nb, const qdot::PanelKernel& pk, uint8_t* xt) {
  struct Ctx {
    const qdot::XRow* x;
    size_t m, nb;
    int32_t off;
    bool super;
    uint8_t* xt;
  } ctx{x, m, nb, pk.off, pk.super, xt};
  parallel_chunks((m + qdot::kXTileRows - 1) / qdot::kXTileRows,
                  [](void* p, size_t g) {
                    const Ctx& cx = *static_cast<const Ctx*>(p);
                    constexpr size_t R = qdot::kXTileRows;
                    const size_t bb = cx.super ? qdot::kXTileSuperBytes : qdot::kXTileBlockBytes;
                    const size_t be = cx.super ? 256 : 32;
                    uint8_t* t = cx.xt + g * cx.nb * bb;
                    std::memset(t, 0, cx.nb * bb);
                    for (size_t r = 0; r < R && g * R + r < cx.m; ++r) {
                      const qdot::XRow& xr = cx.x[g * R + r];
                      for (size_t b = 0; b < cx.nb; ++b) {
                        uint8_t* blk = t + b * bb;
                        std::memcpy(blk + be * r, xr.q + be * b, be);
                        std::memcpy(blk + (cx.super ? qdot::kXSuperD : qdot::kXBlockD) + 4 * r, xr.d + b, 4);
                        if (!cx.super) {
                          const int32_t os = -cx.off * xr.s[b];
                          std::memcpy(blk + qdot::kXBlockOff + 4 * r, &os, 4);
                          continue;
                        }
                        const int16_t* bs = xr.bs + 16 * b;  // sums of each 16
                        for (size_t h = 0; h < 16; ++h) {
                          const int32_t os = -cx.off * bs[h];
                          std::memcpy(blk + qdot::kXSuperOff + 64 * r + 4 * h, &os, 4);
                        }
                        // int16 pairs a dword: the sums of each 16 as they are, and of each 32
                        std::memcpy(blk + qdot::kXSuperPairs16 + 32 * r, bs, 32);
                        for (size_t q = 0; q < 4; ++q) {
                          const int16_t pair[2] = {int16_t(bs[4 * q] + bs[4 * q + 1]),
                                                   int16_t(bs[4 * q + 2] + bs[4 * q + 3])};
                          std::memcpy(blk + qdot::kXSuperPairs32 + 16 * r + 4 * q, pair, 4);
                        }
                      }
                    }
                  },
                  &ctx);
}

// Prefill (m > 8) with a panel kernel (qdot_kernels.hpp): a chunk is 16 weight rows, repacked once
// into a per-thread panel, then run against the x tiles (in cache for every panel).
void panel_gemm(const qdot::PanelKernel& pk, const QuantDims& q, const uint8_t* w, size_t row_bytes,
                const Activations& a, size_t m, DType dt, void* y) {
  const size_t nb = q.cols / (pk.super ? 256 : 32), groups = (m + qdot::kXTileRows - 1) / qdot::kXTileRows;
  const size_t xbb = pk.super ? qdot::kXTileSuperBytes : qdot::kXTileBlockBytes;
  // Kept per calling thread as the activations; one of more than 4 MiB is given back after the call.
  thread_local std::vector<uint8_t> kept;
  std::vector<uint8_t> big;
  const size_t need = groups * nb * xbb;
  uint8_t* xt = aligned64(need <= (size_t(4) << 20) ? kept : big, need);
  fill_xtiles(a.rows.data(), m, nb, pk, xt);
  struct Ctx {
    qdot::PanelKernel pk;
    const uint8_t* w;
    size_t row_bytes, nb, n, m, pbb, xbb;
    const uint8_t* xt;
    DType dt;
    void* y;
  } ctx{pk, w, row_bytes, nb, q.rows, m, pk.super ? qdot::kPanelSuperBytes : qdot::kPanelBlockBytes, xbb, xt, dt, y};
  parallel_chunks((q.rows + qdot::kPanelRows - 1) / qdot::kPanelRows,
                  [](void* p, size_t c) {
                    const Ctx& cx = *static_cast<const Ctx*>(p);
                    const size_t r0 = c * qdot::kPanelRows, rows = std::min(qdot::kPanelRows, cx.n - r0);
                    thread_local std::vector<uint8_t> buf;  // kept across calls: no allocation per chunk
                    uint8_t* panel = aligned64(buf, cx.nb * cx.pbb);
                    cx.pk.pack(cx.w + r0 * cx.row_bytes, cx.row_bytes, rows, cx.nb, panel);
                    alignas(64) float out[qdot::kXTileRows * qdot::kPanelRows];
                    for (size_t i0 = 0; i0 < cx.m; i0 += qdot::kXTileRows) {
                      const int mm = int(std::min(qdot::kXTileRows, cx.m - i0));
                      cx.pk.gemm(panel, cx.nb, cx.xt + (i0 / qdot::kXTileRows) * cx.nb * cx.xbb, mm,
                                 out);
                      for (int i = 0; i < mm; ++i) {
                        const size_t at = (i0 + i) * cx.n + r0;
                        if (cx.dt == DType::F32) {  // most prefills: one copy a row, no per-element switch
                          std::memcpy(static_cast<float*>(cx.y) + at, out + i * qdot::kPanelRows, rows * sizeof(float));
                          continue;
                        }
                        for (size_t j = 0; j < rows; ++j) store(cx.dt, cx.y, at + j, out[i * qdot::kPanelRows + j]);
                      }
                    }
                  },
                  &ctx);
}

// Prefill (m > 8): a panel kernel where the type and level have one, else the row kernels in the
// pool's chunks of ~32 KiB of weights, claimed one at a time.
void matvec(const QuantDims& q, const uint8_t* w, size_t row_bytes, const Activations& a, size_t m, DType dt, void* y) {
  if (m <= kMaxMatvecRows) return matvec_shares(q, w, row_bytes, a, m, dt, y);
  const qdot::PanelKernel pk = qdot::panel_kernel(q.type, qdot::active_isa());
  // The gathers index rows by int32 byte offsets: 15 rows apart must fit.
  if (pk.pack && row_bytes * (qdot::kPanelRows - 1) < (size_t(1) << 31) &&
      !many_rows_path_is(backend::QMatmulPath::Rows))
    return panel_gemm(pk, q, w, row_bytes, a, m, dt, y);
  struct Ctx {
    qdot::RowDot kern;
    const uint8_t* w;
    size_t row_bytes, nb, n, m, rows_per_chunk;
    const qdot::XRow* x;
    DType dt;
    void* y;
  } ctx{qdot::kernel(q.type, qdot::active_isa()), w, row_bytes, q.cols / quant::ggml_type_info(q.type)->block_elems,
        q.rows, m, std::max<size_t>(1, 32768 / std::max<size_t>(1, row_bytes)), a.rows.data(), dt, y};
  parallel_chunks((q.rows + ctx.rows_per_chunk - 1) / ctx.rows_per_chunk,
                  [](void* p, size_t c) {
                    const Ctx& cx = *static_cast<const Ctx*>(p);
                    const size_t r0 = c * cx.rows_per_chunk, r1 = std::min(cx.n, r0 + cx.rows_per_chunk);
                    rows_dot(cx.kern, cx.w, cx.row_bytes, cx.nb, cx.n, cx.x, cx.m, cx.dt, cx.y, r0, r1);
                  },
                  &ctx);
}

// OpenBLAS single-threaded inside the pool's chunks (as matmul.cpp, which says why).
void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Prefill: y (m, n) f32 = x (m, k) f32 @ W^T, W dequantized one panel of rows at a time into a
// per-thread buffer (it stays allocated across calls) and multiplied by sgemm.
void dequant_gemm(const QuantDims& q, const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, size_t m,
                  float* y) {
  blas_single_threaded();
  const quant::GGMLTypeInfo& ti = *quant::ggml_type_info(q.type);
  // Panels of ~2 MiB of f32 weights, at least 32 and a multiple of 32 rows: large enough that
  // packing x again for every panel costs little next to the panel's flops.
  const size_t k = q.cols;
  const size_t panel = std::max<size_t>(32, round_up(std::max<size_t>(1, (size_t(1) << 19) / k), 32));
  struct Ctx {
    const quant::GGMLTypeInfo* ti;
    const uint8_t* w;
    size_t row_bytes, k, n, m, panel, ldx;
    const float* x;
    float* y;
  } ctx{&ti, w, row_bytes, k, q.rows, m, panel, ldx, x, y};
  parallel_chunks((q.rows + panel - 1) / panel,
                  [](void* p, size_t c) {
                    const Ctx& cx = *static_cast<const Ctx*>(p);
                    const size_t r0 = c * cx.panel, nr = std::min(cx.n - r0, cx.panel);
                    thread_local std::vector<float> wf;
                    if (wf.size() < nr * cx.k) wf.resize(nr * cx.k);
                    const size_t nb = cx.k / cx.ti->block_elems;
                    for (size_t r = 0; r < nr; ++r)
                      for (size_t b = 0; b < nb; ++b)
                        quant::dequantize_block(cx.ti->type, cx.w + (r0 + r) * cx.row_bytes + b * cx.ti->block_bytes,
                                                wf.data() + r * cx.k + b * cx.ti->block_elems);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(cx.m), int(nr), int(cx.k), 1.0f, cx.x,
                                int(cx.ldx), wf.data(), int(cx.k), 0.0f, cx.y + r0, int(cx.n));
                  },
                  &ctx);
}

}  // namespace

StoragePtr CpuStorage::qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l, const Storage*) const {
  const size_t m = x_l.shape[0], n = q.rows, k = q.cols;
  const size_t row_bytes = n ? numel() / n : 0;
  const auto* w = static_cast<const uint8_t*>(data());
  auto out = new_storage(m * n, x.dtype());
  if (m == 0 || n == 0) return out;
  if (k == 0) {  // empty sums (zero bits are 0 in f32, f16 and bf16)
    std::memset(out->data(), 0, m * n * dtype_size(x.dtype()));
    return out;
  }
  if (m <= kMaxMatvecRows || !many_rows_path_is(backend::QMatmulPath::Sgemm)) {
    // The activation buffer is kept per calling thread, so a decode step allocates nothing but
    // its output; one of more than 4 MiB (a long prefill) is given back after the call.
    thread_local Activations kept;
    Activations big;
    const size_t need = m * (2 * k + 3 * (k / 32) * 4 + 5 * 64);  // >= quantize_activations' layout
    Activations& a = need <= (size_t(4) << 20) ? kept : big;
    quantize_activations(x, x_l, m, k, qdot::act_type(q.type), a);
    matvec(q, w, row_bytes, a, m, x.dtype(), out->data());
    return out;
  }
  // f32 x with a unit last stride is used in place; others are widened once.
  std::vector<float> xf;
  const float* xp;
  size_t ldx = k;
  if (x.dtype() == DType::F32 && x_l.strides[0] >= int64_t(k)) {
    xp = as_cpu(x).ptr<float>() + x_l.offset;
    ldx = size_t(x_l.strides[0]);
  } else {  // half x, or rows closer than k apart (a broadcast): sgemm needs lda >= k
    xf.resize(m * k);
    for (size_t i = 0; i < m; ++i) row_to_f32(x, x_l, i, k, xf.data() + i * k);
    xp = xf.data();
  }
  if (x.dtype() == DType::F32) {
    dequant_gemm(q, w, row_bytes, xp, ldx, m, out->ptr<float>());
    return out;
  }
  std::vector<float> yf(m * n);
  dequant_gemm(q, w, row_bytes, xp, ldx, m, yf.data());
  dispatch_float(x.dtype(), "qmatmul", [&](auto tag) {
    using T = decltype(tag);
    T* o = out->ptr<T>();
    for (size_t i = 0; i < m * n; ++i) o[i] = cast<T>(yf[i]);
  });
  return out;
}

}  // namespace wick::cpu

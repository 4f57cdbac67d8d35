// Fused attention forward (FlashAttention-2) for f16/bf16 on NVIDIA tensor cores (WMMA, sm_80+).
// A block of 4 warps owns 64 query rows of one (batch, head); each warp owns 16 of them. The
// block walks the key tiles (64 keys; a causal block stops at the last tile its last row can
// see), double-buffered in shared memory with cp.async. Per tile each warp computes its 16 x 64
// scores with WMMA, does the online softmax on them in f32 (through a per-warp shared buffer,
// since WMMA hides which lane holds which element), rounds the probabilities to the input
// dtype and accumulates O += P V in f32 register fragments, rescaled by the row's correction
// factor through a lane -> row map read back from a fragment. Nothing of size t_q x t_kv is
// ever written to global memory. HIP builds keep the chunked GEMM path of attention.cu (a
// rocWMMA/MFMA version of this kernel is future work).
#include "backend/gpu/kernels/attention_flash.hpp"

#include <climits>
#include <cmath>
#include <string>

#include "backend/gpu/device_utils.cuh"

#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

namespace wick::gpu {

#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
namespace {

constexpr int kBM = tune::kFlashRows;  // query rows per block
constexpr int kBN = tune::kFlashKeys;  // keys per tile
constexpr int kWarps = kBM / 16;       // a warp owns 16 query rows (one WMMA row of fragments)
constexpr int kThreads = kWarps * 32;
static_assert(kBM == 64 && kBN == 64, "the softmax step maps 32 lanes onto 16 rows x 64 keys");
constexpr int kSLd = kBN + 8;  // f32 score row: float4 reads of 8 lanes (4 rows) hit distinct banks
constexpr int kPLd = kBN + 8;  // 16-bit probability row (a multiple of 8 for WMMA)

// Shared memory of one block, in bytes. Every region and every fragment pointer inside it is
// 32-byte aligned, as WMMA requires. A warp's probabilities overwrite the start of its own
// score buffer once every lane holds its scores in registers.
template <int D> struct Smem {
  static constexpr int kLd = D + 8;  // 16-bit q/k/v row: a 16-byte skew keeps 8-row reads conflict-free
  static constexpr size_t kTile = size_t(kBN) * kLd * 2;  // one K or V tile
  static constexpr size_t kK = 0;                         // K tiles [2]
  static constexpr size_t kV = 2 * kTile;                 // V tiles [2]
  static constexpr size_t kQ = 4 * kTile;                 // Q tile (kBM rows)
  static constexpr size_t kS = kQ + size_t(kBM) * kLd * 2;  // per warp: 16 x kSLd f32 scores
  static constexpr size_t kSWarp = size_t(16) * kSLd * 4;
  static constexpr size_t kPWarp = size_t(16) * kPLd * 2;   // 16 x kPLd probabilities, in the score buffer
  static constexpr size_t kC = kS + kWarps * kSWarp;       // per warp: 16 f32 correction factors
  static constexpr size_t kBytes = kC + size_t(kWarps) * 16 * 4;
  static_assert(kTile % 32 == 0 && kSWarp % 32 == 0 && kS % 32 == 0, "WMMA pointers need 32-byte alignment");
  static_assert(kPWarp <= kSWarp && 16 * 16 * 4 <= kSWarp, "P and the row-map matrix live in the score buffer");
};

template <class H> struct FlashParams {
  const H* q;
  const H* k;
  const H* v;
  H* o;
  int64_t q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st;
  int64_t t_q, t_kv, shift;  // causal: query i sees keys j <= i + shift
  int h_q, group;
  float scale_log2;  // scale * log2(e): the softmax runs on exp2
  bool causal;
};

#if WICK_HAS_MMA && WICK_HAS_CP_ASYNC
template <class H> __device__ __forceinline__ H from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Rows row0.. of a (rows_total x D) operand with row stride `stride` into a kBM/kBN x D tile;
// rows past the end are zero (so that masked keys multiply finite values).
template <int D, class H>
__device__ __forceinline__ void load_tile(H* s, const H* g, int64_t stride, int64_t row0, int64_t rows_total) {
  constexpr int kVecs = D / 8, kTotal = 64 * kVecs;
#pragma unroll
  for (int i = int(threadIdx.x); i < kTotal; i += kThreads) {
    const int r = i / kVecs, c = (i % kVecs) * 8;
    const bool ok = row0 + r < rows_total;
    cp_async16(s + r * Smem<D>::kLd + c, ok ? g + (row0 + r) * stride + c : g, ok ? 16 : 0);
  }
}
#endif

template <class H, int D>
__global__ void WICK_LAUNCH_BOUNDS(kThreads) flash_fwd_kernel(FlashParams<H> p) {
  kernel_entry();
#if WICK_HAS_MMA && WICK_HAS_CP_ASYNC
  using namespace nvcuda;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major>;
  using FragKt = wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major>;  // K^T from row-major K
  using FragV = wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  using L = Smem<D>;
  constexpr int kLd = L::kLd, kDF = D / 16;
  constexpr int kCE = FragC::num_elements;

  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  H* sK = reinterpret_cast<H*>(smem + L::kK);
  H* sV = reinterpret_cast<H*>(smem + L::kV);
  const H* sQw = reinterpret_cast<const H*>(smem + L::kQ) + warp * 16 * kLd;  // the warp's 16 query rows
  float* sS = reinterpret_cast<float*>(smem + L::kS + warp * L::kSWarp);
  H* sP = reinterpret_cast<H*>(sS);  // written after the scores were read
  float* sC = reinterpret_cast<float*>(smem + L::kC) + warp * 16;

  // Heavy (late) causal query tiles start first: the short ones fill the tail.
  const int qt = p.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int64_t q0 = int64_t(qt) * kBM;
  const int hq = int(blockIdx.y), bi = int(blockIdx.z), hk = hq / p.group;
  const H* qg = p.q + bi * p.q_sb + hq * p.q_sh;
  const H* kg = p.k + bi * p.k_sb + hk * p.k_sh;
  const H* vg = p.v + bi * p.v_sb + hk * p.v_sh;
  // Keys this block needs: all, or (causal) up to what its last valid row sees (<= t_kv).
  const int64_t kv_end = p.causal ? (q0 + kBM < p.t_q ? q0 + kBM : p.t_q) + p.shift : p.t_kv;
  const int n_tiles = int((kv_end + kBN - 1) / kBN);

  load_tile<D>(reinterpret_cast<H*>(smem + L::kQ), qg, p.q_st, q0, p.t_q);
  cp_async_commit();
  load_tile<D>(sK, kg, p.k_st, 0, p.t_kv);
  load_tile<D>(sV, vg, p.v_st, 0, p.t_kv);
  cp_async_commit();

  // Which row of the warp's 16 each accumulator element of this lane belongs to: WMMA does not
  // document the mapping, so load a matrix whose entries are their row numbers.
  int row_of[kCE];
  {
    float* rm = sS;
    for (int e = lane; e < 256; e += 32) rm[e] = float(e / 16);
    __syncwarp();
    FragC f;
    wmma::load_matrix_sync(f, rm, 16, wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < kCE; ++i) row_of[i] = int(f.x[i]);
    __syncwarp();
  }

  FragC o[kDF];
#pragma unroll
  for (int j = 0; j < kDF; ++j) wmma::fill_fragment(o[j], 0.0f);

  // Softmax step: lanes 2r and 2r+1 share row r; lane half h takes columns h*4 + 8c + e.
  const int r = lane >> 1, half = lane & 1;
  const int64_t qi = q0 + warp * 16 + r;
  float m = -INFINITY, l = 0.f;  // running max (log2 units) and sum of this row

  for (int t = 0; t < n_tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < n_tiles) {
      const int64_t next = int64_t(t + 1) * kBN;
      load_tile<D>(sK + (buf ^ 1) * kBN * kLd, kg, p.k_st, next, p.t_kv);
      load_tile<D>(sV + (buf ^ 1) * kBN * kLd, vg, p.v_st, next, p.t_kv);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t (and, on the first pass, Q) is visible to all
    const H* Kt = sK + buf * kBN * kLd;
    const H* Vt = sV + buf * kBN * kLd;

    // S = Q K^T for the warp's 16 rows x 64 keys.
    // (Q fragments come from shared memory each tile: held in registers they spill at d = 128.)
    {
      FragC s[kBN / 16];
#pragma unroll
      for (int n = 0; n < kBN / 16; ++n) wmma::fill_fragment(s[n], 0.0f);
#pragma unroll
      for (int kk = 0; kk < kDF; ++kk) {
        FragA qf;
        wmma::load_matrix_sync(qf, sQw + kk * 16, kLd);
#pragma unroll
        for (int n = 0; n < kBN / 16; ++n) {
          FragKt kb;
          wmma::load_matrix_sync(kb, Kt + n * 16 * kLd + kk * 16, kLd);
          wmma::mma_sync(s[n], qf, kb, s[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < kBN / 16; ++n) wmma::store_matrix_sync(sS + n * 16, s[n], kSLd, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of row r over this tile's keys.
    const int64_t kv0 = int64_t(t) * kBN;
    const bool mask = kv0 + kBN > p.t_kv || (p.causal && kv0 + kBN - 1 > q0 + p.shift);
    float x[32];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float4 v4 = *reinterpret_cast<const float4*>(sS + r * kSLd + half * 4 + 8 * c);
      x[4 * c + 0] = v4.x * p.scale_log2;
      x[4 * c + 1] = v4.y * p.scale_log2;
      x[4 * c + 2] = v4.z * p.scale_log2;
      x[4 * c + 3] = v4.w * p.scale_log2;
    }
    __syncwarp();  // every lane holds its scores: P may overwrite them
    if (mask) {
      // Row r sees the tile's columns below vis: the end of the keys, and (causal) key qi + shift.
      int64_t lim = p.t_kv - kv0;
      if (p.causal && qi + p.shift + 1 - kv0 < lim) lim = qi + p.shift + 1 - kv0;
      const int vis = lim < 0 ? 0 : (lim > kBN ? kBN : int(lim));
#pragma unroll
      for (int e = 0; e < 32; ++e)
        if (half * 4 + 8 * (e / 4) + e % 4 >= vis) x[e] = -INFINITY;
    }
    float mx = x[0];
#pragma unroll
    for (int e = 1; e < 32; ++e) mx = fmaxf(mx, x[e]);
    mx = fmaxf(mx, shfl_xor(mx, 1));
    const float m_new = fmaxf(m, mx);
    // A row that has seen no key yet keeps m = -inf; exp2(-inf - 0) = 0 avoids -inf - -inf.
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    const float corr = exp2f(m - m_use);
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      VecOf<H, 4> pk;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = exp2f(x[4 * c + e] - m_use);
        sum += pe;
        pk.v[e] = from_f32<H>(pe);
      }
      *reinterpret_cast<VecOf<H, 4>*>(sP + r * kPLd + half * 4 + 8 * c) = pk;
    }
    sum += shfl_xor(sum, 1);
    l = l * corr + sum;
    m = m_new;
    if (half == 0) sC[r] = corr;
    __syncwarp();

    // O = diag(corr) O + P V.
    float cf[kCE];
#pragma unroll
    for (int i = 0; i < kCE; ++i) cf[i] = sC[row_of[i]];
#pragma unroll
    for (int j = 0; j < kDF; ++j)
#pragma unroll
      for (int i = 0; i < kCE; ++i) o[j].x[i] *= cf[i];
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      FragA pf;
      wmma::load_matrix_sync(pf, sP + kk * 16, kPLd);
#pragma unroll
      for (int j = 0; j < kDF; ++j) {
        FragV vb;
        wmma::load_matrix_sync(vb, Vt + kk * 16 * kLd + j * 16, kLd);
        wmma::mma_sync(o[j], pf, vb, o[j]);
      }
    }
    __syncthreads();  // every warp is done with tile t before tile t + 2 overwrites its buffer
  }

  // O / l, rounded to the dtype; each 16 x 16 fragment is staged through the warp's score buffer.
  const float inv_l = 1.f / l;
  H* og = p.o + ((int64_t(bi) * p.h_q + hq) * p.t_q + qi) * D;
#pragma unroll
  for (int j = 0; j < kDF; ++j) {
    wmma::store_matrix_sync(sS, o[j], kSLd, wmma::mem_row_major);
    __syncwarp();
    if (qi < p.t_q) {
      const float4 a = *reinterpret_cast<const float4*>(sS + r * kSLd + half * 8);
      const float4 b = *reinterpret_cast<const float4*>(sS + r * kSLd + half * 8 + 4);
      VecOf<H, 8> w;
      w.v[0] = from_f32<H>(a.x * inv_l);
      w.v[1] = from_f32<H>(a.y * inv_l);
      w.v[2] = from_f32<H>(a.z * inv_l);
      w.v[3] = from_f32<H>(a.w * inv_l);
      w.v[4] = from_f32<H>(b.x * inv_l);
      w.v[5] = from_f32<H>(b.y * inv_l);
      w.v[6] = from_f32<H>(b.z * inv_l);
      w.v[7] = from_f32<H>(b.w * inv_l);
      *reinterpret_cast<VecOf<H, 8>*>(og + j * 16 + half * 8) = w;
    }
    __syncwarp();
  }
#else
  (void)p;  // host pass, or a target below sm_80 (the host never launches it there)
#endif
}

template <class H, int D> const void* kernel_ptr() { return reinterpret_cast<const void*>(&flash_fwd_kernel<H, D>); }

const void* kernel_for(DType dt, size_t d) {
  if (dt == DType::F16) return d == 64 ? kernel_ptr<__half, 64>() : kernel_ptr<__half, 128>();
  return d == 64 ? kernel_ptr<__nv_bfloat16, 64>() : kernel_ptr<__nv_bfloat16, 128>();
}

bool operand_ok(const FlashOperand& o) {
  return aligned16(o.p) && o.sb >= 0 && o.sh >= 0 && o.st >= 0 && o.sb % 8 == 0 && o.sh % 8 == 0 && o.st % 8 == 0;
}

template <class H, int D>
void launch(DeviceContext& ctx, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v, void* out,
            const AttentionDims& a) {
  FlashParams<H> p;
  p.q = static_cast<const H*>(q.p);
  p.k = static_cast<const H*>(k.p);
  p.v = static_cast<const H*>(v.p);
  p.o = static_cast<H*>(out);
  p.q_sb = q.sb, p.q_sh = q.sh, p.q_st = q.st;
  p.k_sb = k.sb, p.k_sh = k.sh, p.k_st = k.st;
  p.v_sb = v.sb, p.v_sh = v.sh, p.v_st = v.st;
  p.t_q = int64_t(a.t_q);
  p.t_kv = int64_t(a.t_kv);
  p.shift = int64_t(a.t_kv) - int64_t(a.t_q);
  p.h_q = int(a.h_q);
  p.group = int(a.h_q / a.h_kv);
  p.scale_log2 = float(a.scale * 1.4426950408889634);
  p.causal = a.causal;
  constexpr size_t bytes = Smem<D>::kBytes;
  check(gpuFuncSetAttribute(kernel_ptr<H, D>(), gpuFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
        "FuncSetAttribute(attention flash)");
  const dim3 grid(unsigned((a.t_q + kBM - 1) / kBM), unsigned(a.h_q), unsigned(a.b));
  launch_kernel(flash_fwd_kernel<H, D>, grid, kThreads, bytes, ctx.stream, p);
  check_launch("attention(flash)");
}

}  // namespace

bool flash_attention_supported(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k,
                               const FlashOperand& v, const AttentionDims& a) {
  if (dt != DType::F16 && dt != DType::BF16) return false;
  if (a.d != a.d_v || (a.d != 64 && a.d != 128)) return false;
  if (ctx.prop.major < 8) return false;
  if (a.b == 0 || a.h_q == 0 || a.h_kv == 0 || a.t_q == 0 || a.t_kv == 0) return false;
  if (a.b > 65535 || a.h_q > 65535 || (a.t_q + kBM - 1) / kBM > size_t(INT_MAX)) return false;
  if (a.causal && a.t_kv < a.t_q) return false;  // the core refuses it; the kernel assumes shift >= 0
  if (!operand_ok(q) || !operand_ok(k) || !operand_ok(v)) return false;
  const size_t bytes = a.d == 64 ? Smem<64>::kBytes : Smem<128>::kBytes;
  if (size_t(ctx.prop.sharedMemPerBlockOptin) < bytes) return false;
  // The binary the runtime picked must hold the sm_80+ body (a build for older targets only
  // would JIT the empty one).
  return has_sm80_body(kernel_for(dt, a.d));
}

void flash_attention(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                     void* out, const AttentionDims& a) {
  if (dt == DType::F16) {
    if (a.d == 64) launch<__half, 64>(ctx, q, k, v, out, a);
    else launch<__half, 128>(ctx, q, k, v, out, a);
  } else {
    if (a.d == 64) launch<__nv_bfloat16, 64>(ctx, q, k, v, out, a);
    else launch<__nv_bfloat16, 128>(ctx, q, k, v, out, a);
  }
}

#else  // WICK_GPU_HIP and the AMD emulation: AMD keeps the portable chunked path.

bool flash_attention_supported(DeviceContext&, DType, const FlashOperand&, const FlashOperand&, const FlashOperand&,
                               const AttentionDims&) {
  return false;
}
void flash_attention(DeviceContext&, DType, const FlashOperand&, const FlashOperand&, const FlashOperand&, void*,
                     const AttentionDims&) {
  throw Error(ErrorKind::Unsupported, "attention: the fused flash kernel is not built for HIP");
}

#endif

}  // namespace wick::gpu

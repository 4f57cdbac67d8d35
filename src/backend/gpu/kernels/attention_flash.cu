// Fused attention forward (FlashAttention-2) for f16/bf16 on NVIDIA tensor cores (mma.sync
// m16n8k16, sm_80+). A block of kWarps warps owns kBM query rows of one (batch, head); each warp
// owns kMB blocks of 16 of them, so every K and V fragment it loads feeds kMB mma. The block walks
// the key tiles (kBN keys; a causal block stops at the last tile its last row can see, and a warp
// skips the tiles past its own last row), double-buffered in shared memory with cp.async and read
// back as fragments by ldmatrix. Per tile each warp computes its scores into registers, runs the
// online softmax on them in f32 with exp2 (the 4 lanes that share a row meet by shuffles; O is
// rescaled only when a row's maximum moved), rounds the probabilities to the input dtype and uses
// the score registers as the A fragments of O += P V (the C layout of two 8-key tiles is the A
// layout of one 16-key step), O in f32 registers. Nothing of size t_q x t_kv is ever written to
// memory. HIP builds keep the chunked GEMM path of attention.cu (an MFMA/WMMA version of this
// kernel is future work).
#include "backend/gpu/kernels/attention_flash.hpp"

#include <climits>
#include <cmath>
#include <string>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/kernels/mma.cuh"

namespace wick::gpu {

#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
namespace {

constexpr int kWarps = tune::kFlashWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kMB = tune::kFlashRowBlocks;  // 16-row blocks per warp
constexpr int kBN = tune::kFlashKeys;       // keys per tile
constexpr int kBM = kWarps * 16 * kMB;      // query rows per block

// Shared memory of a block: two stages of a K and a V tile (kBN rows each), then Q (kBM rows),
// where the output is staged after the last tile. A row is D elements plus a 16-byte skew, so the
// 8 rows an ldmatrix reads fall in distinct banks.
template <int D> struct Smem {
  static constexpr int kLd = D + 8;
  static constexpr size_t kTile = size_t(kBN) * kLd;  // elements of one K or V tile
  static constexpr size_t kQ = 4 * kTile;
  static constexpr size_t kBytes = (kQ + size_t(kBM) * kLd) * 2;
  static_assert(kBN % 16 == 0, "P V takes 16-key steps");
};

#if WICK_HAS_MMA && WICK_HAS_CP_ASYNC
// A thread's share of copying R rows of a (rows_total x D) operand (row stride `stride`) into R tile
// rows of LD elements: 16-byte chunks tid, tid + kThreads, ..., i.e. column c0 of rows r0, r0 + kStep,
// ... Rows past the end are zeros (so that masked keys multiply finite values); a tile that lies
// inside the operand takes no bound checks.
template <int D, int LD, int R, class T> struct TileCopy {
  static constexpr int kVecs = D / 8, kStep = kThreads / kVecs, kPer = R / kStep;
  static_assert(kThreads % kVecs == 0 && R % kStep == 0, "whole rows per round of the block's threads");
  const T* g;
  int64_t stride;
  int r0, c0;
  __device__ TileCopy(const T* g_, int64_t stride_) : g(g_), stride(stride_) {
    r0 = int(threadIdx.x) / kVecs;
    c0 = (int(threadIdx.x) % kVecs) * 8;
  }
  __device__ __forceinline__ void operator()(unsigned s, int64_t row0, int64_t rows_total) const {
    const T* src = g + (row0 + r0) * stride + c0;
    const unsigned dst = s + unsigned(r0 * LD + c0) * 2;
    if (row0 + R <= rows_total) {
#pragma unroll
      for (int j = 0; j < kPer; ++j) cp_async16_to(dst + unsigned(j * kStep * LD * 2), src + j * kStep * stride, 16);
    } else {
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const bool ok = row0 + r0 + j * kStep < rows_total;
        cp_async16_to(dst + unsigned(j * kStep * LD * 2), ok ? src + j * kStep * stride : g, ok ? 16 : 0);
      }
    }
  }
};
#endif

template <class T, int D>
__global__ void __launch_bounds__(kThreads, tune::kFlashMinBlocks) flash_fwd_kernel(FlashParams<T> p) {
  kernel_entry();
#if WICK_HAS_MMA && WICK_HAS_CP_ASYNC
  using S = Smem<D>;
  constexpr int MB = kMB, BN = kBN, BM = kBM, LD = S::kLd, KS = D / 16, NO = D / 8, NS = BN / 8, WR = 16 * MB;
  extern __shared__ __align__(128) unsigned char smem[];
  // Shared-window byte addresses: stage st's K tile, its V tile, Q's place.
  const unsigned sbase = smem_addr(smem);
  auto k_tile = [&](int st) { return sbase + unsigned(2 * st * S::kTile * 2); };
  auto v_tile = [&](int st) { return sbase + unsigned((2 * st + 1) * S::kTile * 2); };
  const unsigned sq = sbase + unsigned(S::kQ * 2);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, c = lane % 4;
  const int lm = lane / 8, lr = lane % 8;  // ldmatrix: lane gives row lr of matrix lm
  const float ninf = -INFINITY;

  // Heavy (late) causal query tiles start first: the short ones fill the tail.
  const int qt = p.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int64_t q0 = int64_t(qt) * BM, qw = q0 + warp * WR;
  const int hq = int(blockIdx.y), bi = int(blockIdx.z), hk = hq / p.group;
  const T* qg = p.q + bi * p.q_sb + hq * p.q_sh;
  const T* kg = p.k + bi * p.k_sb + hk * p.k_sh;
  const T* vg = p.v + bi * p.v_sb + hk * p.v_sh;
  // Keys the block needs: all, or (causal) up to what its last valid row sees (<= t_kv); the
  // warp's own tiles likewise from its last valid row (none when it has no valid row).
  const int n_tiles = flash_tiles_seen(p, q0, BM, BN), w_tiles = flash_tiles_seen(p, qw, WR, BN);

  const TileCopy<D, LD, BN, T> copy_k(kg, p.k_st), copy_v(vg, p.v_st);
  TileCopy<D, LD, BM, T>(qg, p.q_st)(sq, q0, p.t_q);
  copy_k(k_tile(0), 0, p.t_kv);
  copy_v(v_tile(0), 0, p.t_kv);
  cp_async_commit();
  // The lane's ldmatrix rows (bytes from a tile's start). Q (A fragments): matrices (rows 0-7, cols
  // lo), (8-15, lo), (0-7, hi), (8-15, hi). K (B of S = Q K^T): per 16 keys, (keys 0-7, dims lo),
  // (0-7, hi), (8-15, lo), (8-15, hi). V (B of P V, transposed): (keys 0-7, dims d0..), (8-15, d0..),
  // (0-7, d0 + 8..), (8-15, d0 + 8..).
  const unsigned q_lane = sq + unsigned(((warp * WR + (lm & 1) * 8 + lr) * LD + (lm >> 1) * 8) * 2);
  const unsigned k_lane = unsigned((((lm >> 1) * 8 + lr) * LD + (lm & 1) * 8) * 2);
  const unsigned v_lane = unsigned((((lm & 1) * 8 + lr) * LD + (lm >> 1) * 8) * 2);
  auto q_frag = [&](uint32_t(&f)[4], int mb, int ks) { ldsm_x4(f, q_lane + unsigned((mb * 16 * LD + ks * 16) * 2)); };

  float o[MB][NO][4];
#pragma unroll
  for (int mb = 0; mb < MB; ++mb)
#pragma unroll
    for (int n = 0; n < NO; ++n) o[mb][n][0] = o[mb][n][1] = o[mb][n][2] = o[mb][n][3] = 0.f;
  // Rows g and g + 8 of each row block: running max (log2 units) and this lane's share of the sum.
  float m[MB][2], l[MB][2];
#pragma unroll
  for (int mb = 0; mb < MB; ++mb) m[mb][0] = m[mb][1] = ninf, l[mb][0] = l[mb][1] = 0.f;

  for (int t = 0; t < n_tiles; ++t) {
    const int st = t & 1;
    // One barrier a tile: tile t (and Q) has landed for every thread, and every warp is done with
    // tile t - 1, whose stage then takes tile t + 1 while tile t is computed.
    cp_async_wait<0>();
    __syncthreads();
    if (t + 1 < n_tiles) {
      copy_k(k_tile(st ^ 1), int64_t(t + 1) * BN, p.t_kv);
      copy_v(v_tile(st ^ 1), int64_t(t + 1) * BN, p.t_kv);
      cp_async_commit();
    }
    if (t < w_tiles) {
      const unsigned kt = k_tile(st) + k_lane, vt = v_tile(st) + v_lane;
      // S = Q K^T.
      float s[MB][NS][4];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb)
#pragma unroll
        for (int n = 0; n < NS; ++n) s[mb][n][0] = s[mb][n][1] = s[mb][n][2] = s[mb][n][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t qf[MB][4];  // from shared memory each tile: held in registers they would spill
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) q_frag(qf[mb], mb, ks);
#pragma unroll
        for (int n = 0; n < NS; n += 2) {
          uint32_t b[4];
          ldsm_x4(b, kt + unsigned((n * 8 * LD + ks * 16) * 2));
#pragma unroll
          for (int mb = 0; mb < MB; ++mb) {
            mma16816<T>(s[mb][n], qf[mb], b[0], b[1]);
            mma16816<T>(s[mb][n + 1], qf[mb], b[2], b[3]);
          }
        }
      }
      // Scale to log2 units; on the tiles that need it (past t_kv, or past a causal row's last key),
      // mask each row's keys from its visible count on; then the rows' new maxima.
#pragma unroll
      for (int mb = 0; mb < MB; ++mb)
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mb][n][e] *= p.scale_log2;
      const int64_t kv0 = int64_t(t) * BN;
      if (kv0 + BN > p.t_kv || (p.causal && kv0 + BN - 1 > qw + p.shift)) {
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            int64_t lim = p.t_kv - kv0;
            const int64_t row_lim = qw + mb * 16 + g + 8 * h + p.shift + 1 - kv0;
            if (p.causal && row_lim < lim) lim = row_lim;
            const int vis = lim < 0 ? 0 : lim > BN ? BN : int(lim);
#pragma unroll
            for (int n = 0; n < NS; ++n)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (n * 8 + 2 * c + e >= vis) s[mb][n][2 * h + e] = ninf;
          }
      }
      float mu[MB][2], corr[MB][2];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        float mx[2] = {m[mb][0], m[mb][1]};
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) mx[e / 2] = fmaxf(mx[e / 2], s[mb][n][e]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 1));
          mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 2));
          // A row that has seen no key yet keeps m = -inf: subtract 0 there (p = 0, no -inf - -inf).
          mu[mb][h] = mx[h] == ninf ? 0.f : mx[h];
          corr[mb][h] = exp2_approx(m[mb][h] - mu[mb][h]);
          m[mb][h] = mx[h];
          l[mb][h] *= corr[mb][h];
        }
      }
      // O's rows rescaled where a maximum moved (past the first tiles, rarely: the warp skips it).
      bool moved = false;
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) moved |= corr[mb][0] != 1.f || corr[mb][1] != 1.f;
      if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
          for (int n = 0; n < NO; ++n) {
            o[mb][n][0] *= corr[mb][0];
            o[mb][n][1] *= corr[mb][0];
            o[mb][n][2] *= corr[mb][1];
            o[mb][n][3] *= corr[mb][1];
          }
      }
      // P rounded to T, as A fragments: 16-key step kk is score tiles 2kk (a0, a1) and 2kk + 1 (a2, a3).
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t pa[MB][4];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const float* sv = s[mb][2 * kk + u];
            const float p0 = exp2_approx(sv[0] - mu[mb][0]), p1 = exp2_approx(sv[1] - mu[mb][0]);
            const float p2 = exp2_approx(sv[2] - mu[mb][1]), p3 = exp2_approx(sv[3] - mu[mb][1]);
            l[mb][0] += p0 + p1;
            l[mb][1] += p2 + p3;
            pa[mb][2 * u] = pack2<T>(p0, p1);
            pa[mb][2 * u + 1] = pack2<T>(p2, p3);
          }
        // O += P V.
#pragma unroll
        for (int n = 0; n < NO; n += 2) {
          uint32_t b[4];
          ldsm_x4_trans(b, vt + unsigned((kk * 16 * LD + n * 8) * 2));
#pragma unroll
          for (int mb = 0; mb < MB; ++mb) {
            mma16816<T>(o[mb][n], pa[mb], b[0], b[1]);
            mma16816<T>(o[mb][n + 1], pa[mb], b[2], b[3]);
          }
        }
      }
    }
  }

  // O / l rounded to T, staged in the warp's rows of Q's place, then written in 16-byte rows.
  T* so = reinterpret_cast<T*>(smem) + S::kQ + warp * WR * LD;
#pragma unroll
  for (int mb = 0; mb < MB; ++mb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float lt = l[mb][h];
      lt += shfl_xor(lt, 1);
      lt += shfl_xor(lt, 2);
      const float inv = 1.f / lt;
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *reinterpret_cast<uint32_t*>(so + (mb * 16 + g + 8 * h) * LD + n * 8 + 2 * c) =
            pack2<T>(o[mb][n][2 * h] * inv, o[mb][n][2 * h + 1] * inv);
    }
  __syncwarp();
  T* og = p.o + ((int64_t(bi) * p.h_q + hq) * p.t_q + qw) * D;
  constexpr int kVecs = D / 8;
#pragma unroll
  for (int i = lane; i < WR * kVecs; i += 32) {
    const int r = i / kVecs, cc = (i % kVecs) * 8;
    if (qw + r < p.t_q) *reinterpret_cast<uint4*>(og + r * D + cc) = *reinterpret_cast<const uint4*>(so + r * LD + cc);
  }
#else
  (void)p;  // host pass, or a target below sm_80 (the host never launches it there)
#endif
}

template <class T, int D> const void* kernel_ptr() { return reinterpret_cast<const void*>(&flash_fwd_kernel<T, D>); }

const void* kernel_for(DType dt, size_t d) {
  if (dt == DType::F16) return d == 64 ? kernel_ptr<f16, 64>() : kernel_ptr<f16, 128>();
  return d == 64 ? kernel_ptr<bf16, 64>() : kernel_ptr<bf16, 128>();
}

bool operand_ok(const FlashOperand& o) {
  return aligned16(o.p) && o.sb >= 0 && o.sh >= 0 && o.st >= 0 && o.sb % 8 == 0 && o.sh % 8 == 0 && o.st % 8 == 0;
}

template <class T, int D>
void launch(DeviceContext& ctx, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v, void* out,
            const AttentionDims& a) {
  const FlashParams<T> p = flash_params<T>(q, k, v, out, a);
  constexpr size_t bytes = Smem<D>::kBytes;
  allow_dynamic_smem(kernel_ptr<T, D>(), bytes, "attention (flash)");
  const dim3 grid(unsigned((a.t_q + kBM - 1) / kBM), unsigned(a.h_q), unsigned(a.b));
  launch_kernel(flash_fwd_kernel<T, D>, grid, kThreads, bytes, ctx.stream, p);
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
  const void* kernel = kernel_for(dt, a.d);
  // The binary the runtime picked must hold the sm_80+ body (a build for older targets only
  // would JIT the empty one).
  return size_t(ctx.prop.sharedMemPerBlockOptin) >= bytes + static_smem(kernel) && has_sm80_body(kernel);
}

void flash_attention(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                     void* out, const AttentionDims& a) {
#if defined(WICK_HAVE_WGMMA)
  if (flash_wgmma_supported(ctx, a)) return flash_wgmma(ctx, dt, q, k, v, out, a);
#endif
  if (dt == DType::F16) {
    if (a.d == 64) launch<f16, 64>(ctx, q, k, v, out, a);
    else launch<f16, 128>(ctx, q, k, v, out, a);
  } else {
    if (a.d == 64) launch<bf16, 64>(ctx, q, k, v, out, a);
    else launch<bf16, 128>(ctx, q, k, v, out, a);
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

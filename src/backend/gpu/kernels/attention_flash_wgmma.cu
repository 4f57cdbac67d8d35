// Fused attention forward on Hopper's warpgroup MMA (wgmma, sm_90a), f16/bf16, head dim 128: the
// same algorithm as attention_flash.cu's mma.sync kernel (FlashAttention-2's online softmax in
// registers), with S = Q K^T and O += P V issued per warpgroup of 128 threads as m64n64k16 and
// m64n128k16 wgmma, which read Q, K and V straight from shared memory. A block of G warpgroups
// owns 64 query rows per group; K and V tiles of 64 keys are double-buffered with cp.async into
// 128-byte-swizzled tiles (wgmma.cuh), Q once. Per tile each group: S from Q and K (8 k-steps over
// d), the scores masked and exponentiated in registers (f32, exp2), P rounded to the input dtype as
// register A fragments (the C layout of two 8-key tiles is the A layout of one 16-key step), O += P V
// with V read N-major (its rows as they are in memory). Pipelined (kPipe): four stages, and a group
// issues S of the next tile before P V of this one and waits only for S, so the tensor cores run
// P V while the group's threads run the next softmax (FlashAttention-3's intra-warpgroup overlap;
// the default, tuning.hpp has the numbers).
// This file is compiled for sm_90a alone (cmake/gpu.cmake): attention_flash.cu takes it only on
// compute capability 9.0 devices, for a positive scale (the softmax folds it into each exponent's FMA).
#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/kernels/attention_flash.hpp"
#include "backend/gpu/kernels/mma.cuh"
#include "backend/gpu/kernels/wgmma.cuh"
#include "backend/options.hpp"

namespace wick::gpu {
namespace {

constexpr int kD = 128;                     // head dim (two 64-element halves of 128-byte rows)
constexpr int kBN = tune::kFlashWgmmaKeys;  // keys per tile
static_assert(kBN == 64, "S is one m64n64 accumulator per group");

// Shared memory (bytes from a 1024-aligned base): kStages K then V tiles, then Q. A tile of R rows is
// two halves (dims 0-63, 64-127) of R rows x 128 bytes.
template <int G, bool kPipe> struct WgSmem {
  static constexpr int kThreads = G * 128, kBM = G * 64, kStages = kPipe ? 4 : 2;
  static constexpr unsigned kHalfKV = kBN * 128, kTileKV = 2 * kHalfKV;
  static constexpr unsigned kHalfQ = kBM * 128, kQ = kStages * 2 * kTileKV;
  static constexpr size_t kSmemBytes = size_t(kQ) + 2 * kHalfQ + 1024;  // + alignment slack
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A thread's share (of N threads) of copying tiles of R rows (row stride `stride`) into a swizzled
// tile at a shared address: 16 chunks of 16 bytes a row, chunk j of half h at
// h * R * 128 + r * 128 + ((j ^ (r % 8)) * 16); the thread's rows r0 + i * kStep, its chunk ch. Its row
// pointers are formed once, so a tile costs one offset and each chunk an add (and a bound check on a
// last partial tile): 64-bit row arithmetic per chunk was about a quarter of the loop's instructions.
template <int R, int N, class T> struct SwizzledTileCopy {
  static constexpr int kStep = N / 16;
  static_assert(kStep % 8 == 0, "a thread's rows keep one swizzle phase (r % 8)");
  const T* base;
  int64_t step, tile;
  unsigned dst;
  int r0;
  __device__ __forceinline__ SwizzledTileCopy(const T* g, int64_t stride) {
    r0 = int(threadIdx.x) / 16;
    const int ch = int(threadIdx.x) % 16, h = ch / 8, j = ch % 8;
    base = g + r0 * stride + ch * 8;
    step = kStep * stride;
    tile = R * stride;
    dst = unsigned(h * R * 128 + r0 * 128 + ((j ^ (r0 & 7)) << 4));
  }
  // Tile t into the swizzled tile at shared address s; rows past rows_total are zeros (read from g).
  // A whole tile (every tile but a last partial one) takes no bound checks.
  __device__ __forceinline__ void operator()(unsigned s, int t, int64_t rows_total, const T* g) const {
    const T* src = base + t * tile;
    const int64_t left = rows_total - int64_t(t) * R;  // rows from the tile's first: the same for the block
    constexpr int kChunks = (R + kStep - 1) / kStep;
    if (left >= R) {
#pragma unroll
      for (int i = 0; i < kChunks; ++i)
        if (R % kStep == 0 || r0 + i * kStep < R) cp_async16_to(s + dst + unsigned(i * kStep * 128), src + i * step, 16);
    } else {
      const int rem = int(left) - r0;  // this thread's rows below rows_total: i * kStep < rem
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        if (R % kStep == 0 || r0 + i * kStep < R) {
          const bool ok = i * kStep < rem;
          cp_async16_to(s + dst + unsigned(i * kStep * 128), ok ? src + i * step : g, ok ? 16 : 0);
        }
      }
    }
  }
};

// A group's online softmax over one tile of scores (its rows g and g + 8 of each warp's 16): mask what
// a row may not see, update the running maxima m and sums l, and round the probabilities to T as the
// A fragments of P V. corr: the factors O's rows must take. The scale (> 0,
// flash_wgmma_supported) goes into the row maxima and each exponent's FMA, not onto every score.
template <class T> struct Softmax {
  static constexpr float kLazyMax = 8.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  template <bool kMask = true>
  __device__ __forceinline__ void tile(float (&s)[32], uint32_t (&pa)[kBN / 16][4], float (&corr)[2],
                                       const FlashParams<T>& p, int64_t kv0, int64_t qg0, int64_t row_w, int c) {
    const float ninf = -INFINITY, sc = p.scale_log2;
    if (kMask && (kv0 + kBN > p.t_kv || (p.causal && kv0 + kBN - 1 > qg0 + p.shift))) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int64_t lim = p.t_kv - kv0;
        const int64_t row_lim = row_w + 8 * h + p.shift + 1 - kv0;
        if (p.causal && row_lim < lim) lim = row_lim;
        const int vis = lim < 0 ? 0 : lim > kBN ? kBN : int(lim);
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (n * 8 + 2 * c + e >= vis) s[4 * n + 2 * h + e] = ninf;
      }
    }
    float mu[2], mx[2] = {ninf, ninf};
#pragma unroll
    for (int i = 0; i < 32; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 1));
      mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 2));
      // The running maximum moves only when a score passes it by more than kLazyMax (log2 units):
      // probabilities then reach 2^kLazyMax at most (the same relative precision in T, and O and l
      // share the maximum, so O / l is unchanged), and most tiles leave O as it is (rescale skips).
      const float top = mx[h] * sc;
      const bool up = top > m[h] + kLazyMax;  // false while the row has seen no key
      corr[h] = up ? exp2_approx(m[h] - top) : 1.f;
      if (up) m[h] = top;
      mu[h] = m[h] == ninf ? 0.f : m[h];  // a row with no key yet: p = 0, no -inf - -inf
      l[h] *= corr[h];
    }
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float* sv = s + 4 * (2 * kk + u);
        const float p0 = exp2_approx(fmaf(sv[0], sc, -mu[0])), p1 = exp2_approx(fmaf(sv[1], sc, -mu[0]));
        const float p2 = exp2_approx(fmaf(sv[2], sc, -mu[1])), p3 = exp2_approx(fmaf(sv[3], sc, -mu[1]));
        l[0] += p0 + p1;
        l[1] += p2 + p3;
        pa[kk][2 * u] = pack2<T>(p0, p1);
        pa[kk][2 * u + 1] = pack2<T>(p2, p3);
      }
  }
};

__device__ __forceinline__ void rescale(float (&o)[64], const float (&corr)[2]) {
  if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      o[4 * n] *= corr[0];
      o[4 * n + 1] *= corr[0];
      o[4 * n + 2] *= corr[1];
      o[4 * n + 3] *= corr[1];
    }
  }
}
#endif

template <class T, int G, bool kPipe>
__global__ void __launch_bounds__(G * 128, 1) flash_wgmma_kernel(FlashParams<T> p) {
  kernel_entry();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = WgSmem<G, kPipe>;
  constexpr int kThreads = L::kThreads, kBM = L::kBM;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
  auto stage = [](int t) { return unsigned(t % L::kStages) * 2 * L::kTileKV; };  // bytes from tile 0's K
  auto k_tile = [&](int t) { return sbase + stage(t); };
  auto v_tile = [&](int t) { return sbase + stage(t) + L::kTileKV; };
  const unsigned sq = sbase + L::kQ;
  // The group from lane 0, so that the compiler knows it uniform over the warp: the descriptors made
  // from it then stay in uniform registers.
  const int grp = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0), warp = (int(threadIdx.x) / 32) % 4;
  const int lane = int(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;

  // Blocks of one row tile of every head are neighbours in the grid, and a causal grid starts from the
  // last row tile (the most keys): the longest blocks go first over all heads, so the last wave holds
  // the shortest (one head after another, each from its longest, left a tail ~10% of the kernel).
  const int q_tiles = int(gridDim.x / p.h_q), rank = int(blockIdx.x / p.h_q);
  const int qt = p.causal ? q_tiles - 1 - rank : rank;
  const int64_t q0 = int64_t(qt) * kBM, qg0 = q0 + grp * 64;  // the block's and the group's first row
  const int hq = int(blockIdx.x % p.h_q), bi = int(blockIdx.z), hk = hq / p.group;
  const T* qg = p.q + bi * p.q_sb + hq * p.q_sh;
  const T* kg = p.k + bi * p.k_sb + hk * p.k_sh;
  const T* vg = p.v + bi * p.v_sb + hk * p.v_sh;
  // The block's tiles, and the group's own (uniform over its 128 threads, as wgmma needs).
  const int n_tiles = flash_tiles_seen(p, q0, kBM, kBN), g_tiles = flash_tiles_seen(p, qg0, 64, kBN);
  const SwizzledTileCopy<kBN, kThreads, T> k_copy(kg, p.k_st), v_copy(vg, p.v_st);
  auto load_kv = [&](int t) {
    k_copy(k_tile(t), t, p.t_kv, kg);
    v_copy(v_tile(t), t, p.t_kv, vg);
    cp_async_commit();
  };

  // Descriptors: Q and K K-major (8-row atoms 1024 bytes apart; k-step ks at + 32 bytes within a
  // half), V N-major (8-key groups 1024 bytes apart, the dims' second half kHalfKV further).
  // Each formed once; an offset in shared memory is then + offset / 16 on the descriptor's low word
  // (its address field holds the address / 16, and no tile reaches past its 14 bits), in 32 bits.
  const uint64_t qd = wgmma::smem_desc(sq + unsigned(grp) * 64 * 128, 16, 1024);
  const uint64_t kd = wgmma::smem_desc(k_tile(0), 16, 1024), vd = wgmma::smem_desc(v_tile(0), L::kHalfKV, 1024);
  const uint32_t hi = uint32_t(qd >> 32);  // the same for the three (stride 1024, 128-byte swizzle)
  auto q_desc = [&](int ks) {
    return wgmma::desc_words(uint32_t(qd) + (unsigned(ks / 4) * L::kHalfQ + unsigned(ks % 4) * 32) / 16, hi);
  };
  auto k_desc = [&](int t, int ks) {
    return wgmma::desc_words(uint32_t(kd) + (stage(t) + unsigned(ks / 4) * L::kHalfKV + unsigned(ks % 4) * 32) / 16, hi);
  };
  auto v_desc = [&](int t, int kk) {
    return wgmma::desc_words(uint32_t(vd) + (stage(t) + unsigned(kk) * 16 * 128) / 16, hi);
  };
  auto issue_s = [&](float(&s)[32], int t) {
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma::mma_m64n64_ss<T>(s, q_desc(ks), k_desc(t, ks), ks > 0);
    wgmma::commit();
  };
  auto issue_pv = [&](float(&o)[64], const uint32_t(&pa)[kBN / 16][4], int t) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) wgmma::mma_m64n128_rs<T>(o, pa[kk], v_desc(t, kk), 1);
    wgmma::commit();
  };

  float o[64], s[32], corr[2];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  uint32_t pa[kBN / 16][4];
  Softmax<T> sm;
  const int64_t row_w = qg0 + warp * 16 + g;  // the lane's first row

  SwizzledTileCopy<kBM, kThreads, T>(qg, p.q_st)(sq, qt, p.t_q, qg);
  load_kv(0);
  if constexpr (!kPipe) {
    for (int t = 0; t < n_tiles; ++t) {
      cp_async_wait<0>();
      wgmma::fence_proxy_async();
      __syncthreads();
      if (t + 1 < n_tiles) load_kv(t + 1);
      if (t >= g_tiles) continue;
      wgmma::fence();
      issue_s(s, t);
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(s[i]);
      sm.tile(s, pa, corr, p, int64_t(t) * kBN, qg0, row_w, c);
      rescale(o, corr);
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
      wgmma::fence();
      issue_pv(o, pa, t);
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
    }
  } else {
    // Tile t sits in stage t % 4. Iteration t: the softmax of S_t (P V of t - 1 still running), make
    // tile t + 1 visible and load t + 2, wait for P V of t - 1, rescale O, issue S_{t+1} and P V_t, and
    // wait for S only.
    // Tiles 0 .. u - 1 every group sees whole (inside t_kv and below the diagonal of the block's
    // first row): their loop has no masking code, which lets ptxas keep S_{t+1} and P V_t in flight
    // together (with it in the loop, ptxas serialized every wgmma of the kernel: C7515). The rest (the
    // diagonal, a partial last tile) follow, each drained before its masked softmax. u is the same for
    // the block's groups (they meet at its barriers); a group with no rows (past t_q) runs the u tiles
    // too (on Q's zero rows; nothing of it is stored): gt is the tiles it runs.
    int u = int(std::min<int64_t>(p.t_kv / kBN, n_tiles));
    if (p.causal) {
      const int64_t lim = q0 + p.shift + 1;
      u = lim <= 0 ? 0 : int(std::min<int64_t>(u, lim / kBN));
    }
    const int gt = std::max(g_tiles, u);
    if (n_tiles > 1) load_kv(1);
    if (n_tiles > 1) cp_async_wait<1>();
    else cp_async_wait<0>();
    wgmma::fence_proxy_async();
    __syncthreads();
    if (gt > 0) {
      wgmma::fence();
      issue_s(s, 0);
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(s[i]);
    }
    // P V of tile t - 1 reads its P fragments from registers while the softmax of tile t writes the
    // next ones: two sets, alternating (the loop unrolled by two), so no in-flight operand is written.
    // The wait for P V of t - 1 comes after the block barrier: ptxas hoists a wgmma wait above
    // register arithmetic (the softmax then ran after it, alone), not above a barrier. So the barrier
    // no longer says every group is done with tile t - 1, only with t - 2: four stages, and tile t + 2
    // goes to stage (t + 2) % 4 = (t - 2) % 4.
    // Tile t + 1 made visible (every thread's copies waited for, then the barrier) and t + 2 loaded.
    auto next_tiles = [&](int t) {
      if (t + 1 < n_tiles) {
        cp_async_wait<0>();
        wgmma::fence_proxy_async();
        __syncthreads();
        if (t + 2 < n_tiles) load_kv(t + 2);
      }
    };
    // O rescaled: S_{t+1} (below `last`) and P V_t issued, and the wait for S only.
    auto issue = [&](int t, int last, const uint32_t(&pf)[kBN / 16][4]) {
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
      wgmma::fence();
      if (t + 1 < last) issue_s(s, t + 1);
      issue_pv(o, pf, t);
      wgmma::wait<1>();
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(s[i]);
    };
    auto whole = [&](int t, uint32_t(&pf)[kBN / 16][4]) {
      sm.template tile<false>(s, pf, corr, p, int64_t(t) * kBN, qg0, row_w, c);
      next_tiles(t);
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
      rescale(o, corr);
      issue(t, gt, pf);
    };
    uint32_t pb[kBN / 16][4];
    int t = 0;
    for (; t + 1 < u; t += 2) {
      whole(t, pa);
      whole(t + 1, pb);
    }
    if (t < u) whole(t++, pa);
    for (; t < n_tiles; ++t) {
      const bool mine = t < g_tiles;
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(s[i]);
      if (mine) {
        sm.tile(s, pa, corr, p, int64_t(t) * kBN, qg0, row_w, c);
        rescale(o, corr);
      }
      next_tiles(t);
      if (mine) issue(t, g_tiles, pa);
    }
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
  }

  // O / l rounded to T, straight from the accumulators: each quad writes 16 contiguous bytes a row.
  T* og = p.o + (int64_t(bi) * p.h_q + hq) * p.t_q * kD;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float lt = sm.l[h];
    lt += shfl_xor(lt, 1);
    lt += shfl_xor(lt, 2);
    const float inv = 1.f / lt;
    const int64_t row = row_w + 8 * h;
    if (row < p.t_q) {
#pragma unroll
      for (int n = 0; n < 16; ++n)
        *reinterpret_cast<uint32_t*>(og + row * kD + n * 8 + 2 * c) =
            pack2<T>(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    }
  }
#else
  (void)p;  // the host pass
#endif
}

template <class T, int G, bool kPipe>
void launch(DeviceContext& ctx, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v, void* out,
            const AttentionDims& a) {
  using L = WgSmem<G, kPipe>;
  const FlashParams<T> p = flash_params<T>(q, k, v, out, a);
  allow_dynamic_smem(reinterpret_cast<const void*>(&flash_wgmma_kernel<T, G, kPipe>), L::kSmemBytes,
                     "attention (flash wgmma)");
  const dim3 grid(unsigned((a.t_q + L::kBM - 1) / L::kBM * a.h_q), 1, unsigned(a.b));
  launch_kernel(flash_wgmma_kernel<T, G, kPipe>, grid, L::kThreads, L::kSmemBytes, ctx.stream, p);
  check_launch("attention(flash wgmma)");
}

// The variant: tune::kFlashWgmma{Groups,Pipe}, or the one Options::flash_wgmma (WICK_FLASH_WGMMA)
// names, to compare them; off: the mma.sync kernel takes every call.
struct Variant {
  bool on = true;
  int groups = tune::kFlashWgmmaGroups;
  bool pipe = tune::kFlashWgmmaPipe;
};
Variant variant() {
  Variant r;
  switch (backend::options().flash_wgmma) {
    case backend::FlashWgmma::Auto:
      break;
    case backend::FlashWgmma::Off:
      r.on = false;
      break;
    case backend::FlashWgmma::G2Pipe:
      r.groups = 2, r.pipe = true;
      break;
    case backend::FlashWgmma::G2Serial:
      r.groups = 2, r.pipe = false;
      break;
    case backend::FlashWgmma::G3Pipe:
      r.groups = 3, r.pipe = true;
      break;
    case backend::FlashWgmma::G3Serial:
      r.groups = 3, r.pipe = false;
      break;
  }
  return r;
}

template <class T>
void launch_variant(DeviceContext& ctx, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v, void* out,
                    const AttentionDims& a) {
  const Variant w = variant();
  if (w.groups == 2) {
    if (w.pipe) launch<T, 2, true>(ctx, q, k, v, out, a);
    else launch<T, 2, false>(ctx, q, k, v, out, a);
  } else {
    if (w.pipe) launch<T, 3, true>(ctx, q, k, v, out, a);
    else launch<T, 3, false>(ctx, q, k, v, out, a);
  }
}

// A block's shared memory, static and dynamic, for T and G groups.
template <class T, int G, bool kPipe>
size_t block_smem() {
  return WgSmem<G, kPipe>::kSmemBytes + static_smem(reinterpret_cast<const void*>(&flash_wgmma_kernel<T, G, kPipe>));
}
template <class T>
size_t block_smem(const Variant& w) {
  if (w.groups == 2) return w.pipe ? block_smem<T, 2, true>() : block_smem<T, 2, false>();
  return w.pipe ? block_smem<T, 3, true>() : block_smem<T, 3, false>();
}

}  // namespace

bool flash_wgmma_supported(DeviceContext& ctx, const AttentionDims& a) {
  const Variant w = variant();
  if (!w.on || a.scale <= 0 || ctx.prop.major != 9 || ctx.prop.minor != 0 || a.d != size_t(kD) || a.d_v != size_t(kD) ||
      (a.t_q + 63) / 64 * a.h_q > size_t(INT_MAX))
    return false;
  const size_t smem = std::max(block_smem<f16>(w), block_smem<bf16>(w));
  return size_t(ctx.prop.sharedMemPerBlockOptin) >= smem;
}

void flash_wgmma(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                 void* out, const AttentionDims& a) {
  if (dt == DType::F16) launch_variant<f16>(ctx, q, k, v, out, a);
  else launch_variant<bf16>(ctx, q, k, v, out, a);
}

}  // namespace wick::gpu

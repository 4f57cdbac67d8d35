// cumsum along any dim, the stable last-dim arg_sort and top_k on the GPU, for any layout.
//
// cumsum: a "line" is the run of elements along the scanned dim at one (outer, inner) index.
// Many lines: one thread per line, folding sequentially like the CPU (neighbouring threads
// take neighbouring inner indices, so a non-last-dim scan reads coalesced). Long lines that
// are few or innermost: one block per line, chunks of kScanChunk scanned in shared memory
// (each thread a run of kScanItems, then a scan of the thread totals), a carry between chunks.
//
// arg_sort: each element becomes an unsigned key whose order is the sort order (the CPU's
// keys: NaN largest, -0.0 equal to 0.0, inverted for descending), and (key, index) pairs are
// sorted; the index tie-break makes every pair distinct, so any sorting network is stable.
// Rows up to a tile (4096, or 2048 for 8-byte keys): a bitonic sort in shared memory, several
// short rows per block. Longer rows: tiles sorted that way, then merge passes that double the
// sorted runs (merge path: a block merges a chunk of the output in shared memory).
// No warp shuffles anywhere: any warp width works.
#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/reduce.hpp"

namespace wick::gpu {
namespace {

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- cumsum

constexpr int kScanItems = 8;
constexpr int kScanChunk = kBlock * kScanItems;

// Line c: input at ld.offset(0, c) + k * sd; output (contiguous) at (c / n_inner) * n * n_inner
// + c % n_inner + k * n_inner.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    cumsum_lines_kernel(const T* WICK_RESTRICT in, T* WICK_RESTRICT out, int64_t n_lines, int64_t n, int64_t n_inner,
                        int64_t sd, StridedDesc<1> ld) {
  kernel_entry();
  using Acc = typename SumAcc<T>::Acc;
  const SumAcc<T> op;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < n_lines; c += step) {
    const T* p = in + ld.offset(0, c);
    const int64_t o = c / n_inner;
    T* q = out + o * n * n_inner + (c - o * n_inner);
    Acc a = op.init();
    for (int64_t k = 0; k < n; ++k) {
      op.add(a, p[k * sd]);
      q[k * n_inner] = op.finish(a);
    }
  }
}

// One block (kBlock threads) per line.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    cumsum_block_kernel(const T* WICK_RESTRICT in, T* WICK_RESTRICT out, int64_t n_lines, int64_t n, int64_t n_inner,
                        int64_t sd, StridedDesc<1> ld) {
  kernel_entry();
  using Acc = typename SumAcc<T>::Acc;
  const SumAcc<T> op;
  __shared__ Acc buf[kScanChunk];
  __shared__ Acc tot[2][kBlock];
  const int t = int(threadIdx.x);
  for (int64_t c = blockIdx.x; c < n_lines; c += gridDim.x) {
    const T* p = in + ld.offset(0, c);
    const int64_t o = c / n_inner;
    T* q = out + o * n * n_inner + (c - o * n_inner);
    Acc carry = op.init();
    for (int64_t c0 = 0; c0 < n; c0 += kScanChunk) {
      const int len = int(n - c0 < kScanChunk ? n - c0 : kScanChunk);
      for (int k = t; k < len; k += kBlock) {
        Acc a = op.init();
        op.add(a, p[(c0 + k) * sd]);
        buf[k] = a;
      }
      __syncthreads();
      // Each thread scans its own run of kScanItems.
      const int b = t * kScanItems;
      Acc run = op.init();
      for (int k = 0; k < kScanItems && b + k < len; ++k) {
        op.merge(run, buf[b + k]);
        buf[b + k] = run;
      }
      tot[0][t] = run;
      __syncthreads();
      // Inclusive scan of the thread totals (Hillis-Steele, earlier partials on the left).
      int cur = 0;
      for (int off = 1; off < kBlock; off <<= 1) {
        Acc v = tot[cur][t];
        if (t >= off) {
          Acc u = tot[cur][t - off];
          op.merge(u, v);
          v = u;
        }
        tot[cur ^ 1][t] = v;
        cur ^= 1;
        __syncthreads();
      }
      Acc before = carry;
      if (t > 0) op.merge(before, tot[cur][t - 1]);
      for (int k = 0; k < kScanItems && b + k < len; ++k) {
        Acc v = before;
        op.merge(v, buf[b + k]);
        buf[b + k] = v;
      }
      __syncthreads();
      for (int k = t; k < len; k += kBlock) q[(c0 + k) * n_inner] = op.finish(buf[k]);
      op.merge(carry, tot[cur][kBlock - 1]);
      __syncthreads();  // buf and tot are rewritten by the next chunk
    }
  }
}

// ---- arg_sort

template <class T> using sort_key_t =
    std::conditional_t<sizeof(compute_t<T>) == 1, uint8_t,
                       std::conditional_t<sizeof(compute_t<T>) == 2, uint16_t,
                                          std::conditional_t<sizeof(compute_t<T>) == 4, uint32_t, uint64_t>>>;

// The CPU's order-preserving key: NaN above +inf (all NaNs equal), -0.0 equal to 0.0, signed
// integers with the sign bit flipped; inverted (~) for a descending sort.
template <class T> __device__ __forceinline__ sort_key_t<T> sort_key(T v, bool ascending) {
  using K = sort_key_t<T>;
  using C = compute_t<T>;
  constexpr K kSign = K(K(1) << (sizeof(K) * 8 - 1));
  K k;
  if constexpr (std::is_floating_point_v<C>) {
    C x = to_compute(v);
    if (x != x) {
      k = K(~K(0));
    } else {
      if (x == C(0)) x = C(0);
      K bits;
      if constexpr (sizeof(C) == 4) bits = K(__float_as_uint(x));
      else bits = K(__double_as_longlong(x));
      k = (bits & kSign) ? K(~bits) : K(bits | kSign);
    }
  } else if constexpr (std::is_signed_v<C>) {
    k = K(K(v) ^ kSign);
  } else {
    k = K(v);
  }
  return ascending ? k : K(~k);
}

template <class K> __device__ __forceinline__ bool pair_less(K ka, uint32_t ia, K kb, uint32_t ib) {
  return ka < kb || (ka == kb && ia < ib);
}

// One compare-exchange of a bitonic network over (key, index) pairs in shared memory: positions i < m
// end in ascending order when up, descending otherwise.
template <class K> __device__ __forceinline__ void bitonic_swap(K* sk, uint32_t* si, int i, int m, bool up) {
  const K ki = sk[i], km = sk[m];
  const uint32_t ii = si[i], im = si[m];
  if (pair_less(km, im, ki, ii) == up) {
    sk[i] = km;
    sk[m] = ki;
    si[i] = im;
    si[m] = ii;
  }
}

// Elements sorted in shared memory by one block: 4096 for keys of up to 4 bytes (32 KiB with the
// indices), 2048 for 8-byte keys (within the 48 KiB of static shared memory). A larger tile is one
// merge pass fewer.
template <class K> constexpr int sort_tile() { return sizeof(K) <= 4 ? 4096 : 2048; }
constexpr int kMinSortTile = sort_tile<uint64_t>();
constexpr uint32_t kPadIndex = 0xffffffffu;  // padding: the largest key and index, sorts last
// Positions of a tile a thread owns (sort_tiles_kernel), and the bitonic steps one barrier covers.
template <class K> constexpr int tile_items() { return sort_tile<K>() / kBlock; }
template <class K> constexpr int group_steps() { return tile_items<K>() == 16 ? 4 : 3; }
static_assert(kMinSortTile % kBlock == 0 && sort_tile<uint32_t>() / kBlock == 16 &&
                  sort_tile<uint64_t>() / kBlock == 8,
              "16 or 8 positions a thread");
// Shared-memory slot of tile position p: one pad slot after every 32, so that a warp's threads
// reading their own runs (position t * tile_items + e) hit 32 different banks.
__device__ __forceinline__ int tile_slot(int p) { return p + (p >> 5); }

// L consecutive steps of level k of the bitonic network over the tile in shared memory (distances
// j, j / 2, ..., j >> (L - 1)), in registers: the positions these steps pair fall into groups of 2^L
// (a base with those L bits clear, plus every sum of the distances), each thread takes
// tile_items / 2^L groups, loads them, runs the L steps and stores them back (the caller's barrier
// follows). One load and store of each position per L steps, not per step; every position of a group
// shares bit k, so one direction serves the group (every tile of P positions ends ascending).
template <class K, int L>
__device__ __forceinline__ void bitonic_group(K* sk, uint32_t* si, int k, int j, int P) {
  constexpr int G = 1 << L, kGroups = tile_items<K>() / G;
  static_assert(kGroups >= 1, "a thread holds whole groups");
  const int jl = j >> (L - 1);  // the shortest distance: group position e sits at base + e * jl
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int q = int(threadIdx.x) * kGroups + g;
    const int base = (q / jl) * (jl * G) + q % jl;
    const bool up = ((base & (P - 1)) & k) == 0;
    K rk[G];
    uint32_t ri[G];
#pragma unroll
    for (int e = 0; e < G; ++e) {
      rk[e] = sk[tile_slot(base + e * jl)];
      ri[e] = si[tile_slot(base + e * jl)];
    }
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1)  // distance j first (e bit L - 1), then halving
#pragma unroll
      for (int e = 0; e < G; ++e) {
        if (e & d) continue;
        if (pair_less(rk[e + d], ri[e + d], rk[e], ri[e]) == up) {
          const K tk = rk[e];
          const uint32_t ti = ri[e];
          rk[e] = rk[e + d];
          ri[e] = ri[e + d];
          rk[e + d] = tk;
          ri[e + d] = ti;
        }
      }
#pragma unroll
    for (int e = 0; e < G; ++e) {
      sk[tile_slot(base + e * jl)] = rk[e];
      si[tile_slot(base + e * jl)] = ri[e];
    }
  }
}

// Sorts tiles of P (a power of two <= sort_tile<K>) elements: tile t of a row covers positions
// [t * P, min(n, (t + 1) * P)); sort_tile / P tiles per block. Writes the sorted indices (and
// keys, when keys_out is set) to row * n + position.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    sort_tiles_kernel(const T* WICK_RESTRICT in, StridedDesc<1> rows, int64_t n_rows, int64_t n, int64_t s, int P,
                      bool ascending, sort_key_t<T>* WICK_RESTRICT keys_out, uint32_t* WICK_RESTRICT idx_out) {
  kernel_entry();
  using K = sort_key_t<T>;
  constexpr int kTile = sort_tile<K>(), kSteps = group_steps<K>();
  __shared__ K sk[kTile + kTile / 32];
  __shared__ uint32_t si[kTile + kTile / 32];
  // Where each of the round's tiles reads and writes, worked out once per tile (two 64-bit
  // divisions) instead of once per element, for up to kBlock tiles a round (P >= kTile / kBlock).
  __shared__ int64_t tab_in[kBlock], tab_out[kBlock];
  __shared__ uint32_t tab_pos[kBlock];
  __shared__ int tab_len[kBlock];
  const int64_t tiles_per_row = ceil_div(n, P), n_tiles = n_rows * tiles_per_row;
  const int64_t per_block = kTile / P;
  const bool table = per_block <= kBlock;
  const int shift = __ffs(P) - 1;  // P is a power of two
  for (int64_t t0 = int64_t(blockIdx.x) * per_block; t0 < n_tiles; t0 += int64_t(gridDim.x) * per_block) {
    if (table) {
      if (threadIdx.x < per_block) {
        const int64_t tile = t0 + threadIdx.x;
        int64_t row = 0, pos0 = 0;
        int len = 0;
        if (tile < n_tiles) {
          row = tile / tiles_per_row;
          pos0 = (tile - row * tiles_per_row) * P;
          len = int(n - pos0 < P ? n - pos0 : P);
        }
        tab_in[threadIdx.x] = len ? rows.offset(0, row) + pos0 * s : 0;
        tab_out[threadIdx.x] = row * n + pos0;
        tab_pos[threadIdx.x] = uint32_t(pos0);
        tab_len[threadIdx.x] = len;
      }
      __syncthreads();
    }
    for (int e = int(threadIdx.x); e < kTile; e += blockDim.x) {
      K key = K(~K(0));
      uint32_t id = kPadIndex;
      if (table) {
        const int lt = e >> shift, c = e & (P - 1);
        if (c < tab_len[lt]) {
          key = sort_key(in[tab_in[lt] + c * s], ascending);
          id = tab_pos[lt] + uint32_t(c);
        }
      } else {
        const int64_t tile = t0 + (e >> shift);
        if (tile < n_tiles) {
          const int64_t row = tile / tiles_per_row, pos = (tile - row * tiles_per_row) * P + (e & (P - 1));
          if (pos < n) {
            key = sort_key(in[rows.offset(0, row) + pos * s], ascending);
            id = uint32_t(pos);
          }
        }
      }
      sk[tile_slot(e)] = key;
      si[tile_slot(e)] = id;
    }
    __syncthreads();
    // Level k's steps (distances k / 2 .. 1) kSteps at a time, one barrier for each group of steps.
    for (int k = 2; k <= P; k <<= 1)
      for (int j = k >> 1; j > 0;) {
        if (j >= (1 << (kSteps - 1))) {
          bitonic_group<K, kSteps>(sk, si, k, j, P);
          j >>= kSteps;
        } else if (j == 4) {
          bitonic_group<K, 3>(sk, si, k, j, P);
          j = 0;
        } else if (j == 2) {
          bitonic_group<K, 2>(sk, si, k, j, P);
          j = 0;
        } else {
          bitonic_group<K, 1>(sk, si, k, j, P);
          j = 0;
        }
        __syncthreads();
      }
    for (int e = int(threadIdx.x); e < kTile; e += blockDim.x) {
      int64_t dst = -1;
      if (table) {
        const int lt = e >> shift, c = e & (P - 1);
        if (c < tab_len[lt]) dst = tab_out[lt] + c;
      } else {
        const int64_t tile = t0 + (e >> shift);
        if (tile < n_tiles) {
          const int64_t row = tile / tiles_per_row, pos = (tile - row * tiles_per_row) * P + (e & (P - 1));
          if (pos < n) dst = row * n + pos;
        }
      }
      if (dst >= 0) {
        if (keys_out) keys_out[dst] = sk[tile_slot(e)];
        idx_out[dst] = si[tile_slot(e)];
      }
    }
    __syncthreads();  // sk/si and the tables are rewritten by the next round
  }
}

// The number of A's pairs among the first d pairs of the merge of sorted runs A (la pairs) and B
// (lb): the point where diagonal d crosses the merge path, found by binary search. Pairs are
// distinct (the index breaks ties), so the merge and its path are the sort's order.
template <class K>
__device__ __forceinline__ int64_t merge_split(int64_t d, int64_t la, int64_t lb, const K* ak, const uint32_t* ai,
                                               const K* bk, const uint32_t* bi) {
  int64_t lo = d > lb ? d - lb : 0, hi = d < la ? d : la;
  while (lo < hi) {
    const int64_t m = (lo + hi) / 2;
    if (pair_less(ak[m], ai[m], bk[d - 1 - m], bi[d - 1 - m])) lo = m + 1;
    else hi = m;
  }
  return lo;
}

constexpr int kMergeItems = 8;                     // merged outputs per thread
constexpr int kMergeChunk = kBlock * kMergeItems;  // merged outputs per block
static_assert((2 * kMinSortTile) % kMergeChunk == 0, "a chunk lies within one merge of two runs");

// Merges neighbouring sorted runs of w elements of every row into runs of 2w. A row's output is cut
// into chunks of kMergeChunk (one block each, grid-stride): the block finds where the chunk's first
// and last outputs cross the merge path (two binary searches in global memory), stages the pairs
// that make up the chunk in shared memory, and each thread merges kMergeItems outputs from its own
// diagonal there into registers; the chunk leaves in coalesced stores. (It replaced a pass in which
// every element binary-searched the other run in global memory: 15 dependent loads an element.)
template <class K>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    merge_pass_kernel(const K* WICK_RESTRICT kin, const uint32_t* WICK_RESTRICT iin, K* WICK_RESTRICT kout,
                      uint32_t* WICK_RESTRICT iout, int64_t n_rows, int64_t n, int64_t w) {
  kernel_entry();
  __shared__ K sk[kMergeChunk];
  __shared__ uint32_t si[kMergeChunk];
  __shared__ int64_t split[2];
  const int64_t chunks = ceil_div(n, kMergeChunk);
  for (int64_t c = blockIdx.x; c < n_rows * chunks; c += gridDim.x) {
    const int64_t row = c / chunks, p0 = (c - row * chunks) * kMergeChunk;
    const int64_t start = p0 / (2 * w) * (2 * w);
    const int64_t mid = start + w < n ? start + w : n, end = start + 2 * w < n ? start + 2 * w : n;
    const int64_t la = mid - start, lb = end - mid;
    const K* rk = kin + row * n;
    const uint32_t* ri = iin + row * n;
    const int64_t d0 = p0 - start, d1 = (p0 + kMergeChunk < end ? p0 + kMergeChunk : end) - start;
    if (threadIdx.x < 2)
      split[threadIdx.x] = merge_split(threadIdx.x == 0 ? d0 : d1, la, lb, rk + start, ri + start, rk + mid, ri + mid);
    __syncthreads();
    const int64_t a0 = split[0], b0 = d0 - a0;
    const int na = int(split[1] - a0), len = int(d1 - d0), nb = len - na;
    for (int e = int(threadIdx.x); e < len; e += blockDim.x) {
      const int64_t src = e < na ? start + a0 + e : mid + b0 + (e - na);
      sk[e] = rk[src];
      si[e] = ri[src];
    }
    __syncthreads();
    const int d = int(threadIdx.x) * kMergeItems;
    K mk[kMergeItems];
    uint32_t mi[kMergeItems];
    if (d < len) {
      int ia = int(merge_split<K>(d, na, nb, sk, si, sk + na, si + na)), ib = d - ia;
#pragma unroll
      for (int j = 0; j < kMergeItems; ++j) {  // guarded, not cut short: trixie's clang 17 cannot unroll a break
        if (d + j < len) {
          const bool take_a = ib >= nb || (ia < na && pair_less(sk[ia], si[ia], sk[na + ib], si[na + ib]));
          const int src = take_a ? ia++ : na + ib++;
          mk[j] = sk[src];
          mi[j] = si[src];
        }
      }
    }
    __syncthreads();  // every thread has read its pairs before they are overwritten
    if (d < len) {
#pragma unroll
      for (int j = 0; j < kMergeItems; ++j) {
        if (d + j < len) {
          sk[d + j] = mk[j];
          si[d + j] = mi[j];
        }
      }
    }
    __syncthreads();
    for (int e = int(threadIdx.x); e < len; e += blockDim.x) {
      if (kout) kout[row * n + p0 + e] = sk[e];
      iout[row * n + p0 + e] = si[e];
    }
    __syncthreads();  // sk/si are rewritten by the next chunk
  }
}

// ---- top_k: the k smallest (key, index) pairs of each row under arg_sort's descending keys, so
// the first k of arg_sort(descending), in that order. One block per row. For k up to the block's
// threads, a bound first (below); where it leaves too many keys, or k is larger, a radix select over the
// key's bytes, most significant first (one pass over the row per byte: a histogram of that byte
// among the keys that match the bytes found so far), finds the k-th key T; the keys below T and
// the first (by index) of those equal to T are gathered into shared memory and sorted bitonically.
// The histogram has one copy per lane (bank = lane): clustered keys (logits share their top bytes)
// would otherwise send a whole warp's atomics to one address.
constexpr int kTopKBlock = 512;
constexpr int kTopKCopies = 32;
constexpr int kTopKMax = 1024;  // larger k: arg_sort, then the first k of each row
constexpr int kTopKLoads = 8;

template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kTopKBlock)
    top_k_kernel(const T* WICK_RESTRICT in, StridedDesc<1> rows, int64_t n_rows, int64_t n, int64_t s, int k,
                 uint32_t* WICK_RESTRICT out) {
  kernel_entry();
  using K = sort_key_t<T>;
  __shared__ uint32_t hist[256 * kTopKCopies];
  __shared__ K ck[kTopKMax];
  __shared__ uint32_t ci[kTopKMax];
  __shared__ uint32_t scan[kTopKBlock];
  __shared__ K s_prefix;
  __shared__ uint32_t s_rem, s_eq, s_slot;
  const int tid = int(threadIdx.x), nt = int(blockDim.x);
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* x = in + rows.offset(0, row);
    // f(key, index) over the row, kTopKLoads keys a thread at a time, all loaded before any is used:
    // one round trip to L2 per batch, not per key (the loop with atomics kept them one by one).
    auto each_key = [&](auto&& f) {
      for (int64_t i0 = tid; i0 < n; i0 += int64_t(nt) * kTopKLoads) {
        K kb[kTopKLoads];
#pragma unroll
        for (int u = 0; u < kTopKLoads; ++u) {
          const int64_t i = i0 + int64_t(u) * nt;
          kb[u] = i < n ? sort_key(x[i * s], false) : K(0);
        }
#pragma unroll
        for (int u = 0; u < kTopKLoads; ++u)
          if (i0 + int64_t(u) * nt < n) f(kb[u], i0 + int64_t(u) * nt);
      }
    };
    // Sorts ck/ci[0, c) by (key, index), padded to a power of two with the largest pair.
    auto sort_pairs = [&](int c) {
      int P = 1;
      while (P < c) P <<= 1;
      for (int e = c + tid; e < P; e += nt) {
        ck[e] = K(~K(0));
        ci[e] = kPadIndex;
      }
      __syncthreads();
      for (int w = 2; w <= P; w <<= 1) {
        for (int j = w >> 1; j > 0; j >>= 1) {
          for (int q = tid; q < P / 2; q += nt) {
            const int i = 2 * j * (q / j) + (q % j), m = i + j;
            bitonic_swap(ck, ci, i, m, (i & w) == 0);
          }
          __syncthreads();
        }
      }
    };
    // Fast path (k <= threads): each thread's smallest key; the k-th smallest of those, tau, has at
    // least k keys at or below it (one per thread of the first k), and usually not many more. Those
    // keys are gathered and sorted; only when they overflow shared memory does the radix select run.
    if (k <= nt) {
      K mine = K(~K(0));
      each_key([&](K key, int64_t) { mine = key < mine ? key : mine; });
      ck[tid] = mine;
      ci[tid] = uint32_t(tid);
      sort_pairs(nt);
      const K tau = ck[k - 1];
      if (tid == 0) s_slot = 0;
      __syncthreads();
      each_key([&](K key, int64_t i) {
        if (key <= tau) {
          const uint32_t slot = atomicAdd(&s_slot, 1u);
          if (slot < uint32_t(kTopKMax)) {
            ck[slot] = key;
            ci[slot] = uint32_t(i);
          }
        }
      });
      __syncthreads();
      const uint32_t c = s_slot;
      if (c <= uint32_t(kTopKMax)) {
        sort_pairs(int(c));
        for (int e = tid; e < k; e += nt) out[row * k + e] = ci[e];
        __syncthreads();  // ck/ci are rewritten for the next row
        continue;
      }
    }
    K prefix = 0, mask = 0;
    uint32_t rem = uint32_t(k), eq = 0;  // pairs still to find at the prefix; keys equal to T
    for (int shift = int(sizeof(K)) * 8 - 8; shift >= 0; shift -= 8) {
      for (int i = tid; i < 256 * kTopKCopies; i += nt) hist[i] = 0;
      __syncthreads();
      const int copy = tid % kTopKCopies;
      each_key([&](K key, int64_t) {
        if ((key & mask) == prefix) atomicAdd(&hist[int((key >> shift) & 0xff) * kTopKCopies + copy], 1u);
      });
      __syncthreads();
      // Bin totals, an inclusive scan over the 256 bins, and the bin that holds the rem-th pair.
      uint32_t tot = 0;
      if (tid < 256)
        for (int c = 0; c < kTopKCopies; ++c) tot += hist[tid * kTopKCopies + c];
      if (tid < 256) scan[tid] = tot;
      __syncthreads();
      for (int d = 1; d < 256; d <<= 1) {
        const uint32_t add = tid < 256 && tid >= d ? scan[tid - d] : 0;
        __syncthreads();
        if (tid < 256) scan[tid] += add;
        __syncthreads();
      }
      if (tid < 256) {
        const uint32_t incl = scan[tid], excl = incl - tot;
        if (excl < rem && rem <= incl) {
          s_prefix = K(prefix | (K(tid) << shift));
          s_rem = rem - excl;
          s_eq = tot;
        }
      }
      __syncthreads();
      prefix = s_prefix;
      rem = s_rem;
      eq = s_eq;
      mask = K(mask | (K(0xff) << shift));
      __syncthreads();  // s_* are rewritten by the next pass
    }
    // prefix is T: k - rem keys below it, eq keys equal to it, of which the rem lowest indices.
    if (tid == 0) s_slot = 0;
    __syncthreads();
    const bool all_eq = rem == eq;
    each_key([&](K key, int64_t i) {
      if (key < prefix || (all_eq && key == prefix)) {
        const uint32_t slot = atomicAdd(&s_slot, 1u);
        ck[slot] = key;
        ci[slot] = uint32_t(i);
      }
    });
    if (!all_eq) {
      // Ties at T cross the k-th place: thread t counts the equal keys of its run [t * per, (t + 1) * per),
      // an exclusive scan of the counts ranks them by index, and the first rem are kept.
      const int64_t per = (n + nt - 1) / nt, lo = std::min<int64_t>(n, tid * per), hi = std::min<int64_t>(n, lo + per);
      uint32_t c = 0;
      for (int64_t i = lo; i < hi; ++i) c += sort_key(x[i * s], false) == prefix;
      scan[tid] = c;
      __syncthreads();
      for (int d = 1; d < nt; d <<= 1) {
        const uint32_t add = tid >= d ? scan[tid - d] : 0;
        __syncthreads();
        scan[tid] += add;
        __syncthreads();
      }
      uint32_t rank = scan[tid] - c;
      const uint32_t base = uint32_t(k) - rem;
      for (int64_t i = lo; i < hi && rank < rem; ++i)
        if (sort_key(x[i * s], false) == prefix) {
          ck[base + rank] = prefix;
          ci[base + rank] = uint32_t(i);
          ++rank;
        }
    }
    __syncthreads();
    sort_pairs(k);
    for (int e = tid; e < k; e += nt) out[row * k + e] = ci[e];
    __syncthreads();  // ck/ci and scan are rewritten for the next row
  }
}

// out (rows x k) = the first k columns of idx (rows x n).
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    first_cols_kernel(const uint32_t* WICK_RESTRICT idx, int64_t n, int64_t k, int64_t total,
                      uint32_t* WICK_RESTRICT out) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step)
    out[e] = idx[(e / k) * n + e % k];
}

// A last dim of nz elements whose indices (and the padding index above them) fit u32.
void check_u32_rows(size_t nz, const char* op) {
  if (nz > size_t(UINT32_MAX) - 1)
    throw Error(ErrorKind::Unsupported, std::string(op) + ": a last dim of " + std::to_string(nz) +
                                            " elements does not fit the u32 indices; split the rows");
}

// The starts of a last-dim op's rows: a layout over the leading dims; false when it has too many
// unmergeable dims for a by-value layout (the caller then works on a contiguous copy).
bool row_starts(const Layout& l, StridedDesc<1>* rd) {
  const Shape lead_shape(l.shape.begin(), l.shape.end() - (l.rank() ? 1 : 0));
  const Layout lead(lead_shape, std::vector<int64_t>(l.strides.begin(), l.strides.end() - (l.rank() ? 1 : 0)),
                    l.offset);
  return make_desc<1>(lead_shape, {&lead}, rd);
}

}  // namespace

StoragePtr GpuStorage::cumsum(const Layout& l, size_t dim) const {
  DeviceGuard g(ordinal());
  const size_t n_el = l.numel();
  auto out = new_storage(ordinal(), n_el, dtype_);
  if (n_el == 0) return out;
  if (dim >= l.rank())
    throw Error(ErrorKind::Internal, "cumsum: dim " + std::to_string(dim) + " out of range for " + l.str());
  const int64_t n = int64_t(l.shape[dim]), n_lines = int64_t(n_el) / n;
  int64_t n_inner = 1;
  for (size_t d = dim + 1; d < l.rank(); ++d) n_inner *= int64_t(l.shape[d]);
  const int64_t sd = l.strides[dim];
  // The lines: every dim but the scanned one, row-major (outer then inner).
  Shape ls = l.shape;
  std::vector<int64_t> lst = l.strides;
  ls.erase(ls.begin() + int64_t(dim));
  lst.erase(lst.begin() + int64_t(dim));
  Layout line_l(ls, lst, l.offset);
  StridedDesc<1> ld;
  if (!make_desc<1>(ls, {&line_l}, &ld)) {
    // Too many unmergeable dims for a by-value layout: scan a contiguous copy.
    auto tmp = try_clone(l);
    return as_gpu(*tmp).cumsum(Layout::contiguous(l.shape), dim);
  }
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const bool by_block = n >= kBlock && (n_inner == 1 || n_lines < 4096);
    if (by_block)
      launch_kernel(cumsum_block_kernel<T>, grid_for(n_lines, 1), kBlock, 0, stream(), ptr<T>(), out->ptr<T>(), n_lines,
                    n, n_inner, sd, ld);
    else
      launch_kernel(cumsum_lines_kernel<T>, grid_for(n_lines), kBlock, 0, stream(), ptr<T>(), out->ptr<T>(), n_lines, n,
                    n_inner, sd, ld);
    check_launch("cumsum");
  });
  return out;
}

StoragePtr GpuStorage::arg_sort(const Layout& l, bool ascending) const {
  DeviceGuard g(ordinal());
  const size_t n_el = l.numel();
  auto out = new_storage(ordinal(), n_el, DType::U32);
  if (n_el == 0) return out;
  const size_t nz = l.rank() ? l.shape.back() : 1;
  check_u32_rows(nz, "arg_sort");
  const int64_t n = int64_t(nz), n_rows = int64_t(n_el) / n;
  const int64_t s = l.rank() ? l.strides.back() : 1;
  StridedDesc<1> rd;
  if (!row_starts(l, &rd)) {
    auto tmp = try_clone(l);
    return as_gpu(*tmp).arg_sort(Layout::contiguous(l.shape), ascending);
  }
  uint32_t* o_ptr = out->ptr<uint32_t>();
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    using K = sort_key_t<T>;
    gpuStream_t st = stream();
    constexpr int kTile = sort_tile<K>();
    int P = 1;
    while (P < kTile && P < n) P *= 2;
    const int64_t n_tiles = n_rows * ceil_div(n, P);
    const unsigned grid = grid_for(ceil_div(n_tiles, kTile / P), 1);
    if (n <= kTile) {
      launch_kernel(sort_tiles_kernel<T>, grid, kBlock, 0, st, ptr<T>(), rd, n_rows, n, s, P, ascending, nullptr,
                    o_ptr);
      check_launch("arg_sort");
      return;
    }
    const int64_t total = int64_t(n_el);
    Scratch keys(ordinal(), size_t(total) * 2 * sizeof(K)), idx(ordinal(), size_t(total) * sizeof(uint32_t));
    K* k_buf[2] = {static_cast<K*>(keys.b.ptr), static_cast<K*>(keys.b.ptr) + total};
    // Ping-pong between a scratch index buffer and the output so that the last pass lands in out.
    int passes = 0;
    for (int64_t w = kTile; w < n; w *= 2) ++passes;
    uint32_t* i_buf[2] = {static_cast<uint32_t*>(idx.b.ptr), o_ptr};
    int cur = passes % 2 == 0 ? 1 : 0;
    launch_kernel(sort_tiles_kernel<T>, grid, kBlock, 0, st, ptr<T>(), rd, n_rows, n, s, P, ascending, k_buf[cur],
                  i_buf[cur]);
    check_launch("arg_sort");
    const unsigned merge_grid = unsigned(std::min<int64_t>(n_rows * ceil_div(n, kMergeChunk), int64_t(1) << 20));
    int pass = 0;
    for (int64_t w = kTile; w < n; w *= 2, ++pass) {
      K* kout = pass + 1 == passes ? nullptr : k_buf[cur ^ 1];
      launch_kernel(merge_pass_kernel<K>, merge_grid, kBlock, 0, st, k_buf[cur], i_buf[cur], kout, i_buf[cur ^ 1],
                    n_rows, n, w);
      check_launch("arg_sort_merge");
      cur ^= 1;
    }
  });
  return out;
}

StoragePtr GpuStorage::top_k(const Layout& l, size_t k) const {
  DeviceGuard g(ordinal());
  const size_t nz = l.rank() ? l.shape.back() : 1, n_el = l.numel(), n_rows = nz ? n_el / nz : 0;
  if (k == 0 || k > nz)
    throw Error(ErrorKind::Internal, "top_k: k = " + std::to_string(k) + " for a last dim of " + std::to_string(nz));
  auto out = new_storage(ordinal(), n_rows * k, DType::U32);
  if (n_rows == 0) return out;
  check_u32_rows(nz, "top_k");
  if (k > size_t(kTopKMax)) {  // the whole sort, then its first k columns
    auto all = arg_sort(l, false);
    const int64_t total = int64_t(n_rows * k);
    launch_kernel(first_cols_kernel, grid_for(total), kBlock, 0, stream(), as_gpu(*all).ptr<uint32_t>(), int64_t(nz),
                  int64_t(k), total, out->ptr<uint32_t>());
    check_launch("top_k");
    return out;
  }
  const int64_t n = int64_t(nz), s = l.rank() ? l.strides.back() : 1;
  StridedDesc<1> rd;
  if (!row_starts(l, &rd)) {
    auto tmp = try_clone(l);
    return as_gpu(*tmp).top_k(Layout::contiguous(l.shape), k);
  }
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = unsigned(std::min<size_t>(n_rows, 65535));
    launch_kernel(top_k_kernel<T>, grid, kTopKBlock, 0, stream(), ptr<T>(), rd, int64_t(n_rows), n, s, int(k),
                  out->ptr<uint32_t>());
    check_launch("top_k");
  });
  return out;
}

}  // namespace wick::gpu

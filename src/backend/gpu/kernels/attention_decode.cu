// Decode attention: few query rows against a long KV cache (flash-decoding). The chunked GEMM path
// and the flash kernel give a 1-token query one block per head walking every key, a few dozen
// blocks for the whole GPU. Here the keys are split into runs over blocks, and a second kernel
// merges the runs of each row (the online-softmax merge) and writes the output; a block whose run
// holds every key writes its rows itself. Three kernels score the runs:
// - decode_stream_kernel, up to kStreamRows rows per KV head (d == dv), and more rows over a cache
//   longer than one run elsewhere than below: blocks of kStreamGroup rows, q and the P V sums in
//   registers, runs sized on the device to fill the GPU once;
// - decode_mma_kernel, on NVIDIA sm_80+ for 5 to 8 rows per KV head with d == dv in {64, 128} (the
//   1.1B shape's 8) at every length: every row of the KV head in one block, the dot products on
//   tensor cores, so the keys are read once;
// - decode_runs_kernel, the other shapes: runs of kKeys; block (split, kv head, batch) scores its run
//   for every query row that reads this KV head (the h_q / h_kv heads of the group, t_q tokens each).
// Each takes its run's softmax statistics (max m, l = sum exp(s - m)) and its unnormalised P V in f32.
// Portable: the lane-level steps of the stream and runs kernels (warp_reduce, shfl_xor) stay inside a
// wave and take its width, so 32- and 64-lane waves both fit; AMD runs those two.
// With per-batch lengths (attention_kv_len) the grid still covers t_kv: the kernels read the
// length from device memory, blocks whose run starts at or past it return at once and the merge
// stops at the last run, so one captured launch serves every length. When all keys fit one run
// (a short context), the split axis's blocks share that run's rows instead (see decode_runs_kernel).
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/kernels/attention_decode.hpp"
#include "backend/gpu/kernels/mma.cuh"
#include "backend/options.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/positions.hpp"
#include "ops/unary.hpp"  // fmath::exp

namespace wick::gpu {

namespace {

constexpr int kDecBlock = tune::kAttnDecodeKeys;  // one key per thread in the score pass
constexpr int kKeys = tune::kAttnDecodeKeys;
constexpr int kRows = tune::kAttnDecodeRows;
constexpr int kMaxDim = tune::kAttnDecodeMaxDim;
constexpr int kLoads = tune::kAttnDecodeLoads;
constexpr int kPvLoads = tune::kAttnDecodePvLoads;
constexpr int kPvVecRows = tune::kAttnDecodePvVecRows;
constexpr int kStreamBlock = tune::kAttnDecodeStreamBlock;
constexpr int kStreamRows = tune::kAttnDecodeStreamRows;
constexpr int kStreamGroup = tune::kAttnDecodeStreamGroup;
constexpr int kStreamKeys = tune::kAttnDecodeStreamKeys;
constexpr int kStreamStages = tune::kAttnDecodeStreamStages;
constexpr int kStreamMinRun = tune::kAttnDecodeStreamMinRun;
static_assert(kStreamBlock % 64 == 0 && kStreamRows >= kStreamGroup && (kStreamGroup == 1 || kStreamGroup == 2) &&
                  kStreamKeys > 0 && kStreamStages >= 2,
              "stream shape");
static_assert(kDecBlock % 64 == 0 && kRows * kMaxDim >= kDecBlock * kRows, "the P V partials fit in the q buffer");

struct DecodeArgs {
  FlashOperand q, k, v;
  int h_kv, group, t_q, d, dv, splits, run;  // run: keys per block (kKeys); with dyn_runs the least
  bool dyn_runs;  // runs sized from the length on the device: splits blocks share the keys (run_of)
  int64_t t_kv;
  bool causal;
  float scale;
  float* part_o;   // [b][h_kv][splits][rows][dv]: the run's unnormalised P V
  float* part_ml;  // [b][h_kv][splits][rows][2]: the run's m and l
  const void* kv_len;  // AttentionDims::kv_len's data, or nullptr
  DType kv_len_dt;
  int64_t kv_len_offset, kv_len_stride;
  void* out;    // [b][h_q][t_q][dv] in T
  bool direct;  // a length whose keys fit one run: that run's block writes out, the merge returns
};

// The keys batch bi sees: t_kv, or its clamped kv_len.
__device__ __forceinline__ int64_t keys_of(const DecodeArgs& a, int64_t bi) {
  if (!a.kv_len) return a.t_kv;
  const int64_t n = pos::load(a.kv_len, a.kv_len_dt, a.kv_len_offset + bi * a.kv_len_stride);
  return pos::clamp_kv_len(n, a.t_q, a.t_kv, a.causal);
}

// A run's weight when runs with maxima m meet at the larger max mx: exp(m - mx), and 0 for a run
// with no visible key (m = -inf; mx may be -inf too). The streaming kernel's shuffles and the merge.
__device__ __forceinline__ float run_weight(float m, float mx) {
  return m == -std::numeric_limits<float>::infinity() ? 0.0f : fmath::exp(m - mx);
}

// A row whose keys all fit one run is finished by the block that scored it (a.direct): the merge's
// arithmetic for a single run (weight run_weight(m, m), sums from 0), o / l in T, so the output is
// the merge's bit for bit and the merge kernel returns at once for such a length (at tg128 that
// merge was two dependent rounds of loads per layer on the step's critical path).
// Output row `row` (head hk * group + row / t_q, token row % t_q) of batch bi: its dv values in T.
template <class T>
__device__ __forceinline__ T* out_row(const DecodeArgs& a, int64_t bi, int hk, int row) {
  const int g = row / a.t_q, i = row - g * a.t_q;
  const int64_t h_q = int64_t(a.h_kv) * a.group;
  return static_cast<T*>(a.out) + ((bi * h_q + hk * a.group + g) * a.t_q + i) * a.dv;
}

template <class T>
__device__ __forceinline__ void write_one_run(const DecodeArgs& a, int64_t bi, int hk, int row, int c, float o, float m,
                                              float l) {
  const float w = run_weight(m, m), lo = 0.0f + w * l, acc = 0.0f + w * o;
  out_row<T>(a, bi, hk, row)[c] = cast<T>(acc / lo);
}

// Keys per run. Fixed (a.run), or with dyn_runs the length spread over the a.splits runs the grid
// has (sized on the host to fill the GPU once), a multiple of a.run: at 8,192 keys the 256-key runs
// of a 7B model made 1.33 waves of blocks, the last third of a wave with most SMs idle (ncu).
__device__ __forceinline__ int64_t run_of(const DecodeArgs& a, int64_t n_keys) {
  if (!a.dyn_runs) return a.run;
  const int64_t r = ((n_keys + a.splits - 1) / a.splits + a.run - 1) / a.run * a.run;
  return r > a.run ? r : a.run;
}

template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kDecBlock) decode_runs_kernel(DecodeArgs a) {
  kernel_entry();
  constexpr int V = int(16 / sizeof(T));
  const int hk = int(blockIdx.y), bi = int(blockIdx.z), t = int(threadIdx.x);
  const int all_rows = a.group * a.t_q;
  const int64_t n_keys = keys_of(a, bi);
  // Keys that fit one run (a short context) would leave a single block per KV head doing every row
  // while the split axis's other blocks return: then block x takes rows row0 .. row0 + rows - 1 of
  // run 0 instead, each block a shorter chain of loads and barriers. n_keys is the same for the block.
  int split = int(blockIdx.x), row0 = 0, rows = all_rows;
  if (n_keys <= a.run) {
    const int per = (all_rows + int(gridDim.x) - 1) / int(gridDim.x);
    row0 = split * per;
    rows = all_rows - row0 < per ? all_rows - row0 : per;
    split = 0;
    if (rows <= 0) return;
  }
  const int64_t k0 = int64_t(split) * a.run;
  if (k0 >= n_keys) return;              // the whole block
  const int64_t shift = n_keys - a.t_q;  // causal: query i sees keys up to i + shift
  __shared__ float qs[kRows * kMaxDim];  // q rows (pre-scaled), then the P V partials
  __shared__ float ps[kRows][kKeys];     // scores, then exp(s - m)
  __shared__ float row_ml[kRows][2];     // each row's m and l, for write_one_run
  const bool direct = a.direct && n_keys <= a.run;

  // Local row r is row R = row0 + r = g * t_q + i: query i of q head hk * group + g.
  for (int e = t; e < rows * a.d; e += blockDim.x) {
    const int r = e / a.d, c = e - r * a.d, g = (row0 + r) / a.t_q, i = row0 + r - g * a.t_q;
    const T* qp = static_cast<const T*>(a.q.p) + int64_t(bi) * a.q.sb + int64_t(hk * a.group + g) * a.q.sh +
                  int64_t(i) * a.q.st + c;
    qs[r * a.d + c] = cast<float>(*qp) * a.scale;
  }
  __syncthreads();

  // Scores: thread t takes key k0 + t (16-byte loads along the head dim).
  const int nk = int(n_keys - k0 < a.run ? n_keys - k0 : a.run);
  const float ninf = -std::numeric_limits<float>::infinity();
  if (t < nk) {
    const T* kp = static_cast<const T*>(a.k.p) + int64_t(bi) * a.k.sb + int64_t(hk) * a.k.sh + (k0 + t) * a.k.st;
    float s[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] = 0.0f;
    // kLoads vectors of the key are loaded before any is used, so their latencies overlap (a
    // loop that waits for each load in turn made this kernel latency-bound); same summation order.
    for (int c0 = 0; c0 < a.d; c0 += kLoads * V) {
      VecOf<T, V> kv[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u)
        if (c0 + u * V < a.d) kv[u] = *reinterpret_cast<const VecOf<T, V>*>(kp + c0 + u * V);
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        if (c0 + u * V >= a.d) continue;  // not break: clang 17 (ROCm 5.7) will not unroll a loop that breaks
        const int c = c0 + u * V;
        float kf[V];
#pragma unroll
        for (int j = 0; j < V; ++j) kf[j] = cast<float>(kv[u].v[j]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < rows) {
#pragma unroll
            for (int j = 0; j < V; ++j) s[r] += qs[r * a.d + c + j] * kf[j];
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      // Causal: query i sees keys up to i + shift.
      if (r < rows) ps[r][t] = (!a.causal || k0 + t <= ((row0 + r) % a.t_q) + shift) ? s[r] : ninf;
    }
  } else {
    for (int r = 0; r < rows; ++r) ps[r][t] = ninf;
  }
  __syncthreads();

  // Each wave takes rows: max (a NaN never wins, as the CPU), then p = exp(s - m) and l = sum p
  // (NaN scores reach the output through l). A run no row key is visible in has m = -inf, l = 0.
  const int lane = t % kWarpSize, wave = t / kWarpSize, waves = int(blockDim.x) / kWarpSize;
  const int64_t base = ((int64_t(bi) * a.h_kv + hk) * a.splits + split) * all_rows + row0;
  for (int r = wave; r < rows; r += waves) {
    float m = ninf;
    for (int j = lane; j < kKeys; j += kWarpSize) m = ps[r][j] > m ? ps[r][j] : m;
    m = warp_reduce(m, [](float x, float y) { return y > x ? y : x; });
    float l = 0.0f;
    for (int j = lane; j < kKeys; j += kWarpSize) {
      // With m = -inf every key is masked or NaN: 0, or NaN that the merge keeps (0 * NaN).
      const float x = ps[r][j], p = m == ninf ? (x != x ? x : 0.0f) : fmath::exp(x - m);
      ps[r][j] = p;
      l += p;
    }
    l = warp_reduce(l, [](float x, float y) { return x + y; });
    if (lane == 0 && direct) {
      row_ml[r][0] = m;
      row_ml[r][1] = l;
    } else if (lane == 0) {
      a.part_ml[(base + r) * 2] = m;
      a.part_ml[(base + r) * 2 + 1] = l;
    }
  }
  __syncthreads();

  // P V of the run, two ways. Few rows: a key's dv values are read by dv / V threads in 16-byte
  // vectors (thread t: dims c..c+V-1 of keys g, g + groups, ..., kPvLoads keys in flight), f32 sums
  // in key order per thread; the groups of a wave meet by shuffles, then the waves one after another
  // in the q buffer (a fixed order: results do not vary from run to run). That reduction grows with
  // the rows, so more rows take scalars: thread t reads dim t % dv of keys t / dv, t / dv + parts,
  // ..., kLoads in flight, and the parts meet in the q buffer. `rows` is the same for the block.
  if (rows <= kPvVecRows) {
    const int lanes = a.dv / V, groups = kDecBlock / lanes, g = t / lanes, c = (t - g * lanes) * V;
    float acc[kPvVecRows][V];
#pragma unroll
    for (int r = 0; r < kPvVecRows; ++r)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r][e] = 0.0f;
    const T* vp = static_cast<const T*>(a.v.p) + int64_t(bi) * a.v.sb + int64_t(hk) * a.v.sh + k0 * a.v.st + c;
    for (int j0 = g; j0 < nk; j0 += kPvLoads * groups) {
      VecOf<T, V> x[kPvLoads];
#pragma unroll
      for (int u = 0; u < kPvLoads; ++u)
        if (j0 + u * groups < nk) x[u] = *reinterpret_cast<const VecOf<T, V>*>(vp + int64_t(j0 + u * groups) * a.v.st);
#pragma unroll
      for (int u = 0; u < kPvLoads; ++u) {
        if (j0 + u * groups >= nk) continue;
#pragma unroll
        for (int r = 0; r < kPvVecRows; ++r) {
          if (r < rows) {
            const float p = ps[r][j0 + u * groups];
#pragma unroll
            for (int e = 0; e < V; ++e) acc[r][e] += p * cast<float>(x[u].v[e]);
          }
        }
      }
    }
    // lanes divides kWarpSize (dv / V <= 256 / 8 = 32, a power of two checked on the host).
    for (int o = lanes; o < kWarpSize; o <<= 1)
#pragma unroll
      for (int r = 0; r < kPvVecRows; ++r)
        if (r < rows)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[r][e] += shfl_xor(acc[r][e], o);
    for (int w = 0; w < waves; ++w) {
      if (wave == w && lane < lanes) {
#pragma unroll
        for (int r = 0; r < kPvVecRows; ++r)
          if (r < rows)
#pragma unroll
            for (int e = 0; e < V; ++e) qs[r * a.dv + c + e] = (w == 0 ? 0.0f : qs[r * a.dv + c + e]) + acc[r][e];
      }
      __syncthreads();
    }
    for (int e = t; e < rows * a.dv; e += blockDim.x) {
      const int r = e / a.dv;
      if (direct)
        write_one_run<T>(a, bi, hk, row0 + r, e - r * a.dv, qs[e], row_ml[r][0], row_ml[r][1]);
      else
        a.part_o[(base + r) * a.dv + e - r * a.dv] = qs[e];
    }
    return;
  }
  const int parts = kDecBlock / a.dv, part = t / a.dv, c = t - part * a.dv;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  if (part < parts) {
    const T* vp = static_cast<const T*>(a.v.p) + int64_t(bi) * a.v.sb + int64_t(hk) * a.v.sh + k0 * a.v.st + c;
    for (int j0 = part; j0 < nk; j0 += kLoads * parts) {
      float x[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) x[u] = j0 + u * parts < nk ? cast<float>(vp[(j0 + u * parts) * a.v.st]) : 0.0f;
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        if (j0 + u * parts >= nk) continue;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (r < rows) acc[r] += ps[r][j0 + u * parts] * x[u];
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r < rows) qs[(part * rows + r) * a.dv + c] = acc[r];
  }
  __syncthreads();
  for (int e = t; e < rows * a.dv; e += blockDim.x) {
    const int r = e / a.dv, cc = e - r * a.dv;
    float o = 0.0f;
    for (int pp = 0; pp < parts; ++pp) o += qs[(pp * rows + r) * a.dv + cc];
    if (direct)
      write_one_run<T>(a, bi, hk, row0 + r, cc, o, row_ml[r][0], row_ml[r][1]);
    else
      a.part_o[(base + r) * a.dv + cc] = o;
  }
}

// The streaming variant for up to R query rows (a multi-head model's one token, or a few rows of a
// grouped one): no score buffer and no barrier until the end. The d / V lanes of a key group read
// one key's row in 16-byte vectors (a wave reads kWarpSize / (d / V) adjacent keys per load), each
// lane keeps its V dims of the R query rows and of the R running P V sums in registers, and every
// key group runs its own online softmax (m, l, acc) over its keys; U keys' k and v rows are loaded
// before any is used, so a lane has 2U 16-byte loads in flight and a wave streams its share of the
// run without waiting on the other waves. The groups meet by shuffles, the waves in shared memory,
// in a fixed order, and the block writes the run's (m, l, P V) as decode_runs_kernel does, for the
// same merge. The runs kernel held every score of the run in shared memory between three barrier-
// separated passes; at 8,192 keys of a 7B model it moved 2.0 TB/s with under one warp ready per
// scheduler (ncu of bench/gpu_attention_decode). Needs d == dv.
// With S > 0 stages the loads go through a ring in dynamic shared memory instead of registers
// (cp.async on NVIDIA sm_80+): each thread keeps the next S - 1 steps' k and v vectors in flight
// while it computes one, and reads back only the 16-byte slots it filled itself, so no barrier. At
// 8,192 keys of the 7B shape the register loads left 5 blocks per SM (88 registers) waiting on
// memory most cycles (ncu: long scoreboard 6.8 of 11 cycles per instruction, 59% of DRAM peak).
// The same arithmetic in the same order either way (only where the k and v vectors wait differs).
constexpr size_t stream_ring_bytes(int block) { return size_t(kStreamStages) * kStreamKeys * 2 * 16 * size_t(block); }

template <class T, int R, int S>
__global__ void WICK_LAUNCH_BOUNDS(kStreamBlock) decode_stream_kernel(DecodeArgs a) {
  kernel_entry();
  constexpr int V = int(16 / sizeof(T)), U = kStreamKeys;
  const int hk = int(blockIdx.y), bi = int(blockIdx.z), t = int(threadIdx.x);
  const int all_rows = a.group * a.t_q, row_groups = (all_rows + R - 1) / R;
  const int64_t n_keys = keys_of(a, bi), run = run_of(a, n_keys);
  // Block x takes run x / row_groups and rows (x % row_groups) * R .. + R - 1. Keys that fit one
  // run spread the rows over every block of the split axis instead (at most R each: gridDim.x is
  // at least row_groups), as in decode_runs_kernel. n_keys is the same for the block.
  int split, row0, rows;
  if (n_keys <= run) {
    const int per_block = (all_rows + int(gridDim.x) - 1) / int(gridDim.x);
    split = 0;
    row0 = int(blockIdx.x) * per_block;
    rows = all_rows - row0 < per_block ? all_rows - row0 : per_block;
  } else {
    split = int(blockIdx.x) / row_groups;
    row0 = (int(blockIdx.x) - split * row_groups) * R;
    rows = all_rows - row0 < R ? all_rows - row0 : R;
  }
  if (rows <= 0) return;
  const int64_t k0 = int64_t(split) * run;
  if (k0 >= n_keys) return;
  const int nk = int(n_keys - k0 < run ? n_keys - k0 : run);
  const int64_t shift = n_keys - a.t_q;  // causal: query i sees keys up to i + shift

  const int lanes = a.d / V, keys_per_load = kWarpSize / lanes;  // lanes: a power of two <= kWarpSize
  const int lane = t % kWarpSize, wave = t / kWarpSize, waves = int(blockDim.x) / kWarpSize;
  const int slot = lane / lanes, c = (lane - slot * lanes) * V;
  const float ninf = -std::numeric_limits<float>::infinity();

  float q[R][V], acc[R][V], m[R], l[R];
  int last_key[R];  // causal: the last key (run-relative) row r sees
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = row0 + (r < rows ? r : 0), g = row / a.t_q, i = row - g * a.t_q;
    const T* qp = static_cast<const T*>(a.q.p) + int64_t(bi) * a.q.sb + int64_t(hk * a.group + g) * a.q.sh +
                  int64_t(i) * a.q.st + c;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      q[r][e] = cast<float>(qp[e]) * a.scale;
      acc[r][e] = 0.0f;
    }
    m[r] = ninf;
    l[r] = 0.0f;
    const int64_t lk = a.causal ? int64_t(i) + shift - k0 : int64_t(nk) - 1;
    last_key[r] = int(lk < nk - 1 ? lk : nk - 1);
  }

  // Wave w takes keys [w * per, (w + 1) * per) of the run, per a multiple of one loop step.
  const int step = keys_per_load * U;
  const int per = ((nk + waves - 1) / waves + step - 1) / step * step;
  const int kb = wave * per, ke = kb + per < nk ? kb + per : nk;
  const T* kp = static_cast<const T*>(a.k.p) + int64_t(bi) * a.k.sb + int64_t(hk) * a.k.sh + k0 * a.k.st + c;
  const T* vp = static_cast<const T*>(a.v.p) + int64_t(bi) * a.v.sb + int64_t(hk) * a.v.sh + k0 * a.v.st + c;
  // The ring: slot (stage, u, k or v) of thread t is 16 bytes at ((stage * U + u) * 2 + kv) * blockDim
  // + t, so a wave's 16-byte accesses are contiguous. issue(i) fills stage i % S with step i's
  // vectors (zeros past the wave's keys) and commits a group, empty past the last step.
  constexpr int SR = S > 0 ? S : 1;  // (S = 0 never calls issue)
  extern __shared__ uint4 ring[];
  auto ring_at = [&](int stage, int u, int side) { return ring + ((stage * U + u) * 2 + side) * int(blockDim.x) + t; };
  const int steps = ke > kb ? (ke - kb + step - 1) / step : 0;
  auto issue = [&](int i) {
    if (i < steps) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = kb + i * step + u * keys_per_load + slot;
        const bool in = j < ke;
        cp_async16(ring_at(i % SR, u, 0), in ? kp + int64_t(j) * a.k.st : kp, in ? 16 : 0);
        cp_async16(ring_at(i % SR, u, 1), in ? vp + int64_t(j) * a.v.st : vp, in ? 16 : 0);
      }
    }
    cp_async_commit();
  };
  if constexpr (S > 0)
    for (int i = 0; i < S - 1; ++i) issue(i);
  for (int i = 0; i < steps; ++i) {  // the same trip count for the whole wave
    const int j0 = kb + i * step;
    VecOf<T, V> kv[U], vv[U];
    if constexpr (S > 0) {
      issue(i + S - 1);
      cp_async_wait<S - 1>();  // step i's group has landed
#pragma unroll
      for (int u = 0; u < U; ++u) {
        kv[u] = *reinterpret_cast<const VecOf<T, V>*>(ring_at(i % SR, u, 0));
        vv[u] = *reinterpret_cast<const VecOf<T, V>*>(ring_at(i % SR, u, 1));
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * keys_per_load + slot;
        if (j < ke) {
          kv[u] = *reinterpret_cast<const VecOf<T, V>*>(kp + int64_t(j) * a.k.st);
          vv[u] = *reinterpret_cast<const VecOf<T, V>*>(vp + int64_t(j) * a.v.st);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) kv[u].v[e] = vv[u].v[e] = cast<T>(0.0f);
        }
      }
    }
    float s[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float x = 0.0f;
#pragma unroll
        for (int e = 0; e < V; ++e) x += q[r][e] * cast<float>(kv[u].v[e]);
        s[u][r] = x;
      }
    for (int o = 1; o < lanes; o <<= 1)  // the key group's lanes all get the key's score
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) s[u][r] += shfl_xor(s[u][r], o);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) continue;
      // Keys past the run's end or the row's causal limit are -inf; a NaN never wins the max.
      float mx = m[r];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * keys_per_load + slot;
        if (j >= ke || j > last_key[r]) s[u][r] = ninf;
        mx = s[u][r] > mx ? s[u][r] : mx;
      }
      // With mx = -inf every key so far is masked or NaN: p is 0, or the NaN the merge keeps.
      const float alpha = mx == ninf ? 1.0f : fmath::exp(m[r] - mx);
      float ls = 0.0f;
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r][e] *= alpha;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float x = s[u][r], p = mx == ninf ? (x != x ? x : 0.0f) : fmath::exp(x - mx);
        ls += p;
#pragma unroll
        for (int e = 0; e < V; ++e) acc[r][e] += p * cast<float>(vv[u].v[e]);
      }
      l[r] = l[r] * alpha + ls;
      m[r] = mx;
    }
  }

  // The key groups of a wave meet by shuffles (each pair ends with the same sums), then the waves.
  for (int o = lanes; o < kWarpSize; o <<= 1)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // Both lanes of a pair evaluate the same expression on the same operands (lower lane first).
      const bool low = (lane & o) == 0;
      const float m2 = shfl_xor(m[r], o), l2 = shfl_xor(l[r], o);
      const float ma = low ? m[r] : m2, mb = low ? m2 : m[r], mo = mb > ma ? mb : ma;
      const float wa = run_weight(ma, mo), wb = run_weight(mb, mo);
      l[r] = wa * (low ? l[r] : l2) + wb * (low ? l2 : l[r]);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float a2 = shfl_xor(acc[r][e], o);
        acc[r][e] = wa * (low ? acc[r][e] : a2) + wb * (low ? a2 : acc[r][e]);
      }
      m[r] = mo;
    }
  __shared__ float so[kStreamBlock / kWarpSize][R][kMaxDim];
  __shared__ float sml[kStreamBlock / kWarpSize][R][2];
  if (lane < lanes) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int e = 0; e < V; ++e) so[wave][r][c + e] = acc[r][e];
      if (lane == 0) {
        sml[wave][r][0] = m[r];
        sml[wave][r][1] = l[r];
      }
    }
  }
  __syncthreads();
  const int64_t base = ((int64_t(bi) * a.h_kv + hk) * a.splits + split) * all_rows + row0;
  for (int e = t; e < rows * a.dv; e += blockDim.x) {
    const int r = e / a.dv, cc = e - r * a.dv;
    float mo = ninf;
    for (int w = 0; w < waves; ++w) mo = sml[w][r][0] > mo ? sml[w][r][0] : mo;
    float lo = 0.0f, o = 0.0f;
    for (int w = 0; w < waves; ++w) {
      const float wt = run_weight(sml[w][r][0], mo);
      lo += wt * sml[w][r][1];
      o += wt * so[w][r][cc];
    }
    if (a.direct && n_keys <= run) {
      write_one_run<T>(a, bi, hk, row0 + r, cc, o, mo, lo);
      continue;
    }
    a.part_o[(base + r) * a.dv + cc] = o;
    if (cc == 0) {
      a.part_ml[(base + r) * 2] = mo;
      a.part_ml[(base + r) * 2 + 1] = lo;
    }
  }
}

// ---- Tensor-core decode attention for the grouped shapes (NVIDIA sm_80+): more than kStreamRows query
// rows per KV head (the 1.1B shape's 8; one mma holds 16, the decode path takes at most kRows), d == dv
// in {64, 128}. The stream and runs
// kernels give each query row its own pass over the keys in f32 FMAs (the stream kernel reads the
// keys once per group of kStreamGroup rows); here one block takes every row of its KV head, so K and
// V are read once, and the dot products are mma.sync m16n8k16: S (16 rows x 16 keys) = Q K^T, rows
// past the head's count zero, then O += P V with P rounded to T, as the flash kernel does. Each of
// the block's kMmaWarps warps walks its share of the run's keys in tiles of 16, the tiles' k and v
// rows copied to the warp's ring in shared memory by cp.async (kMmaStages tiles in flight), read
// back as fragments by ldmatrix; every warp runs its own online softmax (m, l per row in f32), and
// the warps meet in shared memory, in warp order, as in decode_stream_kernel, which writes the same
// run partials (or the output, for a one-run length) for the same merge.
// Fragment layouts: kernels/mma.cuh.
constexpr int kMmaWarps = tune::kAttnDecodeMmaWarps;
#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
constexpr int kMmaStages = tune::kAttnDecodeMmaStages;
constexpr int kMmaTile = 16;  // keys per tile (one k16 of P V)
constexpr int kMmaMaxRows = 16;

// Bytes of a warp's ring: kMmaStages tiles of k and v rows, each row padded by 16 bytes so the 8
// rows of an ldmatrix fall in distinct banks.
constexpr size_t mma_row_halves(int d) { return size_t(d) + 8; }
constexpr size_t mma_ring_bytes(int d) { return size_t(kMmaStages) * 2 * kMmaTile * mma_row_halves(d) * 2; }
constexpr size_t mma_smem_bytes(int d) {
  // the rings, reused after them for the warps' partial sums (f32 rows, m and l)
  return std::max(size_t(kMmaWarps) * mma_ring_bytes(d),
                  size_t(kMmaWarps) * kMmaMaxRows * (size_t(d) + 2) * sizeof(float));
}

template <class T, int D>
__global__ void WICK_LAUNCH_BOUNDS(kMmaWarps * 32) decode_mma_kernel(DecodeArgs a) {
  kernel_entry();
#if WICK_HAS_MMA && WICK_HAS_CP_ASYNC
  constexpr int KS = D / 16, NT = D / 8, LD = int(mma_row_halves(D)), CH = D / 8;  // 16-byte chunks a row
  const int hk = int(blockIdx.y), bi = int(blockIdx.z), t = int(threadIdx.x);
  const int lane = t % 32, warp = t / 32, g = lane / 4, c = lane % 4;
  const int all_rows = a.group * a.t_q;
  const int64_t n_keys = keys_of(a, bi), run = run_of(a, n_keys);
  const int split = int(blockIdx.x);
  const int64_t k0 = int64_t(split) * run;
  if (k0 >= n_keys) return;
  const int nk = int(n_keys - k0 < run ? n_keys - k0 : run);
  const int64_t shift = n_keys - a.t_q;  // causal: query i sees keys up to i + shift
  const float ninf = -std::numeric_limits<float>::infinity();

  // Q's A fragments (unscaled; the scores are scaled in f32) and each of the thread's two rows' last
  // visible key (run-relative).
  uint32_t qa[KS][4];
  int last_key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    const bool in = row < all_rows;
    const int gq = in ? row / a.t_q : 0, i = in ? row - gq * a.t_q : 0;
    const uint16_t* qp = reinterpret_cast<const uint16_t*>(static_cast<const T*>(a.q.p) + int64_t(bi) * a.q.sb +
                                                           int64_t(hk * a.group + gq) * a.q.sh + int64_t(i) * a.q.st);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int col = ks * 16 + half * 8 + 2 * c;
        qa[ks][h + 2 * half] = in ? uint32_t(qp[col]) | (uint32_t(qp[col + 1]) << 16) : 0u;
      }
    const int64_t lk = a.causal ? int64_t(i) + shift - k0 : int64_t(nk) - 1;
    last_key[h] = int(lk < nk - 1 ? lk : nk - 1);
  }

  // Warp w takes keys [kb, ke) of the run: whole tiles, the last warp's part full.
  const int per = ((nk + kMmaWarps - 1) / kMmaWarps + kMmaTile - 1) / kMmaTile * kMmaTile;
  const int kb = warp * per, ke = kb + per < nk ? kb + per : nk;
  const int tiles = ke > kb ? (ke - kb + kMmaTile - 1) / kMmaTile : 0;
  const T* kp = static_cast<const T*>(a.k.p) + int64_t(bi) * a.k.sb + int64_t(hk) * a.k.sh + k0 * a.k.st;
  const T* vp = static_cast<const T*>(a.v.p) + int64_t(bi) * a.v.sb + int64_t(hk) * a.v.sh + k0 * a.v.st;
  extern __shared__ uint4 mma_smem[];
  T* ring = reinterpret_cast<T*>(reinterpret_cast<char*>(mma_smem) + size_t(warp) * mma_ring_bytes(D));
  auto tile_at = [&](int stage, int side) { return ring + (stage * 2 + side) * kMmaTile * LD; };
  auto issue = [&](int i) {  // tile i's k and v rows into stage i % kMmaStages (zeros past ke)
    if (i < tiles) {
      const int j0 = kb + i * kMmaTile;
#pragma unroll
      for (int u = 0; u < kMmaTile * CH / 32; ++u) {
        const int q = lane + 32 * u, r = q / CH, ch = q - r * CH, j = j0 + r;
        const bool in = j < ke;
        cp_async16(tile_at(i % kMmaStages, 0) + r * LD + ch * 8, in ? kp + int64_t(j) * a.k.st + ch * 8 : kp,
                   in ? 16 : 0);
        cp_async16(tile_at(i % kMmaStages, 1) + r * LD + ch * 8, in ? vp + int64_t(j) * a.v.st + ch * 8 : vp,
                   in ? 16 : 0);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < kMmaStages - 1; ++i) issue(i);

  float o[NT][4], m[2] = {ninf, ninf}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // ldmatrix row addresses: lane l gives row l % 8 of matrix l / 8.
  const int lm = lane / 8, lr = lane % 8;
  for (int i = 0; i < tiles; ++i) {
    issue(i + kMmaStages - 1);
    cp_async_wait<kMmaStages - 1>();
    __syncwarp();  // every lane's copies of tile i are visible to the warp
    const T* kt = tile_at(i % kMmaStages, 0);
    const T* vt = tile_at(i % kMmaStages, 1);
    // S: two 8-key column tiles; matrices (keys 0-7, dims lo), (0-7, hi), (8-15, lo), (8-15, hi).
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t b[4];
      ldsm_x4(b, kt + ((lm >> 1) * 8 + lr) * LD + ks * 16 + (lm & 1) * 8);
      mma16816<T>(s[0], qa[ks], b[0], b[1]);
      mma16816<T>(s[1], qa[ks], b[2], b[3]);
    }
    // Scale, mask (keys past the warp's part or the row's causal limit are -inf; a NaN never wins the
    // max), then the online softmax of the thread's two rows over the 4 lanes that share each row.
    const int j0 = kb + i * kMmaTile;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2, j = j0 + n * 8 + 2 * c + (e & 1);
        float x = s[n][e] * a.scale;
        if (j >= ke || j > last_key[h]) x = ninf;
        s[n][e] = x;
        mx[h] = x > mx[h] ? x : mx[h];
      }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      for (int off = 1; off < 4; off <<= 1) {
        const float y = __shfl_xor_sync(0xffffffffu, mx[h], off);
        mx[h] = y > mx[h] ? y : mx[h];
      }
      // With mx = -inf every key so far is masked or NaN: p is 0, or the NaN the merge keeps.
      alpha[h] = mx[h] == ninf ? 1.0f : fmath::exp(m[h] - mx[h]);
      l[h] *= alpha[h];
      m[h] = mx[h];
    }
    uint32_t pa[4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const float x = s[n][e];
        p[e] = mx[h] == ninf ? (x != x ? x : 0.0f) : fmath::exp(x - mx[h]);
        l[h] += p[e];
      }
      pa[2 * n] = pack2<T>(p[0], p[1]);
      pa[2 * n + 1] = pack2<T>(p[2], p[3]);
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
    // O += P V: matrices (keys 0-7, dims d0..), (8-15, d0..), (0-7, d0 + 8..), (8-15, d0 + 8..), transposed.
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      uint32_t b[4];
      ldsm_x4_trans(b, vt + ((lm & 1) * 8 + lr) * LD + n * 8 + (lm >> 1) * 8);
      mma16816<T>(o[n], pa, b[0], b[1]);
      mma16816<T>(o[n + 1], pa, b[2], b[3]);
    }
    __syncwarp();  // the tile's stage is refilled next iteration
  }
  cp_async_wait<0>();

  // Each row's l over its 4 lanes; then the warps' (m, l, O) meet in shared memory in warp order.
#pragma unroll
  for (int h = 0; h < 2; ++h)
    for (int off = 1; off < 4; off <<= 1) l[h] += __shfl_xor_sync(0xffffffffu, l[h], off);
  __syncthreads();  // every warp is done with its ring
  float* so = reinterpret_cast<float*>(mma_smem);                // [warp][row][D]
  float* sml = so + size_t(kMmaWarps) * kMmaMaxRows * D;          // [warp][row][2]
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) so[(warp * kMmaMaxRows + g + 8 * (e / 2)) * D + n * 8 + 2 * c + (e & 1)] = o[n][e];
  if (c == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sml[(warp * kMmaMaxRows + g + 8 * h) * 2] = m[h];
      sml[(warp * kMmaMaxRows + g + 8 * h) * 2 + 1] = l[h];
    }
  __syncthreads();
  const int64_t base = ((int64_t(bi) * a.h_kv + hk) * a.splits + split) * all_rows;
  for (int e = t; e < all_rows * D; e += int(blockDim.x)) {
    const int r = e / D, cc = e - r * D;
    float mo = ninf;
    for (int w = 0; w < kMmaWarps; ++w) {
      const float mw = sml[(w * kMmaMaxRows + r) * 2];
      mo = mw > mo ? mw : mo;
    }
    float lo = 0.0f, ov = 0.0f;
    for (int w = 0; w < kMmaWarps; ++w) {
      const float wt = run_weight(sml[(w * kMmaMaxRows + r) * 2], mo);
      lo += wt * sml[(w * kMmaMaxRows + r) * 2 + 1];
      ov += wt * so[(w * kMmaMaxRows + r) * D + cc];
    }
    if (a.direct && n_keys <= run) {
      write_one_run<T>(a, bi, hk, r, cc, ov, mo, lo);
      continue;
    }
    a.part_o[(base + r) * a.dv + cc] = ov;
    if (cc == 0) {
      a.part_ml[(base + r) * 2] = mo;
      a.part_ml[(base + r) * 2 + 1] = lo;
    }
  }
#endif
}
#endif

// A merge block's output row: block x = (bi * h_kv + hk) * rows + r, the runs that hold its keys,
// and where run s's partials are (part: the row of part_o / part_ml).
struct MergeRow {
  int64_t bi;
  int hk, r, splits;
  bool written;  // one run, whose block wrote the row (write_one_run)
  __device__ int64_t part(const DecodeArgs& a, int s) const {
    return ((bi * a.h_kv + hk) * a.splits + s) * (a.group * a.t_q) + r;
  }
};
__device__ __forceinline__ MergeRow merge_row(const DecodeArgs& a) {
  const int rows = a.group * a.t_q;
  const int64_t id = blockIdx.x;
  MergeRow m;
  m.r = int(id % rows);
  m.hk = int((id / rows) % a.h_kv);
  m.bi = id / rows / a.h_kv;
  const int64_t n_keys = keys_of(a, m.bi), run = run_of(a, n_keys);
  m.written = a.direct && n_keys <= run;
  m.splits = int((n_keys + run - 1) / run);
  return m;
}

// Adds runs s0, s0 + stride, ... (kLoads of them, those below splits) of column c to (l, acc), each
// weighted by run_weight(m, mx): every load first, then the sums in run order.
__device__ __forceinline__ void fold_runs(const DecodeArgs& a, const MergeRow& mr, int s0, int stride, int c, float mx,
                                          float& l, float& acc) {
  float m[kLoads], lv[kLoads], ov[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    const int s = s0 + u * stride;
    const int64_t row = s < mr.splits ? mr.part(a, s) : 0;
    m[u] = s < mr.splits ? a.part_ml[row * 2] : 0.0f;
    lv[u] = s < mr.splits ? a.part_ml[row * 2 + 1] : 0.0f;
    ov[u] = s < mr.splits ? a.part_o[row * a.dv + c] : 0.0f;
  }
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    if (s0 + u * stride >= mr.splits) continue;
    const float w = run_weight(m[u], mx);
    l += w * lv[u];
    acc += w * ov[u];
  }
}

// One block per (batch, kv head, row): the online-softmax merge of the runs, o / l in T. Each
// thread walks every run of its columns, loads batched kLoads runs deep (as in the runs kernel).
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kDecBlock) decode_merge_kernel(DecodeArgs a) {
  kernel_entry();
  const MergeRow mr = merge_row(a);
  if (mr.written) return;
  float mx = -std::numeric_limits<float>::infinity();
  for (int s0 = 0; s0 < mr.splits; s0 += kLoads) {
    float m[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) m[u] = s0 + u < mr.splits ? a.part_ml[mr.part(a, s0 + u) * 2] : mx;
#pragma unroll
    for (int u = 0; u < kLoads; ++u) mx = m[u] > mx ? m[u] : mx;
  }
  T* WICK_RESTRICT o = out_row<T>(a, mr.bi, mr.hk, mr.r);
  for (int c = int(threadIdx.x); c < a.dv; c += blockDim.x) {
    float l = 0.0f, acc = 0.0f;
    for (int s0 = 0; s0 < mr.splits; s0 += kLoads) fold_runs(a, mr, s0, 1, c, mx, l, acc);
    o[c] = cast<T>(acc / l);
  }
}

// The merge for many runs (splits >= kWideMergeRuns): decode_merge_kernel's threads each walk every
// run of their column twice (the maxima, then the sums), a chain of about splits / kLoads dependent
// loads; at 8,192 keys (33-80 runs) that chain was most of the merge. Here the block's threads split
// the runs: the maxima in one round (a block max), then S = blockDim / dv slices of runs per column,
// each summing its runs in run order, met in shared memory in slice order.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kDecBlock) decode_merge_wide_kernel(DecodeArgs a) {
  kernel_entry();
  const MergeRow mr = merge_row(a);
  if (mr.written) return;
  const int t = int(threadIdx.x), nt = int(blockDim.x);
  __shared__ float red[kDecBlock];
  __shared__ float part_l[kDecBlock];
  float mx = -std::numeric_limits<float>::infinity();
  for (int s = t; s < mr.splits; s += nt) {
    const float m = a.part_ml[mr.part(a, s) * 2];
    mx = m > mx ? m : mx;
  }
  __shared__ float buf[kMaxWarpsPerBlock];
  mx = row_reduce(mx, [](float x, float y) { return y > x ? y : x; }, -std::numeric_limits<float>::infinity(), nt, buf);
  const int slices = nt / a.dv, c = t % a.dv, slice = t / a.dv;
  float l = 0.0f, acc = 0.0f;
  if (slice < slices)
    for (int s0 = slice; s0 < mr.splits; s0 += slices * kLoads) fold_runs(a, mr, s0, slices, c, mx, l, acc);
  red[t] = acc;
  part_l[t] = l;
  __syncthreads();
  if (slice == 0) {
    for (int q = 1; q < slices; ++q) {
      acc += red[q * a.dv + c];
      l += part_l[q * a.dv + c];
    }
    out_row<T>(a, mr.bi, mr.hk, mr.r)[c] = cast<T>(acc / l);
  }
}

bool aligned_stride(int64_t stride, int64_t es) { return (stride * es) % 16 == 0; }

// The streaming kernel for R rows, through the ring or loading into registers, and whether a
// launch takes the ring: where cp.async exists (an NVIDIA build on sm_80+) unless `registers`
// (WICK_DECODE_STAGES=0: register loads on NVIDIA too, the AMD path, for its tests).
template <class T, int R> void (*stream_kernel(bool ring))(DecodeArgs) {
  return ring ? decode_stream_kernel<T, R, kStreamStages> : decode_stream_kernel<T, R, 0>;
}
bool stream_ring(int ordinal, bool registers) {
#if defined(WICK_GPU_HIP) || defined(WICK_EMULATE_AMD)
  (void)ordinal, (void)registers;
  return false;
#else
  return !registers && context(ordinal).prop.major >= 8;
#endif
}
// The ring's dynamic shared memory is asked for once per kernel and device (the attribute is the
// current device's): with the kernel's static arrays it may pass the 48 KiB a launch gets unasked.
void allow_smem(int ordinal, const void* kern, size_t bytes) {
  static std::mutex mu;
  static std::set<std::pair<int, const void*>> done;
  const std::lock_guard<std::mutex> lock(mu);
  if (bytes == 0 || done.count({ordinal, kern})) return;
  allow_dynamic_smem(kern, bytes, "attention (decode)");
  done.insert({ordinal, kern});
}

#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
template <class T> void (*mma_kernel(int d))(DecodeArgs) {
  return d == 64 ? decode_mma_kernel<T, 64> : decode_mma_kernel<T, 128>;
}
// Whether a launch may take the tensor-core kernel: the device is sm_80+ with the shared memory it
// needs, and the binary holds the kernel's sm_80+ body (has_sm80_body, as flash_attention_supported
// asks); asked once per kernel and device.
bool mma_ready(int ordinal, const void* kern, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, bool> known;
  {
    const std::lock_guard<std::mutex> lock(mu);
    const auto it = known.find({ordinal, kern});
    if (it != known.end()) return it->second;
  }
  const gpuDeviceProp_t& prop = context(ordinal).prop;
  const bool ok =
      prop.major >= 8 && size_t(prop.sharedMemPerBlockOptin) >= smem + static_smem(kern) && has_sm80_body(kern);
  if (ok) allow_smem(ordinal, kern, smem);
  const std::lock_guard<std::mutex> lock(mu);
  known[{ordinal, kern}] = ok;
  return ok;
}
#endif

}  // namespace

bool attention_decode_supported(DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                                const AttentionDims& a) {
  (void)q;
  // f32 keeps the GEMM path, which matches the CPU to ~1e-12 (NMSE); this one sums in another order.
  if (dt != DType::F16 && dt != DType::BF16) return false;
  if (a.h_kv == 0 || a.h_q % a.h_kv != 0 || a.t_q == 0 || a.t_kv == 0 || a.b == 0) return false;
  if ((a.h_q / a.h_kv) * a.t_q > size_t(kRows)) return false;
  if (a.d == 0 || a.d_v == 0 || a.d > size_t(kMaxDim) || a.d_v > size_t(kMaxDim)) return false;
  if (a.b > 65535 || a.h_kv > 65535 || a.t_kv / kKeys >= size_t(INT32_MAX / 2)) return false;  // x: runs x row groups
  // Only where it has at least as many blocks as the one-block-per-head paths: measured on an H100
  // (wick bench-llm tg128), a 4-KV-head model with a short cache (2 runs x 4 heads) decoded 0.68x as
  // fast as with the flash kernel, while at 8192 keys it was 1.27x faster (7B: 1.03x and 1.50x).
  // Speed only: with kv_len this is the path that keeps the lengths on the device, taken anyway.
  if (!a.kv_len && (a.t_kv + kKeys - 1) / kKeys < a.h_q / a.h_kv) return false;
  if (a.b * a.h_q * a.t_q > size_t(INT32_MAX)) return false;  // the merge grid
  if (a.causal && a.t_kv < a.t_q) return false;               // the core refuses it
  const int64_t es = int64_t(dtype_size(dt)), vec = 16 / es;
  // The P V pass reads v as k: 16-byte vectors, dv / vec lanes per key (a power of two).
  const int64_t lanes = int64_t(a.d_v) / vec;
  return int64_t(a.d) % vec == 0 && aligned16(k.p) && aligned_stride(k.sb, es) && aligned_stride(k.sh, es) &&
         aligned_stride(k.st, es) && int64_t(a.d_v) % vec == 0 && (lanes & (lanes - 1)) == 0 && aligned16(v.p) &&
         aligned_stride(v.sb, es) && aligned_stride(v.sh, es) && aligned_stride(v.st, es);
}

void attention_decode(DeviceContext& ctx, int ordinal, DType dt, const FlashOperand& q, const FlashOperand& k,
                      const FlashOperand& v, void* out, const AttentionDims& a) {
  DecodeArgs d{q,
               k,
               v,
               int(a.h_kv),
               int(a.h_q / a.h_kv),
               int(a.t_q),
               int(a.d),
               int(a.d_v),
               0,
               kKeys,
               false,
               int64_t(a.t_kv),
               a.causal,
               float(a.scale),
               nullptr,
               nullptr,
               a.kv_len ? as_gpu(*a.kv_len).data() : nullptr,
               a.kv_len ? a.kv_len->dtype() : DType::I64,
               int64_t(a.kv_len_offset),
               a.kv_len_stride,
               out,
               true};
  const int64_t rows = int64_t(d.group) * d.t_q;
  // The streaming kernel where it fits (d == dv, rows within kStreamRows); Options::decode_attn
  // (WICK_DECODE_ATTN) runs keeps the runs kernel and stream takes the streaming one for every row
  // count, neither taking the tensor-core kernel: the tests run each kernel on every shape.
  const backend::Options& opt = backend::options();
  const int mode = opt.decode_attn == backend::DecodeAttn::Runs     ? 0
                   : opt.decode_attn == backend::DecodeAttn::Stream ? 2
                                                                    : 1;
  // More rows per KV head (the 1.1B shape's 8) take it (groups of kStreamGroup) once the cache is
  // longer than one run (H200: 1.1B tg128 @ d8192 +6-9% over the runs kernel, both with the wide
  // merge); a cache of one run keeps the runs kernel, which then needs no merge at all. Up to
  // kStreamRows rows stream at every length: the runs kernel's single run over a short cache (no
  // merge kernel) was 1.6-2.9% slower at 7B tg128 (H200, `wick bench-llm FILE -p 0 -n 128`).
  const bool stream = mode != 0 && d.d == d.dv && (mode == 2 || rows <= kStreamRows || a.t_kv > size_t(kKeys));
  // Options::decode_merge_all (WICK_DECODE_MERGE=all): the merge kernel finishes every row, one run
  // or many, as the tests' check of the merge on short caches.
  d.direct = !opt.decode_merge_all;
  const int stream_rows = rows <= 1 ? 1 : kStreamGroup;
  const int64_t row_groups = stream ? (rows + stream_rows - 1) / stream_rows : 1;
  dispatch_float(dt, "attention", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      void (*kern)(DecodeArgs) = decode_runs_kernel<T>;
      int block = kDecBlock;
      size_t smem = 0;
      bool mma = false;
      // Runs sized on the device: as many as fill every SM once with the blocks it can hold (per_run
      // blocks each), never shorter than min_run keys (run_of spreads the keys).
      auto fill_runs = [&](int64_t per_run, int min_run) {
        const int sms = std::max(1, context(ordinal).prop.multiProcessorCount);
        const int64_t most = (int64_t(a.t_kv) + min_run - 1) / min_run;
        const int fit = resident_blocks(ordinal, reinterpret_cast<const void*>(kern), block, smem);
        d.splits = int(std::clamp<int64_t>(int64_t(sms) * fit / per_run, 1, most));
        d.run = min_run;
        d.dyn_runs = true;
      };
#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
      // More than kStreamRows rows per KV head (the 1.1B shape's 8), d == dv in {64, 128}: the
      // tensor-core kernel at every length, one block per run for all the head's rows (H100, `wick
      // bench-llm FILE -p 0 -n 128` against the stream and runs kernels: 1.1B F16 tg128 +3%, at 8,192
      // keys +5%).
      if (mode == 1 && d.d == d.dv && (d.d == 64 || d.d == 128) && rows > kStreamRows && rows <= kMmaMaxRows) {
        kern = mma_kernel<T>(d.d);
        smem = mma_smem_bytes(d.d);
        mma = mma_ready(ordinal, reinterpret_cast<const void*>(kern), smem);
        if (!mma) {
          kern = decode_runs_kernel<T>;
          smem = 0;
        }
      }
#endif
      if (mma) {
        block = kMmaWarps * 32;
        fill_runs(int64_t(a.b) * d.h_kv, tune::kAttnDecodeMmaMinRun);
      } else if (stream) {
        const bool ring = stream_ring(ordinal, opt.decode_registers);
        kern = stream_rows == 1 ? stream_kernel<T, 1>(ring) : stream_kernel<T, kStreamGroup>(ring);
        block = kStreamBlock;
        smem = ring ? stream_ring_bytes(block) : 0;
        allow_smem(ordinal, reinterpret_cast<const void*>(kern), smem);
        fill_runs(int64_t(a.b) * d.h_kv * row_groups, kStreamMinRun);
        const int64_t one_run =
            opt.decode_one_run_keys >= 0 ? opt.decode_one_run_keys : int64_t(tune::kAttnDecodeOneRunKeys);
        if (int64_t(a.t_kv) <= one_run) d.splits = 1;  // one run a row group, no merge kernel
      } else {
        d.splits = int((int64_t(a.t_kv) + kKeys - 1) / kKeys);
      }
      const int64_t runs = int64_t(a.b) * d.h_kv * d.splits * rows;
      Scratch o_buf(ordinal, size_t(runs) * size_t(d.dv) * sizeof(float));
      Scratch ml_buf(ordinal, size_t(runs) * 2 * sizeof(float));
      d.part_o = static_cast<float*>(o_buf.b.ptr);
      d.part_ml = static_cast<float*>(ml_buf.b.ptr);
      // At least one block per row, for the rows of a one-run context to spread over (the tensor-core
      // kernel: one block per run, every row).
      const int64_t gx = mma ? int64_t(d.splits) : std::max<int64_t>(rows, d.splits * row_groups);
      launch_kernel(kern, dim3(unsigned(gx), unsigned(d.h_kv), unsigned(a.b)), block, smem, ctx.stream, d);
      check_launch("attention(decode runs)");
      // One run per row (t_kv <= kKeys, or the streaming kernel's single run, which run_of sizes to
      // the length): every row is written by its run's block and the merge would return at once,
      // so it is not launched (a recorded step over a short cache view: one kernel fewer a layer).
      if (d.direct && d.splits == 1) return;
      const unsigned merge_grid = unsigned(int64_t(a.b) * d.h_kv * rows);
      if (d.splits >= tune::kAttnDecodeWideMergeRuns) {
        launch_kernel(decode_merge_wide_kernel<T>, merge_grid, kDecBlock, 0, ctx.stream, d);
      } else {
        const int merge_block = d.dv <= 64 ? 64 : d.dv <= 128 ? 128 : 256;
        launch_kernel(decode_merge_kernel<T>, merge_grid, merge_block, 0, ctx.stream, d);
      }
      check_launch("attention(decode merge)");
    }
  });
}

}  // namespace wick::gpu

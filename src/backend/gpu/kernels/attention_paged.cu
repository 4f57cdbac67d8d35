// fast::paged_attention (wick/fast.hpp): the batch's k and v rows into a paged cache, then attention of
// each (token, q head) over its sequence's keys read through the block table. Two kernels: the write, one
// thread per element; the attention, one wave per query row: a lane scores one key of each run of
// wave-size keys (its dot product over d from q in shared memory), the wave takes the run's max and sum
// (the online softmax in f32), and the lanes add the run's p V over their share of d_v. Lane-level steps
// stay inside a wave and take its width (32 or 64), and values pass between lanes through shared memory,
// so AMD's waves run it as they are. The host pass does not know the device's wave width (it is 32 there
// for every target), so the launch assumes the most waves a block can hold (32-lane ones) and the
// smallest rows-per-block: a block of 64-lane waves walks its rows in two rounds.
// Long sequences with few query rows (a decode step of one or a few sequences) split the keys: each
// split's wave leaves its unnormalised sum, max and total in scratch, and a third kernel merges them.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/positions.hpp"
#include "ops/unary.hpp"  // fmath::exp

namespace wick::gpu {

namespace {

constexpr int kPagedBlock = 128;              // threads: 4 waves of 32, 2 of 64
constexpr int kPagedMaxDv = 256;              // d_v held in registers, kPagedMaxDv / wave size per lane
constexpr int kPagedRows = kPagedBlock / 32;  // query rows per block (the host's count; see above)
// Keys per split, and the query rows x splits a launch aims at: splits only where rows alone leave the
// GPU idle (an H100 runs 132 SMs x 16 waves of this kernel at once).
constexpr int64_t kSplitKeys = 512, kTargetWaves = 2048;

struct PagedParams {
  int64_t t, h_q, group, d, d_v, kcols, vcols, rows, n_seqs, max_blocks, block_size, n_blocks, window;
  float scale;
  int64_t n_splits, split_keys;  // splits of each row's keys; part: (t * h_q, n_splits, d_v + 2) floats
};

template <class T, class CT>
__global__ void paged_write_kernel(const T* WICK_RESTRICT k, const T* WICK_RESTRICT v, CT* kc, CT* vc,
                                   const int32_t* WICK_RESTRICT slot, PagedParams p) {
  kernel_entry();
  const int64_t n = p.t * (p.kcols + p.vcols);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (i < p.t * p.kcols) {
      const int64_t tok = i / p.kcols, c = i % p.kcols, row = pos::paged_index(slot[tok], p.rows);
      kc[row * p.kcols + c] = cast<CT>(float(to_compute(k[i])));
    } else {
      const int64_t j = i - p.t * p.kcols, tok = j / p.vcols, c = j % p.vcols,
                    row = pos::paged_index(slot[tok], p.rows);
      vc[row * p.vcols + c] = cast<CT>(float(to_compute(v[j])));
    }
  }
}

// Query row rr (token i, q head rr % h_q) over its sequence's keys, by one wave.
template <class T, class CT>
__device__ __forceinline__ void attend_row(const T* WICK_RESTRICT q, const CT* WICK_RESTRICT kc,
                                           const CT* WICK_RESTRICT vc, T* WICK_RESTRICT out,
                                           const int32_t* WICK_RESTRICT seq, const int32_t* WICK_RESTRICT pos_,
                                           const int32_t* WICK_RESTRICT table, const PagedParams& p, int64_t rr,
                                           int64_t split, float* WICK_RESTRICT part, float* qs, float* ps, int64_t* rs,
                                           int lane) {
  constexpr int kPerLane = kPagedMaxDv / kWarpSize;
  const int64_t i = rr / p.h_q, hk = (rr % p.h_q) / p.group;
  const int32_t* trow = table + pos::paged_index(seq[i], p.n_seqs) * p.max_blocks;
  const int64_t key = pos::paged_index(pos_[i], p.max_blocks * p.block_size);
  // This split's keys [first, last]; empty (first > last) for a split past a short sequence's keys.
  const int64_t first = pos::paged_first_key(key, p.window) + split * p.split_keys;
  const int64_t last = first + p.split_keys - 1 < key ? first + p.split_keys - 1 : key;
  for (int64_t e = lane; e < p.d; e += kWarpSize) qs[e] = float(to_compute(q[rr * p.d + e])) * p.scale;
  wave_sync();
  float acc[kPerLane];
  for (int e = 0; e < kPerLane; ++e) acc[e] = 0.0f;
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  for (int64_t j0 = first; j0 <= last; j0 += kWarpSize) {
    const int64_t j = j0 + lane;
    float s = -std::numeric_limits<float>::infinity();
    int64_t row = 0;
    if (j <= last) {
      row = pos::paged_row(trow, j, p.block_size, p.n_blocks);
      const CT* kr = kc + row * p.kcols + hk * p.d;
      s = 0.0f;
      for (int64_t e = 0; e < p.d; ++e) s += qs[e] * float(to_compute(kr[e]));
    }
    const float run_max = warp_reduce(s, [](float a, float b) { return a > b ? a : b; });
    const float nm = m > run_max ? m : run_max;
    const float corr = fmath::exp(m - nm);  // 0 on the first run (m = -inf)
    const float pj = j <= last ? fmath::exp(s - nm) : 0.0f;
    l = l * corr + warp_reduce(pj, [](float a, float b) { return a + b; });
    for (int e = 0; e < kPerLane; ++e) acc[e] *= corr;
    m = nm;
    ps[lane] = pj;
    rs[lane] = row;
    wave_sync();
    const int64_t n = last - j0 + 1 < kWarpSize ? last - j0 + 1 : kWarpSize;
    for (int64_t kk = 0; kk < n; ++kk) {
      const float pk = ps[kk];
      const CT* vr = vc + rs[kk] * p.vcols + hk * p.d_v;
      for (int e = 0; e < kPerLane; ++e) {
        const int64_t c = lane + int64_t(e) * kWarpSize;
        if (c < p.d_v) acc[e] += pk * float(to_compute(vr[c]));
      }
    }
    wave_sync();  // before the next run overwrites ps and rs
  }
  if (p.n_splits == 1) {
    for (int e = 0; e < kPerLane; ++e) {
      const int64_t c = lane + int64_t(e) * kWarpSize;
      if (c < p.d_v) out[rr * p.d_v + c] = cast<T>(acc[e] / l);
    }
  } else {
    float* o = part + (rr * p.n_splits + split) * (p.d_v + 2);  // acc, then m and l (m -inf, l 0: no keys)
    for (int e = 0; e < kPerLane; ++e) {
      const int64_t c = lane + int64_t(e) * kWarpSize;
      if (c < p.d_v) o[c] = acc[e];
    }
    if (lane == 0) {
      o[p.d_v] = m;
      o[p.d_v + 1] = l;
    }
  }
  wave_sync();  // the next row overwrites qs
}

template <class T, class CT>
__global__ void __launch_bounds__(kPagedBlock) paged_attention_kernel(
    const T* WICK_RESTRICT q, const CT* WICK_RESTRICT kc, const CT* WICK_RESTRICT vc, T* WICK_RESTRICT out,
    const int32_t* WICK_RESTRICT seq, const int32_t* WICK_RESTRICT pos_, const int32_t* WICK_RESTRICT table,
    float* WICK_RESTRICT part, PagedParams p) {
  kernel_entry();
  constexpr int kWaves = kPagedBlock / kWarpSize;
  extern __shared__ float smem[];
  const int wave = int(threadIdx.x) / kWarpSize, lane = int(threadIdx.x) % kWarpSize;
  float* qs = smem + wave * p.d;                                     // q * scale
  float* ps = smem + kWaves * p.d + wave * kWarpSize;                // a run's p
  int64_t* rs = reinterpret_cast<int64_t*>(smem + kWaves * (p.d + kWarpSize)) + wave * kWarpSize;  // its rows
  // Rows of this block, kWaves at a time; a wave's rows are uniform across its lanes.
  for (int64_t rr = int64_t(blockIdx.x) * kPagedRows + wave;
       rr < (int64_t(blockIdx.x) + 1) * kPagedRows && rr < p.t * p.h_q; rr += kWaves)
    attend_row(q, kc, vc, out, seq, pos_, table, p, rr, int64_t(blockIdx.y), part, qs, ps, rs, lane);
}

// out[rr, c] from the splits' parts: each rescaled to the largest max, summed, over the summed totals.
template <class T>
__global__ void paged_merge_kernel(const float* WICK_RESTRICT part, T* WICK_RESTRICT out, PagedParams p) {
  kernel_entry();
  const int64_t n = p.t * p.h_q * p.d_v, w = p.d_v + 2;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t rr = i / p.d_v, c = i % p.d_v;
    const float* r = part + rr * p.n_splits * w;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t sp = 0; sp < p.n_splits; ++sp) mx = r[sp * w + p.d_v] > mx ? r[sp * w + p.d_v] : mx;
    float num = 0.0f, den = 0.0f;
    for (int64_t sp = 0; sp < p.n_splits; ++sp) {
      const float l = r[sp * w + p.d_v + 1];
      if (l == 0.0f) continue;  // a split with no keys
      const float f = fmath::exp(r[sp * w + p.d_v] - mx);
      num += f * r[sp * w + c];
      den += f * l;
    }
    out[i] = cast<T>(num / den);
  }
}

}  // namespace

StoragePtr GpuStorage::paged_attention(const PagedAttention& a) const {
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), a.t * a.h_q * a.d_v, dtype_);
  if (a.t == 0) return out;
  const char* op = "paged_attention";
  if (a.d_v > size_t(kPagedMaxDv) || a.d > 1024)
    throw Error(ErrorKind::Unsupported, std::string(op) + ": head dims up to d 1024 and d_v " +
                                            std::to_string(kPagedMaxDv) + " on a GPU, got d " + std::to_string(a.d) +
                                            ", d_v " + std::to_string(a.d_v) + "; run it on the CPU");
  PagedParams p{int64_t(a.t),
                int64_t(a.h_q),
                int64_t(a.h_q / a.h_kv),
                int64_t(a.d),
                int64_t(a.d_v),
                int64_t(a.h_kv * a.d),
                int64_t(a.h_kv * a.d_v),
                int64_t(a.rows),
                int64_t(a.n_seqs),
                int64_t(a.max_blocks),
                int64_t(a.block_size),
                int64_t(a.rows / a.block_size),
                int64_t(a.window),
                float(a.scale),
                1,
                kSplitKeys};
  // The most keys a row may see (the table's width, or the window), in splits of kSplitKeys, as many
  // as the launch's waves call for.
  const int64_t span =
      a.window > 0 ? std::min(int64_t(a.window), p.max_blocks * p.block_size) : p.max_blocks * p.block_size;
  const int64_t rows_q = p.t * p.h_q;
  p.n_splits = std::max<int64_t>(
      1, std::min((span + kSplitKeys - 1) / kSplitKeys, std::min<int64_t>(65535, kTargetWaves / rows_q)));
  const int32_t* slot = as_gpu(*a.slot).template ptr<int32_t>() + a.slot_offset;
  const int32_t* seq = as_gpu(*a.seq).template ptr<int32_t>() + a.seq_offset;
  const int32_t* pos = as_gpu(*a.pos).template ptr<int32_t>() + a.pos_offset;
  const int32_t* table = as_gpu(*a.table).template ptr<int32_t>() + a.table_offset;
  return dispatch_float(dtype_, op, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      throw Error(ErrorKind::DType, std::string(op) + ": q of f64");
    } else {
      return dispatch_float(a.cache_dtype, op, [&](auto ctag) -> StoragePtr {
        using CT = decltype(ctag);
        if constexpr (std::is_same_v<CT, double>) {
          throw Error(ErrorKind::DType, std::string(op) + ": caches of f64");
        } else {
          CT* kc = as_gpu(*a.k_cache).template ptr<CT>() + a.k_cache_offset;
          CT* vc = as_gpu(*a.v_cache).template ptr<CT>() + a.v_cache_offset;
          const int64_t n = p.t * (p.kcols + p.vcols);
          launch_kernel(paged_write_kernel<T, CT>, grid_for(n), kBlock, 0, stream(),
                        as_gpu(*a.k).template ptr<T>(), as_gpu(*a.v).template ptr<T>(), kc, vc, slot, p);
          check_launch(op);
          // Shared memory for the larger of the two wave layouts (the kernel's qs, ps and rs per wave).
          const auto layout = [&](size_t lanes) {
            const size_t waves = kPagedBlock / lanes;
            return waves * (size_t(p.d) + lanes) * sizeof(float) + waves * lanes * sizeof(int64_t);
          };
          const size_t smem = std::max(layout(32), layout(64));
          allow_dynamic_smem(reinterpret_cast<const void*>(paged_attention_kernel<T, CT>), smem, op);
          const dim3 grid(unsigned((p.t * p.h_q + kPagedRows - 1) / kPagedRows), unsigned(p.n_splits));
          std::shared_ptr<GpuStorage> part;
          if (p.n_splits > 1) part = new_storage(ordinal(), size_t(p.t * p.h_q * p.n_splits * (p.d_v + 2)), DType::F32);
          float* pp = part ? part->template ptr<float>() : nullptr;
          launch_kernel(paged_attention_kernel<T, CT>, grid, kPagedBlock, smem, stream(), ptr<T>(), kc, vc,
                        out->template ptr<T>(), seq, pos, table, pp, p);
          check_launch(op);
          if (part) {
            launch_kernel(paged_merge_kernel<T>, grid_for(p.t * p.h_q * p.d_v), kBlock, 0, stream(), pp,
                          out->template ptr<T>(), p);
            check_launch(op);
          }
          return out;
        }
      });
    }
  });
}

}  // namespace wick::gpu

// fast::paged_attention (wick/fast.hpp): the batch's k and v rows into a paged cache, then attention of
// each (token, q head) over its sequence's keys read through the block table. Two kernels: the write, one
// thread per element; the attention, one wave per query row: a lane scores one key of each run of
// wave-size keys (its dot product over d from q in shared memory), the wave takes the run's max and sum
// (the online softmax in f32), and the lanes add the run's p V over their share of d_v. Lane-level steps
// stay inside a wave and take its width (32 or 64), and values pass between lanes through shared memory,
// so AMD's waves run it as they are.
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

constexpr int kPagedBlock = 128;  // threads: 4 waves of 32, 2 of 64
constexpr int kPagedMaxDv = 256;  // d_v held in registers, kPagedMaxDv / wave size per lane

struct PagedParams {
  int64_t t, h_q, group, d, d_v, kcols, vcols, rows, n_seqs, max_blocks, block_size, n_blocks, window;
  float scale;
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

template <class T, class CT>
__global__ void __launch_bounds__(kPagedBlock) paged_attention_kernel(
    const T* WICK_RESTRICT q, const CT* WICK_RESTRICT kc, const CT* WICK_RESTRICT vc, T* WICK_RESTRICT out,
    const int32_t* WICK_RESTRICT seq, const int32_t* WICK_RESTRICT pos_, const int32_t* WICK_RESTRICT table,
    PagedParams p) {
  kernel_entry();
  constexpr int kWaves = kPagedBlock / kWarpSize, kPerLane = kPagedMaxDv / kWarpSize;
  extern __shared__ float smem[];
  const int wave = int(threadIdx.x) / kWarpSize, lane = int(threadIdx.x) % kWarpSize;
  float* qs = smem + wave * p.d;                                     // q * scale
  float* ps = smem + kWaves * p.d + wave * kWarpSize;                // a run's p
  int64_t* rs = reinterpret_cast<int64_t*>(smem + kWaves * (p.d + kWarpSize)) + wave * kWarpSize;  // its rows
  const int64_t rr = int64_t(blockIdx.x) * kWaves + wave;
  if (rr >= p.t * p.h_q) return;  // the whole wave leaves together
  const int64_t i = rr / p.h_q, hk = (rr % p.h_q) / p.group;
  const int32_t* trow = table + pos::paged_index(seq[i], p.n_seqs) * p.max_blocks;
  const int64_t last = pos::paged_index(pos_[i], p.max_blocks * p.block_size), first = pos::paged_first_key(last, p.window);
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
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t c = lane + int64_t(e) * kWarpSize;
    if (c < p.d_v) out[rr * p.d_v + c] = cast<T>(acc[e] / l);
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
  const PagedParams p{int64_t(a.t),
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
                      float(a.scale)};
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
          constexpr int kWaves = kPagedBlock / kWarpSize;
          const size_t smem = size_t(kWaves) * (size_t(p.d) + kWarpSize) * sizeof(float) +
                              size_t(kWaves) * kWarpSize * sizeof(int64_t);
          allow_dynamic_smem(reinterpret_cast<const void*>(paged_attention_kernel<T, CT>), smem, op);
          const unsigned grid = unsigned((p.t * p.h_q + kWaves - 1) / kWaves);
          launch_kernel(paged_attention_kernel<T, CT>, grid, kPagedBlock, smem, stream(), ptr<T>(), kc, vc,
                        out->template ptr<T>(), seq, pos, table, p);
          check_launch(op);
          return out;
        }
      });
    }
  });
}

}  // namespace wick::gpu

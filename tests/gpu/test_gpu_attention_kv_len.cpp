// attention_kv_len on the GPU against the CPU's attention() on each batch's first L keys: the
// decode kernel reading the lengths on the device (f16/bf16, one token of a 32-on-4-head model,
// a 1100-key cache, lengths at and around the 256-key runs), and the shapes that read the lengths
// to the host (f32, many query rows).
#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::values;

namespace {

Device gpu() { return Device::gpu(0); }

// The CPU reference: attention() per batch on k/v narrowed to lens[b] keys, in q's dtype.
std::vector<double> reference(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& lens,
                              bool causal) {
  std::vector<double> out;
  for (size_t b = 0; b < q.dim(0); ++b) {
    const int64_t bi = int64_t(b);
    const size_t n = size_t(lens[b]);
    std::vector<double> r = values(attention(q.narrow(0, bi, 1), k.narrow(0, bi, 1).narrow(2, 0, n),
                                             v.narrow(0, bi, 1).narrow(2, 0, n), causal));
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

// Both compute in f32 and round once to the half type, summing in other orders: a unit or two of
// the last place apart.
double tol(DType dt) { return dt == DType::BF16 ? 1.6e-2 : dt == DType::F16 ? 2e-3 : 1e-5; }

// q_scale widens the scores (a run's maximum moves a lot from key to key: the online rescaling);
// nan_key puts a NaN in that key of batch 0, KV head 0 (its rows come out NaN, as on the CPU).
void check(DType dt, size_t b, size_t hq, size_t hkv, size_t tq, size_t d, size_t cap,
           const std::vector<std::vector<int32_t>>& len_sets, uint64_t seed, double q_scale = 1.0,
           int64_t nan_key = -1) {
  Tensor q = (Tensor::randn({b, hq, tq, d}, DType::F32, Device::cpu(), seed) * q_scale).to_dtype(dt);
  Tensor k = Tensor::randn({b, hkv, cap, d}, DType::F32, Device::cpu(), seed + 1).to_dtype(dt);
  Tensor v = Tensor::randn({b, hkv, cap, d}, DType::F32, Device::cpu(), seed + 2).to_dtype(dt);
  if (nan_key >= 0) {
    std::vector<double> kf = values(k);
    kf[size_t(nan_key) * d + 3] = std::nan("");
    k = Tensor::from_vector(kf, {b, hkv, cap, d}).to_dtype(dt);
  }
  Tensor qg = q.to_device(gpu()), kg = k.to_device(gpu()), vg = v.to_device(gpu());
  for (bool causal : {false, true})
    for (const auto& lens : len_sets) {
      Tensor lg = Tensor::from_vector(lens, {lens.size()}, gpu());
      std::string what = std::string(dtype_name(dt)) + " d " + std::to_string(d) + " t_q " + std::to_string(tq) +
                         (causal ? " causal" : "") + " lens";
      for (int32_t l : lens) what += " " + std::to_string(l);
      EXPECT_TRUE(all_close(attention_kv_len(qg, kg, vg, lg, causal), reference(q, k, v, lens, causal), tol(dt),
                            tol(dt)))
          << what;
    }
}

TEST(GpuAttentionKvLen, DecodeKernelLengthsAroundRuns) {
  for (DType dt : {DType::F16, DType::BF16})
    for (size_t d : {64, 128})
      check(dt, 1, 32, 4, 1, d, 1100, {{1}, {2}, {255}, {256}, {257}, {511}, {513}, {1099}, {1100}}, 80 + d);
}

// Fewer rows per KV head: one token of a multi-head model (1 row), of a 2-group model, and three
// tokens of a multi-head one (the causal limit differs per row).
TEST(GpuAttentionKvLen, DecodeKernelFewRows) {
  const std::vector<std::vector<int32_t>> lens = {{1}, {3}, {255}, {256}, {257}, {700}, {1100}};
  for (DType dt : {DType::F16, DType::BF16})
    for (size_t d : {64, 128}) {
      check(dt, 1, 8, 8, 1, d, 1100, lens, 110 + d);
      check(dt, 1, 8, 4, 1, d, 1100, lens, 120 + d);
      check(dt, 2, 4, 4, 3, d, 1100, {{3, 1100}, {257, 700}, {5, 256}}, 130 + d);
    }
  // The narrowest and widest key rows the kernels take: 4 and 32 lanes per key.
  for (DType dt : {DType::F16, DType::BF16})
    for (size_t d : {32, 256}) {
      check(dt, 1, 4, 4, 1, d, 700, {{1}, {33}, {700}}, 160 + d);
      check(dt, 1, 4, 2, 1, d, 700, {{2}, {300}, {699}}, 170 + d);
    }
}

// 5 to 8 query rows per KV head in other ways than one token of an 8-head group (the tensor-core
// kernel's shapes on NVIDIA sm_80+, the others elsewhere): 2 tokens of a 4-head group in 2 batches (8
// rows, causal limits that differ per row), 3 tokens of a 2-head group (6 rows, d 128) and one token of
// a 5-head group; lengths around and past one run (256 keys for the runs kernel, at least 128 for the
// tensor-core one).
TEST(GpuAttentionKvLen, DecodeKernelGroupedRows) {
  for (DType dt : {DType::F16, DType::BF16}) {
    check(dt, 2, 8, 2, 2, 64, 1100, {{2, 1100}, {300, 33}, {257, 512}}, 190);
    check(dt, 1, 4, 2, 3, 128, 1100, {{3}, {255}, {700}, {1100}}, 191);
    check(dt, 1, 10, 2, 1, 64, 700, {{1}, {256}, {700}}, 192);
  }
}

// Scores spread wide (q x 8) and a NaN key, for 1, 2 and 8 rows per KV head (both kernels).
TEST(GpuAttentionKvLen, DecodeKernelWideScoresAndNaN) {
  for (DType dt : {DType::F16, DType::BF16})
    for (size_t hkv : {8, 4, 1}) {
      check(dt, 1, 8, hkv, 1, 128, 1100, {{40}, {600}, {1100}}, 140 + hkv, 8.0);
      check(dt, 1, 8, hkv, 1, 128, 1100, {{40}, {300}, {299}, {1100}}, 150 + hkv, 1.0, 299);
    }
}

// A cache of 4,200 rows: 17 runs of 256 keys for the 8-row kernel, and more for the streaming one,
// so the merge that splits the runs over its threads (decode_merge_wide_kernel) takes these rows.
TEST(GpuAttentionKvLen, DecodeKernelManyRuns) {
  const std::vector<std::vector<int32_t>> lens = {{1}, {300}, {3841}, {4097}, {4200}};
  for (DType dt : {DType::F16, DType::BF16}) {
    check(dt, 1, 32, 4, 1, 64, 4200, lens, 180);
    check(dt, 1, 8, 8, 1, 128, 4200, lens, 181);
    check(dt, 1, 4, 4, 1, 256, 4200, {{4200}}, 182);  // dv 256: one slice of runs per column
  }
}

TEST(GpuAttentionKvLen, DecodeKernelPerBatchLengths) {
  for (DType dt : {DType::F16, DType::BF16}) {
    check(dt, 2, 32, 4, 1, 128, 1100, {{1, 1100}, {257, 255}, {700, 3}}, 90);
    check(dt, 3, 8, 2, 2, 64, 600, {{2, 300, 600}}, 91);  // two tokens per KV head group of 4
  }
}

// Taken by the decode kernel on lengths alone: the same tensors with kv_len at t_kv give attention().
TEST(GpuAttentionKvLen, FullLengthIsAttention) {
  Tensor q = Tensor::randn({1, 32, 1, 128}, DType::F32, Device::cpu(), 95).to_dtype(DType::F16).to_device(gpu());
  Tensor k = Tensor::randn({1, 4, 300, 128}, DType::F32, Device::cpu(), 96).to_dtype(DType::F16).to_device(gpu());
  Tensor v = Tensor::randn({1, 4, 300, 128}, DType::F32, Device::cpu(), 97).to_dtype(DType::F16).to_device(gpu());
  Tensor full = Tensor::full({1}, 300, DType::I64, gpu());
  EXPECT_TRUE(all_close(attention_kv_len(q, k, v, full, true), values(attention(q, k, v, true)), 2e-3, 2e-3));
}

// The other paths: f32 (the GEMM path) and many query rows (flash / GEMM), lengths read to the host.
TEST(GpuAttentionKvLen, FallbackPaths) {
  check(DType::F32, 1, 32, 4, 1, 128, 1100, {{1}, {256}, {257}, {1100}}, 100);
  check(DType::F32, 2, 8, 2, 1, 64, 600, {{1, 600}, {300, 7}}, 101);
  check(DType::F16, 2, 4, 2, 70, 64, 300, {{70, 300}, {150, 90}}, 102);    // flash on sm_80+
  check(DType::BF16, 2, 4, 4, 9, 32, 100, {{9, 100}, {50, 20}}, 103);      // 9 query rows per KV head
  check(DType::F64, 2, 4, 2, 3, 16, 40, {{3, 40}, {17, 5}}, 104);
}

TEST(GpuAttentionKvLen, Errors) {
  Tensor q = Tensor::zeros({1, 2, 1, 8}, DType::F16, gpu());
  EXPECT_THROW(attention_kv_len(q, q, q, Tensor::full({1}, 1, DType::I32)), Error);  // kv_len on the CPU
  EXPECT_THROW(attention_kv_len(q, q, q, Tensor::full({1}, 1, DType::F32, gpu())), Error);
}

}  // namespace

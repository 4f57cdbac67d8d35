// wick::Graph on a GPU: work recorded once, replayed on new inputs written in place; the recording's
// memory kept from everything else; a body that waits for the device refused with an Error and the
// device usable afterwards. Expected values are written out by hand / host loops here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "wick/fast.hpp"
#include "wick/wick.hpp"

using namespace wick;

namespace {

Device gpu() { return Device::gpu(0); }

std::vector<float> vals(const Tensor& t) { return t.to_dtype(DType::F32).to_vector<float>(); }

}  // namespace

TEST(GpuGraph, ReplayReadsInputsWrittenInPlace) {
  const Device d = gpu();
  Tensor x = Tensor::zeros({4}, DType::F32, d);
  Tensor y;
  // y = sum(exp(0) * (x * 2 + 1)) ... written as a few ops so intermediates exist.
  Graph g = Graph::capture(d, [&] { y = x.mul(2.0).add(1.0).sum({0}, false); });
  EXPECT_TRUE(g.recorded());
  for (float base : {0.0f, 1.0f, 10.0f}) {
    std::vector<float> in = {base, base + 1, base + 2, base + 3};
    x.copy_from(Tensor::from_vector(in, {4}, d));
    g.replay();
    float want = 0;
    for (float v : in) want += v * 2 + 1;
    EXPECT_FLOAT_EQ(vals(y)[0], want) << "base " << base;
  }
}

TEST(GpuGraph, IntermediatesAreNotHandedToOtherTensors) {
  const Device d = gpu();
  const size_t n = 1 << 16;
  Tensor x = Tensor::from_vector(std::vector<float>(n, 1.0f), {n}, d);
  Tensor y;
  // The body's intermediate (x + 1) is freed inside it: its block belongs to the graph.
  Graph g = Graph::capture(d, [&] { y = x.add(1.0).mul(3.0); });
  // Same size as the intermediate: from the shared cache it would be that block.
  Tensor z = Tensor::from_vector(std::vector<float>(n, 7.0f), {n}, d);
  g.replay();
  g.replay();
  const auto zv = vals(z), yv = vals(y);
  for (size_t i = 0; i < n; i += 4097) {
    EXPECT_EQ(zv[i], 7.0f) << i;
    EXPECT_EQ(yv[i], 6.0f) << i;
  }
}

TEST(GpuGraph, DynamicSliceSetAndKvLengthAttentionReplay) {
  // A toy decode step: write row `pos` of a cache, attend over the first pos + 1 rows. Keys are all
  // equal per row, so the output is the mean of the visible v rows (hand math below).
  const Device d = gpu();
  const size_t cap = 300, dim = 64;
  Tensor kc = Tensor::zeros({1, 1, cap, dim}, DType::F16, d), vc = Tensor::zeros({1, 1, cap, dim}, DType::F16, d);
  Tensor k_in = Tensor::zeros({1, 1, 1, dim}, DType::F16, d), v_in = Tensor::zeros({1, 1, 1, dim}, DType::F16, d);
  Tensor q = Tensor::zeros({1, 1, 1, dim}, DType::F16, d);
  Tensor step = Tensor::zeros({2}, DType::U32, d), out;
  Graph g = Graph::capture(d, [&] {
    kc.slice_set(k_in, 2, step.narrow(0, 0, 1));
    vc.slice_set(v_in, 2, step.narrow(0, 1, 1).sub(Tensor::ones({1}, DType::U32, d)));
    out = attention_kv_len(q, kc, vc, step.narrow(0, 1, 1), /*causal=*/true);
  });
  double sum = 0;
  for (uint32_t pos = 0; pos < 260; ++pos) {
    v_in.copy_from(Tensor::full({1, 1, 1, dim}, double(pos % 7), DType::F16, d));
    step.copy_from(Tensor::from_vector(std::vector<uint32_t>{pos, pos + 1}, {2}, d));
    g.replay();
    sum += double(pos % 7);
    if (pos % 37 == 0 || pos == 255 || pos == 256 || pos == 259) {
      const auto o = vals(out);
      EXPECT_NEAR(o[0], sum / (pos + 1), 2e-3 * (1 + sum / (pos + 1))) << "pos " << pos;
      EXPECT_NEAR(o[dim - 1], sum / (pos + 1), 2e-3 * (1 + sum / (pos + 1))) << "pos " << pos;
    }
  }
}

TEST(GpuGraph, BodyThatSynchronisesIsRefusedAndTheDeviceStaysUsable) {
  const Device d = gpu();
  Tensor x = Tensor::ones({8}, DType::F32, d);
  const size_t before = memory_stats(d).in_use;
  try {
    Graph::capture(d, [&] { (void)x.add(1.0).to_vector<float>(); });
    FAIL() << "capture of a body that reads to the host did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Graph::capture"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory_stats(d).in_use, before);  // the failed recording's pool went back
  EXPECT_EQ(vals(x.add(1.0))[3], 2.0f);       // ops run again
  Tensor y;
  Graph g = Graph::capture(d, [&] { y = x.add(2.0); });
  g.replay();
  EXPECT_EQ(vals(y)[7], 3.0f);
}

TEST(GpuGraph, DestroyingTheGraphReturnsItsMemory) {
  const Device d = gpu();
  Tensor x = Tensor::ones({1 << 14}, DType::F32, d);
  synchronize(d);
  const size_t before = memory_stats(d).in_use;
  {
    Graph g = Graph::capture(d, [&] { (void)x.exp().add(1.0).sum({0}, false); });
    g.replay();
    EXPECT_GT(memory_stats(d).in_use, before);  // intermediates are reserved while it lives
  }
  EXPECT_EQ(memory_stats(d).in_use, before);
}

TEST(GpuGraph, RopeKvAppendReplaysAtEachRow) {
  // A decode step's rope and cache append recorded once and replayed at new rows (the last past
  // the end: clamped). The q heads and both caches equal rope then two slice_set calls on the same
  // device bit for bit, and the q heads the CPU's rope within the dtype's rounding.
  const Device d = gpu();
  struct Case {
    DType dt;
    size_t hq, hkv, hd;
    bool inter;
  };
  for (const Case c : {Case{DType::F16, 32, 4, 64, true}, Case{DType::BF16, 32, 8, 128, false},
                       Case{DType::F32, 4, 2, 16, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dt)) + " hd " + std::to_string(c.hd));
    const size_t cap = 40, h = c.hq + c.hkv;
    Tensor qk = Tensor::zeros({1, h, 1, c.hd}, c.dt, d), v = Tensor::zeros({1, c.hkv, 1, c.hd}, c.dt, d);
    Tensor cs = Tensor::zeros({1, c.hd / 2}, c.dt, d), sn = Tensor::zeros({1, c.hd / 2}, c.dt, d);
    Tensor pos = Tensor::zeros({1}, DType::I32, d), q;
    Tensor kc = Tensor::zeros({1, c.hkv, cap, c.hd}, c.dt, d), vc = Tensor::zeros({1, c.hkv, cap, c.hd}, c.dt, d);
    Tensor kc2 = Tensor::zeros({1, c.hkv, cap, c.hd}, c.dt, d), vc2 = Tensor::zeros({1, c.hkv, cap, c.hd}, c.dt, d);
    Graph g = Graph::capture(d, [&] { q = fast::rope_kv_append(qk, cs, sn, c.inter, c.hq, v, kc, vc, pos); });
    for (int p : {0, 1, 17, 39, 100}) {
      const uint64_t seed = uint64_t(p) * 4 + 1;
      qk.copy_from(Tensor::randn({1, h, 1, c.hd}, c.dt, d, seed));
      v.copy_from(Tensor::randn({1, c.hkv, 1, c.hd}, c.dt, d, seed + 1));
      const Tensor ang = Tensor::rand({1, c.hd / 2}, DType::F32, d, seed + 2, 0.0, 6.0);
      cs.copy_from(ang.cos().to_dtype(c.dt));
      sn.copy_from(ang.sin().to_dtype(c.dt));
      pos.copy_from(Tensor::full({1}, p, DType::I32, d));
      g.replay();
      const Tensor r = c.inter ? qk.rope_i(cs, sn) : qk.rope(cs, sn);
      kc2.slice_set(r.narrow(1, c.hq, c.hkv), 2, pos);
      vc2.slice_set(v, 2, pos);
      EXPECT_EQ(vals(q), vals(r.narrow(1, 0, c.hq))) << "row " << p;
      EXPECT_EQ(vals(kc), vals(kc2)) << "row " << p;
      EXPECT_EQ(vals(vc), vals(vc2)) << "row " << p;
      const Device cpu = Device::cpu();
      const Tensor qc = qk.to_device(cpu), cc = cs.to_device(cpu), sc = sn.to_device(cpu);
      const std::vector<float> want = vals((c.inter ? qc.rope_i(cc, sc) : qc.rope(cc, sc)).narrow(1, 0, c.hq));
      const std::vector<float> got = vals(q);
      const double tol = c.dt == DType::F32 ? 1e-5 : c.dt == DType::F16 ? 2e-3 : 1.6e-2;
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "row " << p << " element " << i;
      // The written row: the k heads rotated; the clamped start 100 writes row 39.
      const int row = p < int(cap) ? p : int(cap) - 1;
      const std::vector<float> krow = vals(kc.narrow(2, size_t(row), 1));
      const std::vector<float> rk = vals(r.narrow(1, c.hq, c.hkv));
      EXPECT_EQ(krow, rk) << "row " << p;
    }
  }
}

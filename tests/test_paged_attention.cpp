// fast::paged_attention against the dense attention op (tests/test_nn.cpp checks it against PyTorch): each
// token's keys and values gathered by hand from the cache rows its sequence's block table names, then
// attention(q_i, K, V). Three sequences of different lengths with shuffled blocks, a prefill chunk beside
// decode tokens, grouped-query heads, d != d_v, a sliding window; every q and cache dtype (f8e4m3 against
// the rows rounded to f8e4m3); the cache rows written; indices out of range clamped; bad calls are errors;
// and the GPU (skipped without one) against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "wick/error.hpp"
#include "wick/fast.hpp"
#include "wick/tensor.hpp"

using namespace wick;

namespace {

constexpr size_t kBlock = 4, kBlocks = 12, kHq = 4, kHkv = 2, kD = 16, kDv = 8;

struct Case {
  std::vector<int32_t> table;  // 3 x 4 blocks
  std::vector<int32_t> slot, seq, pos;
  std::vector<float> q, k, v, k_cache, v_cache;
  size_t t = 0;
};

// Sequence 0 holds 9 earlier tokens and decodes one; sequence 1 prefills 6 tokens after 2; sequence 2 is new
// and prefills 3. The caches hold random rows for the earlier tokens (and everywhere else).
Case make_case(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Case c;
  c.table = {7, 2, 9, 0, 4, 11, 1, 5, 3, 8, 6, 10};
  struct Part {
    int32_t s, pos0, n;
  };
  for (const Part& pt : {Part{0, 9, 1}, Part{1, 2, 6}, Part{2, 0, 3}})
    for (int32_t i = 0; i < pt.n; ++i) {
      const int32_t p = pt.pos0 + i;
      c.seq.push_back(pt.s);
      c.pos.push_back(p);
      c.slot.push_back(c.table[size_t(pt.s) * 4 + size_t(p) / kBlock] * int32_t(kBlock) + p % int32_t(kBlock));
    }
  c.t = c.seq.size();
  auto fill = [&](std::vector<float>& x, size_t n) {
    x.resize(n);
    for (float& e : x) e = nd(rng);
  };
  fill(c.q, c.t * kHq * kD);
  fill(c.k, c.t * kHkv * kD);
  fill(c.v, c.t * kHkv * kDv);
  fill(c.k_cache, kBlocks * kBlock * kHkv * kD);
  fill(c.v_cache, kBlocks * kBlock * kHkv * kDv);
  return c;
}

// The expected output: the cache after the writes (as cdt rounds it), then per token the dense attention of
// its q row over the rows of its keys.
std::vector<float> expected(const Case& c, DType qdt, DType cdt, size_t window) {
  auto rounded = [&](const std::vector<float>& x, DType via) {
    return Tensor::from_vector(x, {x.size()}).to_dtype(via).to_dtype(DType::F32).to_vector<float>();
  };
  std::vector<float> kc = c.k_cache, vc = c.v_cache;
  const std::vector<float> kq = rounded(c.k, qdt), vq = rounded(c.v, qdt);
  for (size_t i = 0; i < c.t; ++i) {
    std::copy_n(kq.begin() + long(i * kHkv * kD), kHkv * kD, kc.begin() + long(size_t(c.slot[i]) * kHkv * kD));
    std::copy_n(vq.begin() + long(i * kHkv * kDv), kHkv * kDv, vc.begin() + long(size_t(c.slot[i]) * kHkv * kDv));
  }
  kc = rounded(kc, cdt);
  vc = rounded(vc, cdt);
  const std::vector<float> qq = rounded(c.q, qdt);
  std::vector<float> out;
  for (size_t i = 0; i < c.t; ++i) {
    const size_t p = size_t(c.pos[i]), first = window && p + 1 > window ? p + 1 - window : 0, L = p + 1 - first;
    std::vector<float> K, V;
    for (size_t j = first; j <= p; ++j) {
      const size_t row = size_t(c.table[size_t(c.seq[i]) * 4 + j / kBlock]) * kBlock + j % kBlock;
      K.insert(K.end(), kc.begin() + long(row * kHkv * kD), kc.begin() + long((row + 1) * kHkv * kD));
      V.insert(V.end(), vc.begin() + long(row * kHkv * kDv), vc.begin() + long((row + 1) * kHkv * kDv));
    }
    const Tensor q =
        Tensor::from_vector(std::vector<float>(qq.begin() + long(i * kHq * kD), qq.begin() + long((i + 1) * kHq * kD)),
                            {1, 1, kHq, kD})
            .transpose(1, 2);
    const Tensor kt = Tensor::from_vector(K, {1, L, kHkv, kD}).transpose(1, 2);
    const Tensor vt = Tensor::from_vector(V, {1, L, kHkv, kDv}).transpose(1, 2);
    const std::vector<float> o = attention(q, kt, vt).transpose(1, 2).contiguous().to_vector<float>();
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

struct Outputs {
  std::vector<float> out, k_cache, v_cache;
};

Outputs run(const Case& c, DType qdt, DType cdt, size_t window, Device dev) {
  auto t = [&](const std::vector<float>& x, Shape s, DType dt) { return Tensor::from_vector(x, s, dev).to_dtype(dt); };
  auto ids = [&](const std::vector<int32_t>& x, Shape s) { return Tensor::from_vector(x, s, dev); };
  Tensor kc = t(c.k_cache, {kBlocks * kBlock, kHkv * kD}, cdt), vc = t(c.v_cache, {kBlocks * kBlock, kHkv * kDv}, cdt);
  const Tensor o = fast::paged_attention(t(c.q, {c.t, kHq, kD}, qdt), t(c.k, {c.t, kHkv, kD}, qdt),
                                         t(c.v, {c.t, kHkv, kDv}, qdt), kc, vc, ids(c.slot, {c.t}),
                                         ids(c.table, {3, 4}), ids(c.seq, {c.t}), ids(c.pos, {c.t}), kBlock, window);
  EXPECT_EQ(o.shape(), (Shape{c.t, kHq, kDv}));
  EXPECT_EQ(o.dtype(), qdt);
  return {o.to_dtype(DType::F32).to_vector<float>(), kc.to_dtype(DType::F32).to_vector<float>(),
          vc.to_dtype(DType::F32).to_vector<float>()};
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

double bound(DType qdt) { return qdt == DType::F32 ? 1e-5 : qdt == DType::F16 ? 4e-3 : 3e-2; }

}  // namespace

TEST(PagedAttention, MatchesDenseAttentionOverGatheredKeys) {
  const Case c = make_case(7);
  for (DType qdt : {DType::F32, DType::F16, DType::BF16})
    for (DType cdt : {DType::F32, DType::F16, DType::BF16, DType::F8E4M3})
      for (size_t window : {0u, 5u}) {
        const Outputs r = run(c, qdt, cdt, window, Device::cpu());
        const double e = max_diff(r.out, expected(c, qdt, cdt, window));
        EXPECT_LE(e, bound(qdt)) << dtype_name(qdt) << " q, " << dtype_name(cdt) << " cache, window " << window;
      }
}

TEST(PagedAttention, WritesTheRowsAtTheSlots) {
  const Case c = make_case(8);
  const Outputs r = run(c, DType::F32, DType::F32, 0, Device::cpu());
  for (size_t i = 0; i < c.t; ++i)
    for (size_t e = 0; e < kHkv * kD; ++e)
      ASSERT_EQ(r.k_cache[size_t(c.slot[i]) * kHkv * kD + e], c.k[i * kHkv * kD + e]) << i;
  std::vector<bool> written(kBlocks * kBlock, false);
  for (int32_t s : c.slot) written[size_t(s)] = true;
  for (size_t row = 0; row < kBlocks * kBlock; ++row)
    if (!written[row])
      for (size_t e = 0; e < kHkv * kDv; ++e)
        ASSERT_EQ(r.v_cache[row * kHkv * kDv + e], c.v_cache[row * kHkv * kDv + e]);
}

// Slots, sequences, positions and blocks out of range are clamped, as the header says: no crash, finite output,
// a slot of -5 writes row 0 and one past the end the last row.
TEST(PagedAttention, IndicesOutOfRangeAreClamped) {
  Case c = make_case(9);
  c.slot[0] = -5;
  c.slot[1] = 1000;
  c.slot[6] = 20;  // the token whose slot was the last row writes elsewhere
  c.seq[2] = 77;
  c.pos[3] = -3;
  c.pos[4] = 1 << 30;
  c.table[5] = -2;
  c.table[6] = 500;
  const Outputs r = run(c, DType::F32, DType::F32, 0, Device::cpu());
  for (float x : r.out) ASSERT_TRUE(std::isfinite(x));
  EXPECT_EQ(r.k_cache[0], c.k[0]);
  EXPECT_EQ(r.k_cache[(kBlocks * kBlock - 1) * kHkv * kD], c.k[kHkv * kD]);
}

TEST(PagedAttention, BadCallsAreErrors) {
  const Case c = make_case(10);
  auto f = [](const std::vector<float>& x, Shape s) { return Tensor::from_vector(x, s); };
  auto i = [](const std::vector<int32_t>& x, Shape s) { return Tensor::from_vector(x, s); };
  Tensor kc = f(c.k_cache, {kBlocks * kBlock, kHkv * kD}), vc = f(c.v_cache, {kBlocks * kBlock, kHkv * kDv});
  const Tensor q = f(c.q, {c.t, kHq, kD}), k = f(c.k, {c.t, kHkv, kD}), v = f(c.v, {c.t, kHkv, kDv});
  const Tensor slot = i(c.slot, {c.t}), table = i(c.table, {3, 4}), seq = i(c.seq, {c.t}), pos = i(c.pos, {c.t});
  EXPECT_NO_THROW(fast::paged_attention(q, k, v, kc, vc, slot, table, seq, pos, kBlock));
  EXPECT_THROW(fast::paged_attention(q, k, v, kc, vc, slot.to_dtype(DType::I64), table, seq, pos, kBlock), Error);
  EXPECT_THROW(fast::paged_attention(q.to_dtype(DType::F16), k, v, kc, vc, slot, table, seq, pos, kBlock), Error);
  EXPECT_THROW(fast::paged_attention(q, k, v, kc, vc, slot, table, seq, pos, 5), Error);  // 48 rows, blocks of 5
  EXPECT_THROW(fast::paged_attention(q, k.narrow(0, 0, 2), v, kc, vc, slot, table, seq, pos, kBlock), Error);
  Tensor kt = kc.t();
  EXPECT_THROW(fast::paged_attention(q, k, v, kt, vc, slot, table, seq, pos, kBlock), Error);
  EXPECT_THROW(fast::paged_attention(q, k, v, kc, kc, slot, table, seq, pos, kBlock), Error);
  Tensor kq = kc.to_dtype(DType::I32);
  EXPECT_THROW(fast::paged_attention(q, k, v, kq, vc, slot, table, seq, pos, kBlock), Error);
}

TEST(PagedAttention, GpuMatchesCpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  const Case c = make_case(11);
  for (DType qdt : {DType::F32, DType::F16, DType::BF16})
    for (DType cdt : {DType::F32, DType::F16, DType::BF16, DType::F8E4M3})
      for (size_t window : {0u, 5u}) {
        const Outputs g = run(c, qdt, cdt, window, d), h = run(c, qdt, cdt, window, Device::cpu());
        EXPECT_LE(max_diff(g.out, expected(c, qdt, cdt, window)), bound(qdt))
            << dtype_name(qdt) << " q, " << dtype_name(cdt) << " cache, window " << window << " on " << d.name();
        EXPECT_EQ(g.k_cache, h.k_cache);
        EXPECT_EQ(g.v_cache, h.v_cache);
      }
}

// Lengths past one wave's run of keys (the online softmax across runs) and past the GPU's split of the keys
// (a decode token over 1,500 keys: 4 splits merged), 4 q heads per KV head, d = d_v = 64 as the models have,
// blocks of 16 in a shuffled table, decode tokens beside a prefill chunk, windows of 70 and 700 keys: the
// GPU against the CPU on the same inputs.
TEST(PagedAttention, GpuMatchesCpuOnLongSequences) {
  const Device dev = Device::best();
  if (dev.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  constexpr size_t bs = 16, nblk = 320, hq = 8, hkv = 2, d = 64, per_seq = 100;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<int32_t> table(3 * per_seq), slot, seq, pos;
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t((i * 37 + 11) % nblk);  // 37 is prime to 320
  struct Part {
    int32_t s, pos0, n;
  };
  for (const Part& pt : {Part{0, 1499, 1}, Part{1, 40, 25}, Part{2, 300, 1}})
    for (int32_t i = 0; i < pt.n; ++i) {
      const int32_t p = pt.pos0 + i;
      seq.push_back(pt.s);
      pos.push_back(p);
      slot.push_back(table[size_t(pt.s) * per_seq + size_t(p) / bs] * int32_t(bs) + p % int32_t(bs));
    }
  const size_t t = seq.size();
  auto rnd = [&](size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = nd(rng);
    return x;
  };
  const std::vector<float> q = rnd(t * hq * d), k = rnd(t * hkv * d), v = rnd(t * hkv * d),
                           kc0 = rnd(nblk * bs * hkv * d), vc0 = rnd(nblk * bs * hkv * d);
  for (DType qdt : {DType::F32, DType::F16})
    for (size_t window : {0u, 70u, 700u}) {
      std::vector<std::vector<float>> outs;
      for (const Device& on : {dev, Device::cpu()}) {
        auto f = [&](const std::vector<float>& x, Shape s) { return Tensor::from_vector(x, s, on).to_dtype(qdt); };
        auto ids = [&](const std::vector<int32_t>& x, Shape s) { return Tensor::from_vector(x, s, on); };
        Tensor kc = f(kc0, {nblk * bs, hkv * d}), vc = f(vc0, {nblk * bs, hkv * d});
        outs.push_back(fast::paged_attention(f(q, {t, hq, d}), f(k, {t, hkv, d}), f(v, {t, hkv, d}), kc, vc,
                                             ids(slot, {t}), ids(table, {3, per_seq}), ids(seq, {t}), ids(pos, {t}), bs,
                                             window)
                           .to_dtype(DType::F32)
                           .to_vector<float>());
      }
      EXPECT_LE(max_diff(outs[0], outs[1]), bound(qdt))
          << dtype_name(qdt) << ", window " << window << " on " << dev.name();
    }
}

// llm::Sampler against hand-computed sets and probabilities. The logits are logs of chosen
// probabilities, so softmax at temperature 1 gives them back exactly enough for the checks below.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "wick/error.hpp"
#include "test_util.hpp"
#include "wick/llm/sampler.hpp"
#include "wick/tensor.hpp"

using wick::llm::Sampler;
using wick::llm::SamplingParams;

namespace {

// id:          0     1    2     3    4     5
// probability: 0.25  0.1  0.04  0.4  0.06  0.15   (sorted: 3, 0, 5, 1, 4, 2)
std::vector<float> six_logits() {
  return {std::log(0.25f), std::log(0.1f), std::log(0.04f), std::log(0.4f), std::log(0.06f), std::log(0.15f)};
}

SamplingParams plain(double temperature = 1.0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0;
  p.min_p = 0.0;
  p.repeat_penalty = 1.0;
  return p;
}

// Draws n times, each from a fresh sampler with seed i (so seeds are exercised too), and checks
// that only the ids of `want` appear, at their probabilities within tol. tol is about 5 standard
// errors of the worst frequency: sqrt(0.25 / n) * 5.
void expect_distribution(const std::vector<float>& logits, SamplingParams p, const std::map<int32_t, double>& want,
                         size_t n = 100000, double tol = 0.008) {
  std::map<int32_t, size_t> count;
  for (size_t i = 0; i < n; ++i) {
    p.seed = 1000 + i;
    Sampler s(p);
    ++count[s.sample(logits.data(), logits.size(), {})];
  }
  for (const auto& [id, c] : count) EXPECT_TRUE(want.count(id)) << "id " << id << " drawn " << c << " times";
  for (const auto& [id, prob] : want) EXPECT_NEAR(double(count[id]) / double(n), prob, tol) << "id " << id;
}

}  // namespace

TEST(LlmSampler, GreedyIsArgmaxWithLowestIdOnTies) {
  std::vector<float> l = six_logits();
  Sampler s(plain(0.0));
  EXPECT_EQ(s.sample(l.data(), l.size(), {}), 3);
  std::vector<float> ties = {1.0f, 5.0f, 5.0f, 2.0f, 5.0f};
  EXPECT_EQ(s.sample(ties.data(), ties.size(), {}), 1);
  SamplingParams neg = plain(-1.0);
  Sampler s2(neg);
  EXPECT_EQ(s2.sample(ties.data(), ties.size(), {}), 1);
}

TEST(LlmSampler, NanCountsAsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> l = {nan, 1.0f, 0.0f, nan};
  Sampler g(plain(0.0));
  EXPECT_EQ(g.sample(l.data(), l.size(), {}), 1);
  // At temperature 1 only ids 1 and 2 can come out: e / (e + 1) and 1 / (e + 1).
  const double e = std::exp(1.0);
  expect_distribution(l, plain(1.0), {{1, e / (e + 1)}, {2, 1 / (e + 1)}}, 20000, 0.02);
}

TEST(LlmSampler, TopKOneIsGreedy) {
  std::vector<float> l = six_logits();
  SamplingParams p = plain(1.5);
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.sample(l.data(), l.size(), {}), 3);
  }
}

TEST(LlmSampler, FullSoftmaxAtTemperatureOne) {
  expect_distribution(six_logits(), plain(1.0), {{0, 0.25}, {1, 0.1}, {2, 0.04}, {3, 0.4}, {4, 0.06}, {5, 0.15}});
}

TEST(LlmSampler, TopKKeepsTheKBest) {
  SamplingParams p = plain(1.0);
  p.top_k = 2;  // {3, 0}: 0.4 / 0.65, 0.25 / 0.65
  expect_distribution(six_logits(), p, {{3, 0.4 / 0.65}, {0, 0.25 / 0.65}});
}

TEST(LlmSampler, TopPKeepsTheShortestPrefixReachingP) {
  SamplingParams p = plain(1.0);
  p.top_p = 0.7;  // cumulative 0.4, 0.65, 0.80: the third reaches 0.7 -> {3, 0, 5} renormalised by 0.8
  expect_distribution(six_logits(), p, {{3, 0.5}, {0, 0.3125}, {5, 0.1875}});
}

TEST(LlmSampler, MinPKeepsProbabilitiesAboveAFractionOfTheMax) {
  SamplingParams p = plain(1.0);
  p.min_p = 0.2;  // floor 0.2 * 0.4 = 0.08: keeps 0.4, 0.25, 0.15, 0.1 (not 0.06, 0.04); mass 0.9
  expect_distribution(six_logits(), p, {{3, 0.4 / 0.9}, {0, 0.25 / 0.9}, {5, 0.15 / 0.9}, {1, 0.1 / 0.9}});
}

TEST(LlmSampler, TopKRunsBeforeTopP) {
  SamplingParams p = plain(1.0);
  p.top_k = 3;     // {3, 0, 5}, renormalised: 0.5, 0.3125, 0.1875
  p.top_p = 0.75;  // cumulative 0.5, 0.8125: two survive. (top-p on the full vocabulary would keep three.)
  expect_distribution(six_logits(), p, {{3, 0.4 / 0.65}, {0, 0.25 / 0.65}});
}

TEST(LlmSampler, TemperatureRunsAfterMinP) {
  SamplingParams p = plain(2.0);
  p.min_p = 0.3;  // at temperature 1 the floor 0.12 keeps {3, 0, 5}; at 2 it would keep all six
  // Then probabilities proportional to sqrt(p): sqrt(0.4), sqrt(0.25), sqrt(0.15).
  const double a = std::sqrt(0.4), b = std::sqrt(0.25), c = std::sqrt(0.15), s = a + b + c;
  expect_distribution(six_logits(), p, {{3, a / s}, {0, b / s}, {5, c / s}});
}

TEST(LlmSampler, LowTemperatureSharpens) {
  SamplingParams p = plain(0.5);
  p.top_k = 2;  // probabilities proportional to p^2: 0.16 and 0.0625
  expect_distribution(six_logits(), p, {{3, 0.16 / 0.2225}, {0, 0.0625 / 0.2225}});
}

TEST(LlmSampler, TopPOnALongVocabularyKeepsTiesByLowestId) {
  // 5000 ids; the multiples of 5 (1000 ids) have logit log 2, the rest 0: masses 2/6000 and
  // 1/6000. top_p 0.3005 needs 901.5 of the first group's 3000ths -> the 902 lowest multiples of
  // 5 (ids 0 .. 4505), drawn uniformly. (Long enough for the histogram path of top-p.)
  std::vector<float> l(5000, 0.0f);
  for (size_t i = 0; i < l.size(); i += 5) l[i] = std::log(2.0f);
  SamplingParams p = plain(1.0);
  p.top_p = 0.3005;
  size_t high = 0, n = 8000;
  for (size_t i = 0; i < n; ++i) {
    p.seed = i;
    Sampler s(p);
    const int32_t id = s.sample(l.data(), l.size(), {});
    ASSERT_EQ(id % 5, 0) << id;
    ASSERT_LE(id, 4505) << id;
    high += id > 4000;
  }
  // ids 4005 .. 4505: 101 of 902 -> 0.112; 5 standard errors ~ 0.018
  EXPECT_NEAR(double(high) / double(n), 101.0 / 902.0, 0.018);

  // min_p 0.6 (floor 0.6 * p_max, above the second group's 0.5) with top_p 0.99: all 1000 multiples of 5.
  p.top_p = 0.99;
  p.min_p = 0.6;
  std::set<int32_t> seen;
  for (size_t i = 0; i < 2000; ++i) {
    p.seed = i;
    Sampler s(p);
    const int32_t id = s.sample(l.data(), l.size(), {});
    ASSERT_EQ(id % 5, 0) << id;
    seen.insert(id);
  }
  EXPECT_GT(*seen.rbegin(), 4900);
}

TEST(LlmSampler, RepetitionPenaltyDividesPositiveLogits) {
  std::vector<float> l = {2.0f, 1.8f, -0.5f, -0.4f};
  SamplingParams p = plain(0.0);
  p.repeat_penalty = 1.25;  // 2.0 / 1.25 = 1.6 < 1.8
  Sampler s(p);
  EXPECT_EQ(s.sample(l.data(), l.size(), {}), 0);
  EXPECT_EQ(s.sample(l.data(), l.size(), {0}), 1);
  EXPECT_EQ(s.sample(l.data(), l.size(), {2, 0, 3}), 1);
}

TEST(LlmSampler, RepetitionPenaltyMultipliesNegativeLogits) {
  std::vector<float> l = {-1.0f, -1.2f, -3.0f};
  SamplingParams p = plain(0.0);
  p.repeat_penalty = 1.5;  // -1.0 * 1.5 = -1.5 < -1.2 (dividing would give -0.67 and keep id 0)
  Sampler s(p);
  EXPECT_EQ(s.sample(l.data(), l.size(), {0}), 1);
}

TEST(LlmSampler, RepetitionPenaltyOncePerIdWithinTheWindow) {
  std::vector<float> l = {2.0f, 1.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  SamplingParams p = plain(0.0);
  p.repeat_penalty = 1.25;
  p.repeat_last_n = 3;
  Sampler s(p);
  // Three repeats of id 0 still penalise once: 1.6 > 1.5 (twice would be 1.28).
  EXPECT_EQ(s.sample(l.data(), l.size(), {0, 0, 0}), 0);
  // Once more with a lower rival: 1.6 < 1.7.
  std::vector<float> l2 = {2.0f, 1.7f};
  EXPECT_EQ(s.sample(l2.data(), l2.size(), {0}), 1);
  // Id 0 is outside the last 3 history ids: no penalty.
  EXPECT_EQ(s.sample(l2.data(), l2.size(), {0, 5, 6, 7}), 0);
  // Ids outside the vocabulary are ignored.
  EXPECT_EQ(s.sample(l2.data(), l2.size(), {-1, 100}), 0);
  p.repeat_last_n = 0;  // window 0: off
  Sampler off(p);
  EXPECT_EQ(off.sample(l2.data(), l2.size(), {0}), 0);
}

TEST(LlmSampler, RepetitionPenaltyShiftsTheDistribution) {
  // Logits log(0.5), log(0.5): with id 0 penalised by 2, its logit log(0.5) < 0 becomes 2 log(0.5)
  // = log(0.25), so p(0) = 0.25 / 0.75 = 1/3.
  std::vector<float> l = {std::log(0.5f), std::log(0.5f)};
  SamplingParams p = plain(1.0);
  p.repeat_penalty = 2.0;
  std::map<int32_t, size_t> count;
  const size_t n = 60000;
  for (size_t i = 0; i < n; ++i) {
    p.seed = i;
    Sampler s(p);
    ++count[s.sample(l.data(), l.size(), {0})];
  }
  EXPECT_NEAR(double(count[0]) / double(n), 1.0 / 3.0, 0.01);
}

TEST(LlmSampler, SameSeedSameSequenceOtherSeedOther) {
  std::vector<float> l(1000, 0.0f);  // uniform over 1000 ids
  SamplingParams p = plain(1.0);
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l.data(), l.size(), out));
    return out;
  };
  const std::vector<int32_t> a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 50u);  // draws are spread, not stuck
  Sampler s(p);                                                  // seed 8
  s.reseed(7);
  std::vector<int32_t> d;
  for (int i = 0; i < 64; ++i) d.push_back(s.sample(l.data(), l.size(), d));
  EXPECT_EQ(a, d);
}

TEST(LlmSampler, DrawsFollowSplitmix64) {
  // Five equal logits: the draw is floor(u * 5) for u = splitmix64 / 2^64. Rosetta Code's
  // splitmix64 task gives these counts for 100000 draws from seed 987654321.
  std::vector<float> l(5, 0.0f);
  SamplingParams p = plain(1.0);
  p.seed = 987654321;
  Sampler s(p);
  std::vector<size_t> count(5, 0);
  for (int i = 0; i < 100000; ++i) ++count[size_t(s.sample(l.data(), l.size(), {}))];
  EXPECT_EQ(count, (std::vector<size_t>{20027, 19892, 20073, 19978, 20030}));
}

TEST(LlmSampler, DefaultsKeepOnlyPlausibleTokens) {
  // Defaults (top_k 40, top_p 0.95, temperature 0.8) with min_p 0.2 on the six: top-p's cumulative
  // 0.4, 0.65, 0.8, 0.9, 0.96 drops id 2; min-p's floor 0.08 then drops id 4. The smallest kept,
  // id 1, has probability 0.1^1.25 / (0.4^1.25 + 0.25^1.25 + 0.15^1.25 + 0.1^1.25) ~ 0.087.
  std::vector<float> l = six_logits();
  SamplingParams p;
  p.min_p = 0.2;
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 5000; ++seed) {
    p.seed = seed;
    Sampler s(p);
    seen.insert(s.sample(l.data(), l.size(), {}));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 3, 5}));
}

TEST(LlmSampler, BadInputsAreErrors) {
  SamplingParams p = plain(1.0);
  p.top_p = std::nan("");
  EXPECT_THROW(Sampler{p}, wick::Error);
  p = plain(1.0);
  p.min_p = 1.5;
  EXPECT_THROW(Sampler{p}, wick::Error);
  p = plain(1.0);
  p.repeat_penalty = 0.0;
  EXPECT_THROW(Sampler{p}, wick::Error);
  p = plain(1.0);
  p.temperature = std::nan("");
  EXPECT_THROW(Sampler{p}, wick::Error);
  p.temperature = std::numeric_limits<double>::infinity();
  EXPECT_THROW(Sampler{p}, wick::Error);

  Sampler s(plain(1.0));
  EXPECT_THROW(s.sample(nullptr, 0, {}), wick::Error);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> dead = {-inf, std::nanf(""), -inf};
  EXPECT_THROW(s.sample(dead.data(), dead.size(), {}), wick::Error);
  Sampler g(plain(0.0));
  EXPECT_THROW(g.sample(dead.data(), dead.size(), {}), wick::Error);
  try {
    s.sample(dead.data(), dead.size(), {});
  } catch (const wick::Error& e) {
    EXPECT_NE(std::string(e.what()).find("-inf or NaN"), std::string::npos) << e.what();
  }
}

TEST(LlmSampler, PlusInfinityWins) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l = {0.0f, inf, 3.0f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingParams p = plain(1.0);
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.sample(l.data(), l.size(), {}), 1);
  }
}

// The tensor entry (top-k candidates from the tensor's device, the chain on the host) draws the
// ids the whole-row entry draws; on the CPU here, on a GPU in tests/gpu/test_gpu.cpp.
TEST(LlmSampler, TensorEntryDrawsTheWholeRowIds) {
  wick::test::expect_sampler_paths_agree(wick::Device::cpu(), 3000);
}

TEST(LlmSampler, TensorEntryRefusesBadShapes) {
  Sampler s(SamplingParams{});
  EXPECT_THROW(s.sample(wick::Tensor::zeros({2, 5}, wick::DType::F32), {}), wick::Error);
  EXPECT_THROW(s.sample(wick::Tensor::zeros({5}, wick::DType::F16), {}), wick::Error);
}

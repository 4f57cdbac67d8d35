// The batched engine (wick/llm/engine.hpp) on the CPU: requests arriving at different steps, batched,
// give the ids generate() gives each alone (greedy and seeded sampling); prefix sharing, chunked prefill
// and preemption change no output; cancelling frees every block; stop strings, max_tokens and the
// context end requests as generate() does; and a randomized run of 10,000 steps keeps the pool's
// invariants and every finished request's output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "llm_model_util.hpp"
#include "wick/error.hpp"
#include "wick/llm/engine.hpp"
#include "wick/llm/generate.hpp"

using namespace wick;
using namespace wick::llm;
using namespace wick::llm::test_util;

namespace {

const std::string kModel = kLlm + "llama2/model-f16.gguf";

struct Loaded {
  std::unique_ptr<Model> m = Model::load(kModel, f32_cpu());
  Tokenizer tok = Tokenizer::load(kModel);
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

std::vector<int32_t> prompt_of(size_t n, size_t salt) {
  const size_t vocab = loaded().m->config().vocab_size;
  std::vector<int32_t> p{1};  // BOS
  for (size_t j = 1; j < n; ++j) p.push_back(static_cast<int32_t>(3 + (j * 13 + salt * 29) % (vocab - 3)));
  return p;
}

SamplingParams sampling(bool greedy, uint64_t seed) {
  SamplingParams s;
  s.seed = seed;
  if (greedy) s.temperature = 0;
  return s;
}

// generate() alone, f32 KV as the engine's tests use.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, const SamplingParams& sp, size_t max_tokens,
                           bool ignore_eos, std::string* text = nullptr, std::string* reason = nullptr,
                           const std::vector<std::string>& stop = {}) {
  GenerateOptions o;
  o.max_new_tokens = max_tokens;
  o.sampling = sp;
  o.stop_at_eog = !ignore_eos;
  o.stop_strings = stop;
  o.cache_dtype = DType::F32;
  std::vector<int32_t> ids;
  std::string t;
  GenerateStats st = generate(
      *loaded().m, loaded().tok, prompt, o,
      [&](int32_t, const std::string& piece) {
        t += piece;
        return true;
      },
      &ids);
  if (text) *text = t;
  if (reason) *reason = st.stop_reason;
  return ids;
}

struct Outcome {
  std::vector<int32_t> ids;
  std::string text, reason, error;
  bool finished = false;
  size_t cached = 0;
};

Request request(const std::vector<int32_t>& prompt, const SamplingParams& sp, size_t max_tokens, bool ignore_eos,
                Outcome& out) {
  Request r;
  r.prompt = prompt;
  r.sampling = sp;
  r.max_tokens = max_tokens;
  r.ignore_eos = ignore_eos;
  r.on_event = [&out](const TokenEvent& e) {
    EXPECT_FALSE(out.finished) << "an event after the end";
    out.text += e.text;
    if (e.finished) {
      out.finished = true;
      out.reason = e.finish_reason;
      out.error = e.error;
      out.cached = e.cached_prompt_tokens;
    } else {
      out.ids.push_back(e.token);
    }
    return true;
  };
  return r;
}

EngineOptions small(size_t blocks, size_t block_tokens = 4) {
  EngineOptions o;
  o.kv_blocks = blocks;
  o.block_tokens = block_tokens;
  o.kv_dtype = DType::F32;
  o.check_every_step = true;
  return o;
}

}  // namespace

// Six requests, greedy and seeded, of 2-40 prompt tokens, submitted at steps 0, 0, 1, 3, 3 and 7.
TEST(LlmEngine, BatchedEqualsAlone) {
  for (size_t chunk : {512u, 5u}) {
    EngineOptions o = small(200);
    o.max_batch_tokens = chunk;  // 5: prompts go in chunks beside the decoders
    Engine eng(*loaded().m, loaded().tok, o);
    const std::vector<size_t> lens{2, 9, 40, 17, 5, 23}, when{0, 0, 1, 3, 3, 7};
    std::vector<Outcome> out(lens.size());
    std::vector<std::vector<int32_t>> want(lens.size());
    for (size_t i = 0; i < lens.size(); ++i)
      want[i] = alone(prompt_of(lens[i], i), sampling(i % 2 == 0, 100 + i), 12, true);
    size_t next = 0;
    for (size_t step = 0; step < 400 && (next < lens.size() || eng.stats().running + eng.stats().waiting); ++step) {
      while (next < lens.size() && when[next] <= step) {
        eng.submit(request(prompt_of(lens[next], next), sampling(next % 2 == 0, 100 + next), 12, true, out[next]));
        ++next;
      }
      eng.step();
    }
    for (size_t i = 0; i < lens.size(); ++i) {
      EXPECT_TRUE(out[i].finished) << i;
      EXPECT_EQ(out[i].reason, "length") << i;
      EXPECT_EQ(out[i].ids, want[i]) << "request " << i << ", max_batch_tokens " << chunk;
    }
    const EngineStats st = eng.stats();
    EXPECT_EQ(st.blocks_used, 0u);
    EXPECT_EQ(st.finished, lens.size());
    EXPECT_EQ(st.output_tokens, 12 * lens.size());
  }
}

// The same on a GPU in f32 (skipped without one), against generate() alone on that GPU.
TEST(LlmEngine, BatchedEqualsAloneGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  LoadOptions lo;
  lo.device = d;
  lo.dtype = DType::F32;
  auto m = Model::load(kModel, lo);
  const Tokenizer& tok = loaded().tok;
  const std::vector<size_t> lens{2, 9, 40, 17, 5, 23};
  std::vector<std::vector<int32_t>> want(lens.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    GenerateOptions g;
    g.max_new_tokens = 12;
    g.sampling = sampling(i % 2 == 0, 100 + i);
    g.stop_at_eog = false;
    g.cache_dtype = DType::F32;
    generate(*m, tok, prompt_of(lens[i], i), g, {}, &want[i]);
  }
  EngineOptions o = small(200);
  o.max_batch_tokens = 5;
  Engine eng(*m, tok, o);
  std::vector<Outcome> out(lens.size());
  for (size_t i = 0; i < lens.size(); ++i)
    eng.submit(request(prompt_of(lens[i], i), sampling(i % 2 == 0, 100 + i), 12, true, out[i]));
  eng.run_until_idle();
  for (size_t i = 0; i < lens.size(); ++i) EXPECT_EQ(out[i].ids, want[i]) << "request " << i << " on " << d.name();
  EXPECT_EQ(eng.stats().blocks_used, 0u);
}

// A GGUF named by WICK_ENGINE_MODEL (a TinyLlama-size file, say; skipped without it), on the first GPU or the
// CPU: four requests of 5-64 prompt tokens arriving at steps 0-3, prompts in chunks of 32, greedy, each equal
// to generate() alone on the same model, or first different only at a near tie: the two tokens' logits within
// 0.01 where the alone run's prefix is run again (printed). A quantized file's products take other kernels for
// other row counts, which sum in another order, and a random-weight model's logits are nearly flat.
TEST(LlmEngine, ModelFromEnvBatchedEqualsAlone) {
  const char* path = std::getenv("WICK_ENGINE_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set WICK_ENGINE_MODEL to a GGUF file";
  LoadOptions lo;
  lo.device = Device::best();
  if (lo.device.is_gpu()) lo.dtype = DType::F32;
  auto m = Model::load(path, lo);
  const Tokenizer tok = Tokenizer::load(path);
  const size_t vocab = m->config().vocab_size;
  const std::vector<size_t> lens{5, 17, 40, 64};
  std::vector<std::vector<int32_t>> prompts(lens.size()), want(lens.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    for (size_t j = 0; j < lens[i]; ++j)
      prompts[i].push_back(static_cast<int32_t>(1 + (j * 7919 + i * 104729) % (vocab - 1)));
    GenerateOptions g;
    g.max_new_tokens = 16;
    g.sampling = sampling(true, 31 + i);
    g.stop_at_eog = false;
    g.cache_dtype = DType::F32;
    generate(*m, tok, prompts[i], g, {}, &want[i]);
  }
  EngineOptions o = small(400, 16);
  o.max_batch_tokens = 32;
  Engine eng(*m, tok, o);
  std::vector<Outcome> out(lens.size());
  for (size_t step = 0, next = 0; step < 2000 && (next < lens.size() || eng.stats().running + eng.stats().waiting);
       ++step) {
    if (next < lens.size()) {
      eng.submit(request(prompts[next], sampling(true, 31 + next), 16, true, out[next]));
      ++next;
    }
    eng.step();
  }
  for (size_t i = 0; i < lens.size(); ++i) {
    ASSERT_EQ(out[i].ids.size(), want[i].size()) << i;
    size_t k = 0;
    while (k < want[i].size() && out[i].ids[k] == want[i][k]) ++k;
    if (k == want[i].size()) continue;
    // The alone run's logits where the two part: how far apart its choice and the batched one were.
    std::vector<int32_t> upto = prompts[i];
    upto.insert(upto.end(), want[i].begin(), want[i].begin() + static_cast<std::ptrdiff_t>(k));
    KvCache c = m->make_cache(upto.size(), DType::F32);
    const std::vector<float> l = m->forward(upto, c).to_vector<float>();
    const float gap = l[size_t(want[i][k])] - l[size_t(out[i].ids[k])];
    std::printf("request %zu: first difference at output %zu (alone %d, batched %d), logit gap %.3g\n", i, k,
                want[i][k], out[i].ids[k], gap);
    EXPECT_LT(std::fabs(gap), 0.01f) << "request " << i << " on " << lo.device.name();
  }
  EXPECT_EQ(eng.stats().blocks_used, 0u);
}

// Prompts sharing a 33-token prefix: later ones take its 8 full blocks of 4 from the cache.
TEST(LlmEngine, PrefixSharingChangesNoOutput) {
  Engine eng(*loaded().m, loaded().tok, small(200));
  const std::vector<int32_t> stem = prompt_of(33, 5);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < 4; ++i) {
    std::vector<int32_t> p = stem;
    for (size_t j = 0; j < i + 1; ++j) p.push_back(static_cast<int32_t>(50 + 7 * i + j));
    prompts.push_back(p);
  }
  std::vector<Outcome> out(prompts.size());
  eng.submit(request(prompts[0], sampling(true, 1), 6, true, out[0]));
  eng.run_until_idle();  // the first ends; its blocks stay cached
  for (size_t i = 1; i < prompts.size(); ++i) eng.submit(request(prompts[i], sampling(false, 9 + i), 6, true, out[i]));
  eng.run_until_idle();
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(out[i].ids, alone(prompts[i], sampling(i == 0, i == 0 ? 1 : 9 + i), 6, true)) << i;
  EXPECT_EQ(out[0].cached, 0u);
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_EQ(out[i].cached, 32u) << i;
  EXPECT_EQ(eng.stats().cached_prompt_tokens, 96u);
  EXPECT_GT(eng.stats().blocks_cached, 0u);
}

// A pool of 14 blocks of 4 tokens for four requests that need up to 9 each: the youngest are preempted
// and recomputed, and every output is still the one it has alone.
TEST(LlmEngine, PreemptionChangesNoOutput) {
  for (bool prefix : {true, false}) {
    EngineOptions o = small(14);
    o.prefix_cache = prefix;
    Engine eng(*loaded().m, loaded().tok, o);
    std::vector<Outcome> out(4);
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < 4; ++i) {
      prompts.push_back(prompt_of(6 + 3 * i, 40 + i));
      eng.submit(request(prompts[i], sampling(i % 2 == 1, 7 + i), 20, true, out[i]));
    }
    eng.run_until_idle();
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(out[i].ids, alone(prompts[i], sampling(i % 2 == 1, 7 + i), 20, true)) << i << " prefix " << prefix;
      EXPECT_EQ(out[i].reason, "length");
    }
    EXPECT_GT(eng.stats().preemptions, 0u) << "prefix " << prefix;
    EXPECT_EQ(eng.stats().blocks_used, 0u);
  }
}

TEST(LlmEngine, CancelFreesEveryBlock) {
  EngineOptions o = small(100);
  o.max_batch_tokens = 4;
  Engine eng(*loaded().m, loaded().tok, o);
  Outcome a, b, c;
  const uint64_t ia = eng.submit(request(prompt_of(30, 1), sampling(true, 0), 50, true, a));
  const uint64_t ib = eng.submit(request(prompt_of(3, 2), sampling(true, 0), 50, true, b));
  const uint64_t ic = eng.submit(request(prompt_of(5, 3), sampling(true, 0), 50, true, c));
  eng.cancel(ic);  // before it ever ran
  eng.step();
  eng.step();
  EXPECT_GT(eng.stats().blocks_used, 0u);
  eng.cancel(ia);  // mid-prefill: 8 of its 30 prompt tokens in
  for (int i = 0; i < 5; ++i) eng.step();
  EXPECT_FALSE(b.finished);
  eng.cancel(ib);  // mid-decode
  eng.cancel(12345);
  eng.run_until_idle();
  for (const Outcome* x : {&a, &b, &c}) {
    EXPECT_TRUE(x->finished);
    EXPECT_EQ(x->reason, "cancelled");
  }
  EXPECT_TRUE(c.ids.empty());
  EXPECT_GT(b.ids.size(), 0u);
  const EngineStats st = eng.stats();
  EXPECT_EQ(st.blocks_used, 0u);
  EXPECT_EQ(st.blocks_free + st.blocks_cached, st.blocks_total);
  EXPECT_EQ(st.cancelled, 3u);
  // A callback returning false cancels too.
  Outcome d;
  Request r = request(prompt_of(4, 4), sampling(true, 0), 50, true, d);
  auto inner = r.on_event;
  r.on_event = [inner, &d](const TokenEvent& e) { return inner(e) && d.ids.size() < 3; };
  eng.submit(r);
  eng.run_until_idle();
  EXPECT_EQ(d.ids.size(), 3u);
  EXPECT_EQ(d.reason, "cancelled");
  EXPECT_EQ(eng.stats().blocks_used, 0u);
}

// A stream read on another thread while one thread steps: the same ids as alone, then the end, then
// nothing; a stream nobody holds any more cancels its request.
TEST(LlmEngine, StreamsAcrossThreads) {
  Engine eng(*loaded().m, loaded().tok, small(100));
  const std::vector<int32_t> p = prompt_of(11, 3);
  Request r;
  r.prompt = p;
  r.sampling = sampling(false, 5);
  r.max_tokens = 9;
  r.ignore_eos = true;
  std::shared_ptr<TokenStream> s = eng.submit_stream(r);
  std::thread stepper([&] {
    for (int i = 0; i < 1000 && (eng.stats().running + eng.stats().waiting) > 0; ++i) eng.step();
  });
  std::vector<int32_t> ids;
  TokenEvent e;
  std::string reason;
  for (int i = 0; i < 100 && s->next(e, std::chrono::seconds(10)); ++i) {
    if (e.finished) {
      reason = e.finish_reason;
    } else {
      ids.push_back(e.token);
    }
  }
  stepper.join();
  EXPECT_EQ(reason, "length");
  EXPECT_EQ(ids, alone(p, sampling(false, 5), 9, true));
  EXPECT_FALSE(s->next(e, std::chrono::milliseconds(1)));
  std::shared_ptr<TokenStream> dropped = eng.submit_stream(r);
  eng.step();
  dropped.reset();
  eng.run_until_idle();
  EXPECT_EQ(eng.stats().cancelled, 1u);
  EXPECT_EQ(eng.stats().blocks_used, 0u);
}

// A pool that cannot fit the device's memory is an error saying what fits.
TEST(LlmEngine, PoolPastMemoryIsAnError) {
  EngineOptions o;
  o.kv_bytes = size_t{1} << 50;
  const std::string msg = what_of([&] { Engine e(*loaded().m, loaded().tok, o); });
  EXPECT_NE(msg.find("does not fit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("blocks of 16 tokens fit"), std::string::npos) << msg;
}

// Stop strings and end-of-generation end a request with generate()'s text and reason.
TEST(LlmEngine, StopsAsGenerate) {
  Engine eng(*loaded().m, loaded().tok, small(100));
  const std::vector<int32_t> p = prompt_of(7, 11);
  std::string full;
  alone(p, sampling(true, 0), 16, true, &full);
  ASSERT_GE(full.size(), 6u);
  const std::string stop = full.substr(full.size() / 2, 3);
  std::string want_text, want_reason;
  const std::vector<int32_t> want = alone(p, sampling(true, 0), 16, false, &want_text, &want_reason, {stop});
  Outcome o;
  Request r = request(p, sampling(true, 0), 16, false, o);
  r.stop = {stop};
  eng.submit(r);
  eng.run_until_idle();
  EXPECT_EQ(o.ids, want);
  EXPECT_EQ(o.text, want_text);
  EXPECT_EQ(want_reason, "stop_string");
  EXPECT_EQ(o.reason, "stop");
}

TEST(LlmEngine, BadRequestsAreErrors) {
  EngineOptions o = small(4);
  o.max_ctx = 12;
  Engine eng(*loaded().m, loaded().tok, o);
  Outcome x;
  EXPECT_THROW(eng.submit(request({}, sampling(true, 0), 4, true, x)), Error);
  EXPECT_THROW(eng.submit(request({1, -3}, sampling(true, 0), 4, true, x)), Error);
  SamplingParams bad;
  bad.top_p = -1;
  EXPECT_THROW(eng.submit(request({1, 2}, bad, 4, true, x)), Error);
  // A prompt past the context ends with an error event; one that fits runs to the context.
  Outcome long_one, fits;
  eng.submit(request(prompt_of(13, 0), sampling(true, 0), 4, true, long_one));
  eng.submit(request(prompt_of(10, 0), sampling(true, 0), 40, true, fits));
  eng.run_until_idle();
  EXPECT_EQ(long_one.reason, "error");
  EXPECT_NE(long_one.error.find("more than the context of 12"), std::string::npos) << long_one.error;
  EXPECT_EQ(fits.reason, "length");
  EXPECT_EQ(fits.ids.size(), 2u);
  // max_tokens 0 ends at once with no token, as generate() with max_new_tokens 0.
  Outcome zero_tokens;
  eng.submit(request({1, 2, 3}, sampling(true, 0), 0, true, zero_tokens));
  eng.run_until_idle();
  EXPECT_TRUE(zero_tokens.finished);
  EXPECT_TRUE(zero_tokens.ids.empty());
  EXPECT_EQ(zero_tokens.reason, "length");
  EngineOptions none = small(4);
  none.max_waiting = 1;
  Engine full(*loaded().m, loaded().tok, none);
  Outcome y, z;
  full.submit(request({1, 2}, sampling(true, 0), 2, true, y));
  EXPECT_THROW(full.submit(request({1, 2}, sampling(true, 0), 2, true, z)), Error);
  EngineOptions zero = small(4);
  zero.block_tokens = 0;
  EXPECT_THROW(Engine(*loaded().m, loaded().tok, zero), Error);
}

// A forward that fails ends that step's requests with its message; the engine goes on and holds no block.
TEST(LlmEngine, FailedForwardEndsItsRequests) {
  struct NoBatch : Model {
    NoBatch() {
      config_.vocab_size = 16;
      config_.n_layers = 1;
      config_.n_kv_heads = 1;
      config_.head_dim = 4;
      config_.max_position = 64;
    }
    Tensor forward(const std::vector<int32_t>&, KvCache&, bool) override {
      throw Error(ErrorKind::Unsupported, "not here");
    }
  } m;
  Engine eng(m, loaded().tok, small(8));
  Outcome a, b;
  eng.submit(request({1, 2, 3}, sampling(true, 0), 4, true, a));
  eng.submit(request({4, 5}, sampling(true, 0), 4, true, b));
  eng.run_until_idle();
  for (const Outcome* x : {&a, &b}) {
    EXPECT_EQ(x->reason, "error");
    EXPECT_NE(x->error.find("no batched forward"), std::string::npos) << x->error;
  }
  EXPECT_EQ(eng.stats().blocks_used, 0u);
  EXPECT_EQ(eng.stats().running, 0u);
}

// 10,000 steps of random arrivals (prompts from a few shared stems), lengths, cancellations and pool
// sizes, greedy: the pool's invariants are checked after every step (check_every_step), and every request
// that finishes by length has the first max_tokens ids of its prompt's greedy output alone.
TEST(LlmEngine, RandomizedSchedulerKeepsInvariantsAndOutputs) {
  std::mt19937 rng(2026);
  std::vector<std::vector<int32_t>> prompts;
  std::map<size_t, std::vector<int32_t>> want;
  for (size_t i = 0; i < 10; ++i) {
    std::vector<int32_t> p = prompt_of(5 + (i % 3) * 6, i % 3);  // three stems
    for (size_t j = 0; j <= i; ++j) p.push_back(static_cast<int32_t>(100 + 17 * i + j));
    prompts.push_back(p);
    want[i] = alone(p, sampling(true, 0), 16, true);
  }
  size_t steps = 0, checked = 0, cancelled = 0;
  for (size_t round = 0; steps < 10000; ++round) {
    EngineOptions o = small(6 + rng() % 40, 1 + rng() % 6);
    o.max_batch_tokens = 1 + rng() % 24;
    o.max_seqs = 1 + rng() % 8;
    o.prefix_cache = rng() % 4 != 0;
    Engine eng(*loaded().m, loaded().tok, o);
    std::vector<std::unique_ptr<Outcome>> outs;
    std::vector<std::pair<uint64_t, size_t>> ids;  // request id, prompt
    std::vector<size_t> maxes;
    for (size_t s = 0; s < 300 && steps < 10000; ++s, ++steps) {
      if (rng() % 3 == 0) {
        const size_t p = rng() % prompts.size();
        const size_t max_tokens = 1 + rng() % 16;
        outs.push_back(std::make_unique<Outcome>());
        ids.push_back({eng.submit(request(prompts[p], sampling(true, 0), max_tokens, true, *outs.back())), p});
        maxes.push_back(max_tokens);
      }
      if (!ids.empty() && rng() % 25 == 0) eng.cancel(ids[rng() % ids.size()].first);
      eng.step();
    }
    eng.run_until_idle();
    EXPECT_EQ(eng.stats().blocks_used, 0u);
    for (size_t i = 0; i < outs.size(); ++i) {
      const Outcome& out = *outs[i];
      ASSERT_TRUE(out.finished);
      const std::vector<int32_t>& w = want[ids[i].second];
      if (out.reason == "cancelled") {
        ++cancelled;
        ASSERT_LE(out.ids.size(), maxes[i]);
        EXPECT_EQ(out.ids, std::vector<int32_t>(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(out.ids.size())));
        continue;
      }
      if (out.reason == "error") continue;  // a prompt longer than a small pool
      ASSERT_EQ(out.reason, "length") << out.error;
      const size_t n = out.ids.size();
      ASSERT_LE(n, maxes[i]);
      EXPECT_EQ(out.ids, std::vector<int32_t>(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(n)))
          << "round " << round << " request " << i;
      ++checked;
    }
  }
  std::printf("%zu steps, %zu finished outputs checked, %zu cancelled\n", steps, checked, cancelled);
  EXPECT_GT(checked, 500u);
  EXPECT_GT(cancelled, 20u);
}

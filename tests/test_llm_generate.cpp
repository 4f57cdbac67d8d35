// generate() and perplexity(): stop conditions, streaming, seeds and the perplexity arithmetic on a
// scripted model (logits chosen by the test, so every expected value is hand math), then parity
// with transformers' greedy tokens and llama-perplexity on the tiny fixture models (fixtures/llm).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "wick/error.hpp"
#include "wick/llm/generate.hpp"
#include "wick/llm/model.hpp"
#include "wick/llm/tokenizer.hpp"
#include "wick/wick.hpp"

using namespace wick;
using namespace wick::llm;

namespace {

const std::string kFix = WICK_FIXTURES;

const Tokenizer& spm() {
  static Tokenizer t = Tokenizer::load(kFix + "/vocab/ggml-vocab-llama-spm.gguf");
  return t;
}

// A model whose logits the test dictates: the token at position p is predicted with logit `peak`
// (every other logit 0) to be script[p + 1], or next(token) when a next function is given; past the
// script, or with an empty script, the logits are a fixed pseudo-random row per position (for
// sampling tests). It records what it was fed.
class ScriptedModel : public Model {
 public:
  ScriptedModel(size_t vocab, std::vector<int32_t> script, float peak = 20.f, std::function<int32_t(int32_t)> next = {})
      : script_(std::move(script)), peak_(peak), next_(std::move(next)) {
    config_.vocab_size = vocab;
    config_.n_layers = 1;
    config_.n_kv_heads = 1;
    config_.head_dim = 1;
    config_.n_heads = 1;
    config_.arch_name = "scripted";
    dtype_ = DType::F32;
    default_cache_dtype_ = DType::F32;
  }
  Tensor forward(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits) override {
    const size_t V = config_.vocab_size, p0 = cache.pos();
    cache.advance(tokens.size());  // Error on overflow, as a real model
    fed.insert(fed.end(), tokens.begin(), tokens.end());
    calls.push_back(tokens);
    const size_t first = all_logits ? 0 : tokens.size() - 1;
    std::vector<float> out;
    for (size_t i = first; i < tokens.size(); ++i) {
      const size_t p = p0 + i;
      std::vector<float> row(V, 0.f);
      if (next_) {
        row[size_t(next_(tokens[i]))] = peak_;
      } else if (p + 1 < script_.size()) {
        row[size_t(script_[p + 1])] = peak_;
      } else if (script_.empty()) {
        uint64_t s = 0x9e3779b97f4a7c15ull * (p + 1);
        for (size_t v = 0; v < V; ++v) {
          s ^= s >> 31;
          s *= 0xbf58476d1ce4e5b9ull;
          s ^= s >> 27;
          row[v] = float(s >> 40) / float(1 << 24) * 4.f;  // [0, 4): a spread-out distribution
        }
      }
      out.insert(out.end(), row.begin(), row.end());
    }
    return Tensor::from_vector(out, {tokens.size() - first, V});
  }
  std::vector<int32_t> fed;
  std::vector<std::vector<int32_t>> calls;

 private:
  std::vector<int32_t> script_;
  float peak_;
  std::function<int32_t(int32_t)> next_;
};

GenerateOptions greedy(size_t n) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0;
  return o;
}

// The text of ids as the tokenizer's pieces (token_bytes), concatenated.
std::string pieces(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += spm().token_bytes(id);
  return s;
}

}  // namespace

TEST(LlmGenerate, MaxTokensAndPrefillThenOneTokenSteps) {
  std::vector<int32_t> text = spm().encode("The quick brown fox jumps over the lazy dog", true);
  ASSERT_GE(text.size(), 10u);
  const std::vector<int32_t> prompt(text.begin(), text.begin() + 3);
  ScriptedModel m(spm().vocab_size(), text);
  std::vector<int32_t> ids, seen;
  std::string streamed;
  GenerateStats st = generate(
      m, spm(), prompt, greedy(5),
      [&](int32_t id, const std::string& piece) {
        seen.push_back(id);
        streamed += piece;
        return true;
      },
      &ids);
  const std::vector<int32_t> want(text.begin() + 3, text.begin() + 8);
  EXPECT_EQ(ids, want);
  EXPECT_EQ(seen, want);
  EXPECT_EQ(st.stop_reason, "max_tokens");
  EXPECT_EQ(st.prompt_tokens, 3u);
  EXPECT_EQ(st.generated_tokens, 5u);
  EXPECT_EQ(st.decode_steps, 4u);  // the first token comes from the prefill's logits
  ASSERT_EQ(m.calls.size(), 5u);
  EXPECT_EQ(m.calls[0], prompt);  // one prefill forward over the whole prompt
  for (size_t i = 1; i < m.calls.size(); ++i) EXPECT_EQ(m.calls[i].size(), 1u);
  EXPECT_EQ(streamed, pieces(want));
}

TEST(LlmGenerate, StopStringSpanningTokensIsNeverEmitted) {
  // Pieces of "Hello world. The end": the stop string "d. Th" starts inside one token and ends in a
  // later one; nothing from its first byte on may reach the callback.
  std::vector<int32_t> text = spm().encode("Hello world. The end of it", true);
  const std::vector<int32_t> prompt(text.begin(), text.begin() + 1);
  const std::vector<int32_t> gen(text.begin() + 1, text.end());
  const std::string full = pieces(gen);
  const size_t at = full.find("d. Th");
  ASSERT_NE(at, std::string::npos) << full;
  ScriptedModel m(spm().vocab_size(), text);
  GenerateOptions o = greedy(50);
  o.stop_strings = {"zzz", "d. Th"};
  std::string streamed;
  std::vector<int32_t> ids;
  GenerateStats st = generate(
      m, spm(), prompt, o,
      [&](int32_t, const std::string& piece) {
        streamed += piece;
        return true;
      },
      &ids);
  EXPECT_EQ(st.stop_reason, "stop_string");
  EXPECT_EQ(streamed, full.substr(0, at));
  // It stopped at the token that completed the stop string, not later.
  size_t len = 0, n = 0;
  while (len < at + 5) len += spm().token_bytes(gen[n++]).size();
  EXPECT_EQ(ids.size(), n);
}

TEST(LlmGenerate, PartialStopStringThatNeverCompletesIsFlushed) {
  std::vector<int32_t> text = spm().encode("Hello world", true);
  const std::vector<int32_t> prompt(text.begin(), text.begin() + 1);
  const std::vector<int32_t> gen(text.begin() + 1, text.end());
  ScriptedModel m(spm().vocab_size(), text);
  GenerateOptions o = greedy(gen.size());
  o.stop_strings = {"world peace"};  // "world" is held back, then given at the end
  std::string streamed;
  std::vector<int32_t> call_ids;
  GenerateStats st = generate(m, spm(), prompt, o, [&](int32_t id, const std::string& piece) {
    call_ids.push_back(id);
    streamed += piece;
    return true;
  });
  EXPECT_EQ(st.stop_reason, "max_tokens");
  EXPECT_EQ(streamed, pieces(gen));
  ASSERT_FALSE(call_ids.empty());
  EXPECT_EQ(call_ids.back(), -1);  // the held-back tail comes last, with id -1
}

TEST(LlmGenerate, CallbackStopsAndEogStops) {
  std::vector<int32_t> text = spm().encode("one two three four five six seven", true);
  ScriptedModel m(spm().vocab_size(), text);
  int calls = 0;
  std::vector<int32_t> ids;
  GenerateStats st = generate(
      m, spm(), {text[0]}, greedy(20), [&](int32_t, const std::string&) { return ++calls < 3; }, &ids);
  EXPECT_EQ(st.stop_reason, "callback");
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(ids.size(), 3u);

  // An EOS in the script: generation ends there; the EOS gets no callback but is in the ids.
  const int32_t eos = spm().eos_id();
  ASSERT_GE(eos, 0);
  ASSERT_TRUE(spm().is_eog(eos));
  std::vector<int32_t> script = {text[0], text[1], text[2], eos, text[3]};
  ScriptedModel m2(spm().vocab_size(), script);
  std::vector<int32_t> seen;
  ids.clear();
  st = generate(
      m2, spm(), {text[0]}, greedy(20),
      [&](int32_t id, const std::string&) {
        seen.push_back(id);
        return true;
      },
      &ids);
  EXPECT_EQ(st.stop_reason, "eog");
  EXPECT_EQ(ids, (std::vector<int32_t>{text[1], text[2], eos}));
  EXPECT_EQ(seen, (std::vector<int32_t>{text[1], text[2]}));
  // stop_at_eog off: it runs through the EOS to the token limit.
  ScriptedModel m3(spm().vocab_size(), script);
  GenerateOptions o = greedy(4);
  o.stop_at_eog = false;
  ids.clear();
  st = generate(m3, spm(), {text[0]}, o, nullptr, &ids);
  EXPECT_EQ(st.stop_reason, "max_tokens");
  EXPECT_EQ(ids, (std::vector<int32_t>{text[1], text[2], eos, text[3]}));
}

TEST(LlmGenerate, Utf8SplitAcrossByteTokensArrivesWhole) {
  // "€" is E2 82 AC; SPM byte-fallback tokens <0xE2> <0x82> <0xAC> each hold one byte of it.
  auto b1 = spm().find("<0xE2>"), b2 = spm().find("<0x82>"), b3 = spm().find("<0xAC>");
  ASSERT_TRUE(b1 && b2 && b3);
  const int32_t bos = spm().bos_id();
  ScriptedModel m(spm().vocab_size(), {bos, *b1, *b2, *b3});
  std::vector<std::string> got;
  generate(m, spm(), {bos}, greedy(3), [&](int32_t, const std::string& piece) {
    got.push_back(piece);
    return true;
  });
  EXPECT_EQ(got, (std::vector<std::string>{"", "", "\xE2\x82\xAC"}));
}

TEST(LlmGenerate, IdsPastTheTokenizersVocabularyHaveNoText) {
  // A model vocabulary padded past the tokenizer's: the sampled id is kept, its text is empty.
  const int32_t v = int32_t(spm().vocab_size());
  std::vector<int32_t> text = spm().encode("Hello world", true);
  ScriptedModel m(size_t(v) + 8, {text[0], v + 3, text[1]});
  std::vector<int32_t> ids;
  std::string streamed;
  generate(
      m, spm(), {text[0]}, greedy(2),
      [&](int32_t, const std::string& piece) {
        streamed += piece;
        return true;
      },
      &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{v + 3, text[1]}));
  EXPECT_EQ(streamed, pieces({text[1]}));
}

TEST(LlmGenerate, ContextLimitAndErrors) {
  std::vector<int32_t> text = spm().encode("a b c d e f g h i j k l m n o p", true);
  ScriptedModel m(spm().vocab_size(), text);
  GenerateOptions o = greedy(10);
  o.n_ctx = 4;  // prompt 2 + 2 decode forwards fill it; the third sampled token cannot be fed
  std::vector<int32_t> ids;
  GenerateStats st = generate(m, spm(), {text[0], text[1]}, o, nullptr, &ids);
  EXPECT_EQ(st.stop_reason, "context");
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(st.decode_steps, 2u);

  o.n_ctx = 2;
  EXPECT_THROW(generate(m, spm(), {text[0], text[1], text[2]}, o, nullptr), Error);
  EXPECT_THROW(generate(m, spm(), {}, greedy(3), nullptr), Error);
}

TEST(LlmGenerate, ContinuesInACallersCache) {
  std::vector<int32_t> text = spm().encode("a b c d e f g h i j k l m n o p", true);
  ScriptedModel m(spm().vocab_size(), text);
  KvCache cache = m.make_cache(32);
  std::vector<int32_t> ids;
  generate(m, spm(), cache, {text[0], text[1]}, greedy(3), nullptr, &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{text[2], text[3], text[4]}));
  EXPECT_EQ(cache.pos(), 4u);  // the prompt and two decode forwards; text[4] was never fed
  ids.clear();
  generate(m, spm(), cache, {text[4], text[5]}, greedy(2), nullptr, &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{text[6], text[7]}));  // positions carried on from the first call
  EXPECT_EQ(cache.pos(), 7u);
}

TEST(LlmGenerate, SeededSamplingRepeats) {
  auto run = [](uint64_t seed) {
    ScriptedModel m(512, {});
    GenerateOptions o;
    o.max_new_tokens = 24;
    o.sampling.temperature = 1.0;
    o.sampling.top_k = 0;
    o.sampling.top_p = 1.0;
    o.sampling.min_p = 0.0;
    o.sampling.seed = seed;
    o.stop_at_eog = false;
    std::vector<int32_t> ids;
    generate(m, spm(), {1}, o, nullptr, &ids);
    return ids;
  };
  std::vector<int32_t> a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a.size(), 24u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // 24 draws over a spread-out distribution: equal by chance is negligible
}

// Perplexity on scripted logits: the next token always gets logit L, the other V-1 get 0, so every
// scored token has p = e^L / (e^L + V - 1) and ppl = 1/p exactly; with L = 0 (uniform), ppl = V.
TEST(LlmPerplexity, HandMathAndChunking) {
  const size_t V = 64, n_ctx = 16;
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < 40; ++i) tokens.push_back(int32_t((i * 7 + 3) % V));
  for (float L : {0.f, 3.f}) {
    ScriptedModel m(V, {}, L, [V](int32_t t) { return int32_t((size_t(t) + 7) % V); });
    size_t progress_calls = 0;
    PerplexityResult r = perplexity(m, tokens, n_ctx, [&](size_t done, size_t total) {
      ++progress_calls;
      EXPECT_EQ(total, 2u);
      EXPECT_EQ(done, progress_calls);
    });
    // 40 tokens: 2 chunks of 16; each scores 16 - 8 - 1 = 7 tokens.
    EXPECT_EQ(r.n_chunks, 2u);
    EXPECT_EQ(r.n_scored, 14u);
    const double p = std::exp(double(L)) / (std::exp(double(L)) + double(V - 1));
    EXPECT_NEAR(r.ppl, 1.0 / p, 1e-4 / p);
    EXPECT_NEAR(r.nll_mean, -std::log(p), 1e-5);
    EXPECT_NEAR(r.ppl_error, 0.0, 1e-3);  // every nll equal: no spread
  }
  // The chunks restart the cache (position 0) and get BOS as their first token when asked.
  ScriptedModel m(V, {});
  perplexity(m, tokens, n_ctx, {}, /*bos_id=*/5);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0][0], 5);
  EXPECT_EQ(m.calls[1][0], 5);
  EXPECT_EQ(std::vector<int32_t>(m.calls[1].begin() + 1, m.calls[1].end()),
            std::vector<int32_t>(tokens.begin() + 17, tokens.begin() + 32));

  EXPECT_THROW(perplexity(m, std::vector<int32_t>(tokens.begin(), tokens.begin() + 31), n_ctx), Error);
  EXPECT_THROW(perplexity(m, tokens, 2), Error);
}

// ---- the fixture models (tests/fixtures/llm/README.md): transformers' 64 greedy tokens

namespace {

void expect_greedy(const std::string& dir, const std::string& model_path, Device dev = Device::cpu()) {
  std::ifstream f(kFix + "/llm/" + dir + "/expected.json");
  ASSERT_TRUE(f.good()) << dir;
  nlohmann::json ex = nlohmann::json::parse(f);
  std::vector<int32_t> prompt = ex["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> want = ex["greedy_ids"].get<std::vector<int32_t>>();
  LoadOptions lo;
  lo.device = dev;
  lo.dtype = DType::F32;
  auto model = Model::load(model_path, lo);
  Tokenizer tok = Tokenizer::load(model_path);
  GenerateOptions o = greedy(want.size());
  o.stop_at_eog = false;  // transformers ran the 64 steps whatever came
  // transformers ran in f32 throughout; an f16 cache's rounding (~5e-4 relative) is enough to swap
  // mistral's near-tie at step 44 (margin 0.0012), so the comparison keeps the cache in f32.
  o.cache_dtype = DType::F32;
  std::vector<int32_t> ids;
  GenerateStats st = generate(*model, tok, prompt, o, nullptr, &ids);
  EXPECT_EQ(st.generated_tokens, want.size());
  size_t first = 0;
  while (first < ids.size() && first < want.size() && ids[first] == want[first]) ++first;
  if (first < want.size()) {
    std::vector<double> margins = ex["greedy_margins"].get<std::vector<double>>();
    ADD_FAILURE() << model_path << " on " << dev.name() << ": greedy ids differ from transformers' at step " << first
                  << " of " << want.size() << " (wick " << (first < ids.size() ? ids[first] : -1) << ", transformers "
                  << want[first] << "; transformers' top-1 minus top-2 logit there: " << margins.at(first) << ")";
  }
}

}  // namespace

class LlmGreedyParity : public ::testing::TestWithParam<const char*> {};

TEST_P(LlmGreedyParity, HfDirectoryF32) {
  const std::string dir = GetParam();
  expect_greedy(dir, kFix + "/llm/" + dir);
}

TEST_P(LlmGreedyParity, LlamaCppF16Gguf) {
  const std::string dir = GetParam();
  expect_greedy(dir, kFix + "/llm/" + dir + "/model-f16.gguf");
}

INSTANTIATE_TEST_SUITE_P(Families, LlmGreedyParity, ::testing::Values("llama2", "llama3", "mistral", "qwen2", "qwen3"));

// llama-perplexity -c 128 -b 128 on apache-2.0.txt for each GGUF: fixtures/llm/llamacpp.json, written by
// gen_llamacpp.sh as {"<family>/<type>": {"ppl", "ppl_err", "n_ctx", "chunks"}} for <family>/model-<type>.gguf.
void expect_llama_perplexity(Device dev, std::optional<DType> dtype = std::nullopt) {
  const std::string path = kFix + "/llm/llamacpp.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixtures/llm/llamacpp.json not written yet (gen_llamacpp.sh)";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  std::ifstream tf(kFix + "/llm/apache-2.0.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  size_t checked = 0;
  for (const auto& [key, entry] : j.items()) {
    SCOPED_TRACE(key);
    const size_t slash = key.find('/');
    ASSERT_NE(slash, std::string::npos);
    const std::string gguf = kFix + "/llm/" + key.substr(0, slash) + "/model-" + key.substr(slash + 1) + ".gguf";
    LoadOptions lo;
    lo.device = dev;
    lo.dtype = dtype;
    auto model = Model::load(gguf, lo);
    Tokenizer tok = Tokenizer::load(gguf);
    std::vector<int32_t> tokens = tok.encode(text, true, false);
    PerplexityResult r =
        perplexity(*model, tokens, entry["n_ctx"].get<size_t>(), {}, tok.add_bos() ? tok.bos_id() : -1);
    EXPECT_EQ(r.n_chunks, entry["chunks"].get<size_t>());
    const double want = entry["ppl"].get<double>();
    std::printf("%-12s %s %s: wick PPL %.6g, llama-perplexity %.6g (%+.3f%%)\n", key.c_str(), dev.name().c_str(),
                dtype_name(model->dtype()), r.ppl, want, 100.0 * (r.ppl / want - 1.0));
    EXPECT_NEAR(r.ppl, want, 0.01 * want) << "wick " << r.ppl << " vs llama-perplexity " << want;
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

TEST(LlmPerplexity, MatchesLlamaPerplexity) { expect_llama_perplexity(Device::cpu()); }

// ---- the same on the GPU (skipped without one; the lead runs these on the GPU machine)

TEST(LlmGenerateGpu, GreedyF32MatchesTransformers) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  for (const char* f : {"llama2", "llama3", "mistral", "qwen2", "qwen3"}) {
    expect_greedy(f, kFix + "/llm/" + f, d);
    expect_greedy(f, kFix + "/llm/" + f + "/model-f16.gguf", d);
  }
}

// The sampler runs on the host from f32 logits, so a seed gives the same tokens on every device
// (unless a draw lands within the devices' logit differences of a boundary: ~1e-6, negligible).
TEST(LlmGenerateGpu, SeededSamplingSameOnCpuAndGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  const std::string gguf = kFix + "/llm/llama2/model-f16.gguf";
  Tokenizer tok = Tokenizer::load(gguf);
  auto run = [&](Device dev) {
    LoadOptions lo;
    lo.device = dev;
    lo.dtype = DType::F32;
    auto m = Model::load(gguf, lo);
    GenerateOptions o;
    o.max_new_tokens = 32;
    o.sampling.seed = 3;
    o.stop_at_eog = false;
    o.cache_dtype = DType::F32;
    std::vector<int32_t> ids;
    generate(*m, tok, tok.encode("The licence grants you", true), o, nullptr, &ids);
    return ids;
  };
  EXPECT_EQ(run(Device::cpu()), run(d));
}

TEST(LlmPerplexityGpu, MatchesLlamaPerplexity) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  // The default (f16 activations on a GPU) and f32. On the CPU f16 stays within 0.05% of f32 for
  // every fixture; bf16 moves qwen3 (PPL 3e19, logits large) by 1.0%, so it is not held to 1%.
  expect_llama_perplexity(d);
  expect_llama_perplexity(d, DType::F32);
}

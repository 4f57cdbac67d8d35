// The phi3 family against llama.cpp: tests/fixtures/llm/phi3 (gen.py) holds tiny random-weight Phi-3 files
// (q|k|v and gate|up fused, untied) with and without LongRoPE, and llama.cpp's logits for a 48-token prompt
// (CPU, f32 weights): with the long factors (context 512 > the original 256) and the short ones (context
// 256), and rotating 12 of each head's 16 dims (partial rotary, as Phi-4-mini; 8.0 away from full rotary's
// logits). wick loads each with the same context; the Hugging Face directory of the LongRoPE model
// (config.json with rope_scaling longrope, qkv_proj / gate_up_proj tensors) gives the GGUF's logits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm_model_util.hpp"
#include "wick/error.hpp"
#include "wick/io.hpp"
#include "wick/llm/model.hpp"

using namespace wick;
using namespace wick::llm;
using namespace wick::llm::test_util;

namespace {

const std::string kPhi3 = kLlm + "phi3/";

std::vector<double> logits_of(const std::string& path, size_t context, const std::vector<int32_t>& ids) {
  LoadOptions o = f32_cpu();
  o.context = context;
  auto m = Model::load(path, o);
  EXPECT_EQ(m->config().arch, Arch::Phi3);
  return as_f64(prefill(*m, ids));
}

// Every position's argmax equal, unless llama.cpp's top two are within 1e-3.
void expect_same_argmax(const std::vector<double>& got, const std::vector<double>& want, size_t vocab,
                        const std::string& what) {
  for (size_t r = 0; r * vocab < want.size(); ++r) {
    auto row = [&](const std::vector<double>& v) { return v.begin() + static_cast<std::ptrdiff_t>(r * vocab); };
    const auto gi = std::max_element(row(got), row(got) + static_cast<std::ptrdiff_t>(vocab)) - row(got);
    const auto wi = std::max_element(row(want), row(want) + static_cast<std::ptrdiff_t>(vocab)) - row(want);
    if (gi == wi) continue;
    std::vector<double> s(row(want), row(want) + static_cast<std::ptrdiff_t>(vocab));
    std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
    EXPECT_LT(s[0] - s[1], 1e-3) << what << ": position " << r << " argmax " << gi << ", llama.cpp " << wi;
  }
}

}  // namespace

// Measured: max relative error 2.0e-6 .. 4.6e-6 of each row's largest logit (f32 weights, activations and KV
// cache on both sides; the sums' order differs).
TEST(LlmPhi3, MatchesLlamaCpp) {
  const auto ids = ids_of(read_json(kPhi3 + "expected.json")["prompt_ids"]);
  struct Case {
    std::string model, npy;
    size_t context;
  };
  for (const Case& c : {Case{"model-f32.gguf", "llamacpp_logits.npy", 512},
                        Case{"model-longrope-f32.gguf", "llamacpp_logits_longrope_long.npy", 512},
                        Case{"model-longrope-f32.gguf", "llamacpp_logits_longrope_short.npy", 256},
                        Case{"model-longrope-f32.gguf", "llamacpp_logits_longrope_long.npy", 0},
                        Case{"model-partial-f32.gguf", "llamacpp_logits_partial.npy", 512}}) {
    const std::string what = c.model + " context " + std::to_string(c.context);
    const std::vector<double> got = logits_of(kPhi3 + c.model, c.context, ids);
    const std::vector<double> want = as_f64(load_npy(kPhi3 + c.npy));
    const double e = max_rel_err(got, want, 512);
    std::printf("%s: max relative error %.3g against %s\n", what.c_str(), e, c.npy.c_str());
    EXPECT_LT(e, 1e-5) << what;
    expect_same_argmax(got, want, 512, what);
  }
}

// The Hugging Face directory (LongRoPE from config.json, the attention factor computed as transformers does)
// gives the GGUF's logits with either set of factors, up to the GGUF's attention factor being an f32
// (measured 1.3e-6 and 1.7e-6).
TEST(LlmPhi3, HuggingFaceDirectoryEqualsGguf) {
  const auto ids = ids_of(read_json(kPhi3 + "expected.json")["prompt_ids"]);
  for (size_t ctx : {512u, 256u}) {
    const std::vector<double> hf = logits_of(kPhi3 + "hf-longrope", ctx, ids);
    const std::vector<double> gg = logits_of(kPhi3 + "model-longrope-f32.gguf", ctx, ids);
    EXPECT_LT(max_rel_err(hf, gg, 512), 1e-5) << "context " << ctx;
  }
  LoadOptions o = f32_cpu();
  const auto m = Model::load(kPhi3 + "hf-longrope", o);
  const nlohmann::json e = read_json(kPhi3 + "expected.json");
  EXPECT_EQ(m->config().rope_scaling, RopeScaling::LongRope);
  EXPECT_EQ(m->config().rope_original_max_position, 256u);
  EXPECT_NEAR(m->config().rope_attn_factor, e["rope_attn_factor"].get<double>(), 1e-12);
  EXPECT_EQ(m->config().rope_long_factors, e["rope_long_factors"].get<std::vector<float>>());
}

// What the family cannot run is an error naming it: a rotary fraction past 1, an odd count of rotary dims
// (0.7 of 16: 11), LongRoPE factors
// that do not cover the rotary dims (3/4 of 16 rotated: 6 pairs, the file has 8), a longrope config
// without its factors.
TEST(LlmPhi3, UnsupportedAndBrokenConfigsAreErrors) {
  auto with = [&](const std::function<void(nlohmann::json&)>& f) {
    const std::string dir = hf_copy_with_config(kPhi3 + "hf-longrope", "variant", f);
    return what_of([&] { (void)Model::load(dir, f32_cpu()); });
  };
  EXPECT_NE(with([](nlohmann::json& j) { j["partial_rotary_factor"] = 1.5; }).find("partial_rotary_factor must be"),
            std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["partial_rotary_factor"] = 0.7; }).find("must be even"), std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["partial_rotary_factor"] = 0.75; }).find("needs 6 long and short"),
            std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["rope_scaling"].erase("long_factor"); }).find("long_factor"),
            std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) {
              j["rope_scaling"]["short_factor"] = {1.0, 2.0};
            }).find("short factors"),
            std::string::npos);
}

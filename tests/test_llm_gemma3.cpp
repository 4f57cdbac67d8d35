// The gemma3 family against llama.cpp: tests/fixtures/llm/gemma3 (gen.py) holds a tiny random-weight Gemma 3
// GGUF (6 layers: 5 with a window of 8 keys and rope base 10000, 1 global with base 1e6 and linear scaling 2;
// q/k norms, post-attention and post-feed-forward norms, GeLU gate, embeddings times sqrt(hidden), tied
// output, logits soft-capped at 5) and llama.cpp's logits for a 48-token prompt (CPU, f32 weights and KV
// cache), so most positions are past the window. The Hugging Face directory of the same weights (norms
// stored as w of 1 + w) gives the same logits, and batched equals alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm_model_util.hpp"
#include "wick/io.hpp"
#include "wick/llm/model.hpp"

using namespace wick;
using namespace wick::llm;
using namespace wick::llm::test_util;

namespace {
const std::string kGemma = kLlm + "gemma3/";
}

// Bound 2e-3, measured 6.3e-4 (GGUF and HF directory alike, every position alike): llama.cpp's CPU GeLU
// rounds its input and its output to f16 (GGML_GELU_FP16's table); with that rounding copied into wick's
// gate the error falls to 1.9e-4. A wrong window, norm or scale moves logits by O(1).
TEST(LlmGemma3, MatchesLlamaCpp) {
  const auto ids = ids_of(read_json(kGemma + "expected.json")["prompt_ids"]);
  const std::vector<double> want = as_f64(load_npy(kGemma + "llamacpp_logits.npy"));
  for (const std::string& path : {kGemma + "model-f32.gguf", kGemma + "hf"}) {
    auto m = Model::load(path, f32_cpu());
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.arch, Arch::Gemma3) << path;
    EXPECT_EQ(c.sliding_window, 8u) << path;
    EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, true, true, true, true, false})) << path;
    const double e = max_rel_err(as_f64(prefill(*m, ids)), want, 512);
    std::printf("%s: max relative error %.3g against llama.cpp\n", path.c_str(), e);
    EXPECT_LT(e, 2e-3) << path;
  }
}

// The same directory with its rope settings as transformers 5 writes a two-kind model: rope_parameters with a
// full_attention object (the global layers' rope and scaling) and a sliding_attention one (the local base),
// no rope_theta, rope_scaling or rope_local_base_freq at the top: the same logits.
TEST(LlmGemma3, Transformers5RopeParametersPerLayerKind) {
  const auto ids = ids_of(read_json(kGemma + "expected.json")["prompt_ids"]);
  const std::string dir = hf_copy_with_config(kGemma + "hf", "nested", [](nlohmann::json& cfg) {
    nlohmann::json full = cfg["rope_scaling"];
    full["rope_theta"] = cfg["rope_theta"];
    cfg["rope_parameters"] = {
        {"full_attention", full},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", cfg["rope_local_base_freq"]}}}};
    for (const char* k : {"rope_scaling", "rope_theta", "rope_local_base_freq"}) cfg.erase(k);
  });
  auto nested = Model::load(dir, f32_cpu());
  auto flat = Model::load(kGemma + "hf", f32_cpu());
  EXPECT_EQ(nested->config().rope_local_theta, 10000.0);
  EXPECT_EQ(nested->config().rope_theta, 1e6);
  EXPECT_EQ(nested->config().rope_scaling, RopeScaling::Linear);
  EXPECT_LT(max_rel_err(as_f64(prefill(*nested, ids)), as_f64(prefill(*flat, ids)), 512), 1e-6);
}

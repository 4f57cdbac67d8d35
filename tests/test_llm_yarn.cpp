// YaRN rope scaling (Qwen2.5 / Qwen3 long-context configs) against llama.cpp: tests/fixtures/llm/yarn (gen.py)
// holds a tiny random-weight qwen2 GGUF with rope.scaling.type yarn (factor 4, original context 64 of 256)
// and llama.cpp's logits for a 48-token prompt (CPU, f32 weights and KV cache). The Hugging Face directory
// of the same weights (rope_scaling type yarn) gives the same logits; without its rope_scaling they differ.
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
const std::string kYarn = kLlm + "yarn/";
}

// Measured: max relative error 3.8e-6 of each row's largest logit, from the GGUF and from the directory.
TEST(LlmYarn, MatchesLlamaCpp) {
  const auto ids = ids_of(read_json(kYarn + "expected.json")["prompt_ids"]);
  const std::vector<double> want = as_f64(load_npy(kYarn + "llamacpp_logits_yarn.npy"));
  for (const std::string& path : {kYarn + "model-yarn-f32.gguf", kYarn + "hf-yarn"}) {
    auto m = Model::load(path, f32_cpu());
    EXPECT_EQ(m->config().rope_scaling, RopeScaling::Yarn) << path;
    const double e = max_rel_err(as_f64(prefill(*m, ids)), want, 512);
    std::printf("%s: max relative error %.3g against llama.cpp\n", path.c_str(), e);
    EXPECT_LT(e, 1e-5) << path;
  }
  // The same weights with no rope scaling: the check above can fail.
  auto plain = Model::load(
      hf_copy_with_config(kYarn + "hf-yarn", "unscaled", [](nlohmann::json& j) { j.erase("rope_scaling"); }),
      f32_cpu());
  const double e = max_rel_err(as_f64(prefill(*plain, ids)), want, 512);
  std::printf("without YaRN: max relative error %.3g\n", e);
  EXPECT_GT(e, 0.05);
}

// Qwen2 and Qwen2.5: LLaMA's decoder with a bias on the q, k and v projections (required in every
// layer) and rotary embeddings over halves, in GGUF files too.
#include "archs.hpp"
#include "decoder.hpp"

namespace wick::llm::detail {

std::unique_ptr<Model> build_qwen2(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                   std::vector<float> rope_freq_factors) {
  DecoderSpec s;
  s.attn = attention_spec(c);
  s.attn.bias = true;
  s.attn.rope = RopeKind::Halves;
  return std::make_unique<DecoderModel>(c, src, o, s, rope_freq_factors);
}

}  // namespace wick::llm::detail

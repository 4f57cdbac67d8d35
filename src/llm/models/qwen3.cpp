// Qwen3 (dense): LLaMA's decoder with an RMSNorm over head_dim on each q and k head before rope
// (attn_q_norm / attn_k_norm, required in every layer), no q/k/v bias, rotary embeddings over halves,
// and a head_dim the config may set apart from hidden / heads.
#include "archs.hpp"
#include "decoder.hpp"

namespace wick::llm::detail {

std::unique_ptr<Model> build_qwen3(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                   std::vector<float> rope_freq_factors) {
  DecoderSpec s;
  s.attn = attention_spec(c);
  s.attn.qk_norm = true;
  s.attn.rope = RopeKind::Halves;
  return std::make_unique<DecoderModel>(c, src, o, s, rope_freq_factors);
}

}  // namespace wick::llm::detail

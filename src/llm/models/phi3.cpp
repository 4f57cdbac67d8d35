// Phi-3 (mini, medium, 3.5-mini) and Phi-4: LLaMA's decoder with q|k|v in one tensor and gate|up in
// one tensor, rotary embeddings over halves, and for the long-context variants LongRoPE: per-pair
// frequency divisors, long ones where the context passes the original one (LoadOptions::context, as
// llama.cpp picks them by its context size), short ones within it, and cos and sin scaled.
#include "archs.hpp"
#include "decoder.hpp"

namespace wick::llm::detail {

std::unique_ptr<Model> build_phi3(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                  std::vector<float> rope_freq_factors) {
  DecoderSpec s;
  s.attn = attention_spec(c);
  s.attn.rope = RopeKind::Halves;
  s.attn.fused_qkv = true;
  s.fused_gate_up = true;
  s.sliding_window = c.sliding_window;
  if (c.rope_scaling == RopeScaling::LongRope) {
    const size_t ctx = o.context ? o.context : c.max_position;
    rope_freq_factors = ctx > c.rope_original_max_position ? c.rope_long_factors : c.rope_short_factors;
  }
  return std::make_unique<DecoderModel>(c, src, o, s, rope_freq_factors);
}

}  // namespace wick::llm::detail

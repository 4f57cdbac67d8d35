// Gemma 3 (1B-27B, text): q/k RMS norms, an RMS norm after attention and after the feed-forward (besides
// the ones before), a GeLU (tanh) gate, embeddings scaled by sqrt(hidden), rotary embeddings over halves,
// and the 5 local : 1 global layer pattern: the window's layers rotate with their own base
// (rope_local_theta) and no scaling, the others with rope_theta and the config's scaling. The q k^T scale
// is query_pre_attn_scalar^-1/2; logits soft-capped where the config says.
#include <cmath>

#include "archs.hpp"
#include "decoder.hpp"

namespace wick::llm::detail {

std::unique_ptr<Model> build_gemma3(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                    std::vector<float> rope_freq_factors) {
  DecoderSpec s;
  s.attn = attention_spec(c);
  s.attn.qk_norm = true;
  s.attn.rope = RopeKind::Halves;
  s.attn.scale = c.attention_scale;
  s.attn.post_norm = true;
  s.sliding_window = c.sliding_window;
  s.sliding_layers = c.sliding_layers;
  if (c.sliding_window != 0) s.rope_local_theta = c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
  s.gelu = true;
  s.post_norms = true;
  s.embed_scale = std::sqrt(double(c.hidden));
  s.final_softcap = c.final_logit_softcap;
  return std::make_unique<DecoderModel>(c, src, o, s, rope_freq_factors);
}

}  // namespace wick::llm::detail

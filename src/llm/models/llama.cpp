// LLaMA 2/3.x, TinyLlama, SmolLM2 and Mistral: the pre-norm decoder with GQA attention, rotary
// embeddings (interleaved pairs in GGUF files, halves in Hugging Face checkpoints) and a SwiGLU MLP;
// biases only where the checkpoint has them (attention_bias); Mistral's sliding window where its
// config.json sets one.
#include "archs.hpp"
#include "decoder.hpp"

namespace wick::llm::detail {

std::unique_ptr<Model> build_llama(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                   std::vector<float> rope_freq_factors) {
  DecoderSpec s;
  s.attn = attention_spec(c);
  s.attn.bias = c.qkv_bias;
  s.attn.rope = c.rope_interleaved ? RopeKind::Interleaved : RopeKind::Halves;
  s.sliding_window = c.sliding_window;
  return std::make_unique<DecoderModel>(c, src, o, s, rope_freq_factors);
}

}  // namespace wick::llm::detail

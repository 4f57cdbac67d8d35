// The table of supported architectures (archs.hpp).
#include "archs.hpp"

#include "wick/error.hpp"

namespace wick::llm {

const char* arch_to_string(Arch a) { return detail::arch_info(a).name; }

namespace detail {
namespace {

// The pre-norm decoder's tensors (LLaMA's layout, shared by Mistral and Qwen2/3).
const std::vector<TensorName> kDecoderModelTensors = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
const std::vector<TensorName> kDecoderLayerTensors = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"}};

// Phi-3's layout: q|k|v in one tensor, gate|up in one tensor.
const std::vector<TensorName> kPhi3LayerTensors = {
    {"attn_norm", "input_layernorm"},         {"attn_qkv", "self_attn.qkv_proj"}, {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"}, {"ffn_up", "mlp.gate_up_proj"},     {"ffn_down", "mlp.down_proj"}};

// Gemma 3's: q/k norms, a norm after attention and after the feed-forward, and one before it.
const std::vector<TensorName> kGemma3LayerTensors = {{"attn_norm", "input_layernorm"},
                                                     {"attn_q", "self_attn.q_proj"},
                                                     {"attn_k", "self_attn.k_proj"},
                                                     {"attn_v", "self_attn.v_proj"},
                                                     {"attn_output", "self_attn.o_proj"},
                                                     {"attn_q_norm", "self_attn.q_norm"},
                                                     {"attn_k_norm", "self_attn.k_norm"},
                                                     {"post_attention_norm", "post_attention_layernorm"},
                                                     {"ffn_norm", "pre_feedforward_layernorm"},
                                                     {"post_ffw_norm", "post_feedforward_layernorm"},
                                                     {"ffn_gate", "mlp.gate_proj"},
                                                     {"ffn_up", "mlp.up_proj"},
                                                     {"ffn_down", "mlp.down_proj"}};

HParamKeys with_window() {
  HParamKeys k;
  k.sliding_window = {nullptr, "sliding_window"};
  return k;
}

HParamKeys gemma3_keys() {
  HParamKeys k;
  k.sliding_window = {"attention.sliding_window", "sliding_window"};
  k.rms_eps.hf = "rms_norm_eps";
  return k;
}

}  // namespace

const std::vector<ArchInfo>& arch_table() {
  static const std::vector<ArchInfo> table = {
      {
          // LLaMA 2/3.x, TinyLlama, SmolLM2; Mistral's GGUFs say llama too.
          .arch = Arch::Llama,
          .name = "llama",
          .gguf_arch = "llama",
          .hf_types = {"llama"},
          .keys = {},
          .model_tensors = kDecoderModelTensors,
          .layer_tensors = kDecoderLayerTensors,
          .required = {},
          .qkv_bias = false,
          .qk_norm = false,
          .gguf_rope_interleaved = true,
          .build = build_llama,
      },
      {
          .arch = Arch::Mistral,
          .name = "mistral",
          .gguf_arch = nullptr,
          .hf_types = {"mistral"},
          .keys = with_window(),
          .model_tensors = kDecoderModelTensors,
          .layer_tensors = kDecoderLayerTensors,
          .required = {},
          .qkv_bias = false,
          .qk_norm = false,
          .gguf_rope_interleaved = true,
          .build = build_llama,
      },
      {
          .arch = Arch::Qwen2,
          .name = "qwen2",
          .gguf_arch = "qwen2",
          .hf_types = {"qwen2"},
          .keys = {},
          .model_tensors = kDecoderModelTensors,
          .layer_tensors = kDecoderLayerTensors,
          .required = {"attn_q.bias", "attn_k.bias", "attn_v.bias"},
          .qkv_bias = true,
          .qk_norm = false,
          .gguf_rope_interleaved = false,
          .build = build_qwen2,
      },
      {
          .arch = Arch::Qwen3,
          .name = "qwen3",
          .gguf_arch = "qwen3",
          .hf_types = {"qwen3"},
          .keys = {},
          .model_tensors = kDecoderModelTensors,
          .layer_tensors = kDecoderLayerTensors,
          .required = {"attn_q_norm.weight", "attn_k_norm.weight"},
          .qkv_bias = false,
          .qk_norm = true,
          .gguf_rope_interleaved = false,
          .build = build_qwen3,
      },
      {
          // Phi-3 mini/medium, Phi-3.5-mini, Phi-4: config.json's sliding_window is applied as
          // transformers does; GGUF files' is not, as llama.cpp does not.
          .arch = Arch::Phi3,
          .name = "phi3",
          .gguf_arch = "phi3",
          .hf_types = {"phi3"},
          .keys = with_window(),
          .model_tensors = kDecoderModelTensors,
          .layer_tensors = kPhi3LayerTensors,
          .required = {"attn_qkv.weight"},
          .qkv_bias = false,
          .qk_norm = false,
          .gguf_rope_interleaved = false,
          .build = build_phi3,
      },
      {
          // Gemma 3 (1B-27B, text): config.json model_type gemma3_text (Gemma3ForCausalLM).
          .arch = Arch::Gemma3,
          .name = "gemma3",
          .gguf_arch = "gemma3",
          .hf_types = {"gemma3_text"},
          .keys = gemma3_keys(),
          .model_tensors = kDecoderModelTensors,
          .layer_tensors = kGemma3LayerTensors,
          .required = {"attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight", "post_ffw_norm.weight"},
          .qkv_bias = false,
          .qk_norm = true,
          .gguf_rope_interleaved = false,
          .build = build_gemma3,
      },
  };
  return table;
}

const ArchInfo& arch_info(Arch a) {
  for (const ArchInfo& r : arch_table())
    if (r.arch == a) return r;
  throw Error(ErrorKind::Internal, "arch_info: architecture " + std::to_string(int(a)) + " has no table row");
}

const ArchInfo* find_gguf_arch(const std::string& name) {
  for (const ArchInfo& r : arch_table())
    if (r.gguf_arch && name == r.gguf_arch) return &r;
  return nullptr;
}

const ArchInfo* find_hf_type(const std::string& type) {
  for (const ArchInfo& r : arch_table())
    for (const std::string& t : r.hf_types)
      if (t == type) return &r;
  return nullptr;
}

std::string supported_gguf_archs() {
  std::string s;
  for (const ArchInfo& r : arch_table())
    if (r.gguf_arch) s += (s.empty() ? "" : ", ") + std::string(r.gguf_arch);
  return s;
}

std::string supported_hf_types() {
  std::string s;
  for (const ArchInfo& r : arch_table())
    for (const std::string& t : r.hf_types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

std::string hf_tensor_name(const ArchInfo& a, const std::string& g) {
  const size_t dot = g.rfind('.');
  const std::string stem = dot == std::string::npos ? g : g.substr(0, dot);
  const std::string suffix = dot == std::string::npos ? "" : g.substr(dot);  // ".weight" / ".bias"
  for (const TensorName& t : a.model_tensors)
    if (stem == t.gguf) return t.hf + suffix;
  if (stem.rfind("blk.", 0) == 0) {
    const size_t d2 = stem.find('.', 4);
    if (d2 != std::string::npos) {
      const std::string layer = stem.substr(4, d2 - 4), part = stem.substr(d2 + 1);
      for (const TensorName& t : a.layer_tensors)
        if (part == t.gguf) return "model.layers." + layer + "." + t.hf + suffix;
    }
  }
  return g;
}

void check_required_tensors(const ArchInfo& a, const ModelConfig& c, const WeightSource& src) {
  for (size_t l = 0; l < c.n_layers; ++l)
    for (const std::string& part : a.required) {
      const std::string n = "blk." + std::to_string(l) + "." + part;
      if (!src.has(n))
        throw Error(ErrorKind::Argument, "model (" + src.path() + "): missing tensor " + src.file_name(n) + ": every " +
                                             a.name + " layer has it; the file is incomplete or of another family");
    }
}

}  // namespace detail
}  // namespace wick::llm

#pragma once
// The table of supported architectures: one row per family, read by config parsing (GGUF
// general.architecture, config.json model_type, the hyper-parameter keys), by the Hugging Face weight
// source (tensor names) and by Model::load (the required tensors, the builder). A new family is a row
// here and a builder in models/ (docs/ARCHITECTURE.md).
#include <memory>
#include <string>
#include <vector>

#include "model_impl.hpp"

namespace wick::llm::detail {

// A hyper-parameter's key: in GGUF after "<general.architecture>." (nullptr: GGUF has none), and in
// config.json (nullptr: none).
struct HParamKey {
  const char* gguf;
  const char* hf;
};

struct HParamKeys {
  HParamKey context_length{"context_length", "max_position_embeddings"};
  HParamKey hidden{"embedding_length", "hidden_size"};
  HParamKey n_layers{"block_count", "num_hidden_layers"};
  HParamKey intermediate{"feed_forward_length", "intermediate_size"};
  HParamKey n_heads{"attention.head_count", "num_attention_heads"};
  HParamKey n_kv_heads{"attention.head_count_kv", "num_key_value_heads"};
  HParamKey head_dim{"attention.key_length", "head_dim"};
  HParamKey value_dim{"attention.value_length", nullptr};
  HParamKey rope_dim{"rope.dimension_count", nullptr};
  HParamKey rms_eps{"attention.layer_norm_rms_epsilon", "rms_norm_eps"};
  HParamKey rope_theta{"rope.freq_base", "rope_theta"};
  HParamKey vocab_size{nullptr, "vocab_size"};               // GGUF: token_embd.weight's rows
  HParamKey tie_embeddings{nullptr, "tie_word_embeddings"};  // GGUF: no output.weight
  HParamKey attention_bias{nullptr, "attention_bias"};       // optional q/k/v/o bias
  HParamKey sliding_window{nullptr, nullptr};                // a window on every layer
};

// A tensor's name in GGUF and in a Hugging Face checkpoint, without ".weight" / ".bias"; a layer's
// tensors are named after "blk.N." and "model.layers.N.".
struct TensorName {
  const char* gguf;
  const char* hf;
};

// Builds the model from a parsed config and its weights; rope_freq_factors: GGUF's rope_freqs.weight
// (llama3 scaling), empty otherwise.
using Builder = std::unique_ptr<Model> (*)(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                           std::vector<float> rope_freq_factors);

struct ArchInfo {
  Arch arch;
  const char* name;                   // arch_to_string
  const char* gguf_arch;              // general.architecture; nullptr: files of this family say another's
  std::vector<std::string> hf_types;  // config.json model_type values
  HParamKeys keys;
  std::vector<TensorName> model_tensors;  // outside the layers
  std::vector<TensorName> layer_tensors;  // in each layer
  // Per-layer tensors (GGUF names after "blk.N.") every layer of a file of this family holds; a file
  // without one is an Error naming it, never another model. The builder reads them.
  std::vector<std::string> required;
  bool qkv_bias;               // q/k/v projections have a bias (required)
  bool qk_norm;                // RMSNorm over head_dim on q and k, per head, before rope
  bool gguf_rope_interleaved;  // GGUF q/k rows permuted for interleaved rope (convert_hf_to_gguf.py)
  Builder build;
};

const std::vector<ArchInfo>& arch_table();
const ArchInfo& arch_info(Arch a);
const ArchInfo* find_gguf_arch(const std::string& general_architecture);  // nullptr: none
const ArchInfo* find_hf_type(const std::string& model_type);              // nullptr: none
std::string supported_gguf_archs();                                       // "llama, qwen2, qwen3"
std::string supported_hf_types();

// GGUF name -> the checkpoint's name, e.g. "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight";
// a name the row does not map is returned as it is.
std::string hf_tensor_name(const ArchInfo& a, const std::string& gguf_name);

// Error naming the first required tensor (ArchInfo::required) the file lacks, in any layer.
void check_required_tensors(const ArchInfo& a, const ModelConfig& c, const WeightSource& src);

// The builders of models/*.cpp.
std::unique_ptr<Model> build_llama(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                   std::vector<float> rope_freq_factors);
std::unique_ptr<Model> build_qwen2(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                   std::vector<float> rope_freq_factors);
std::unique_ptr<Model> build_qwen3(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                   std::vector<float> rope_freq_factors);
std::unique_ptr<Model> build_phi3(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                  std::vector<float> rope_freq_factors);
std::unique_ptr<Model> build_gemma3(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                    std::vector<float> rope_freq_factors);

}  // namespace wick::llm::detail

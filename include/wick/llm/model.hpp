#pragma once
// LLaMA-family language models (LLaMA 2/3.x, TinyLlama, SmolLM2, Mistral, Qwen2/2.5, Qwen3, Phi-3/4, Gemma 3) built on
// wick's public Tensor API, loaded from a GGUF file or a Hugging Face directory.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wick/device.hpp"
#include "wick/dtype.hpp"
#include "wick/tensor.hpp"

namespace wick::llm {

enum class Arch { Llama, Mistral, Qwen2, Qwen3, Phi3, Gemma3 };
// "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3"
const char* arch_to_string(Arch a);

enum class RopeScaling { None, Linear, Llama3, LongRope, Yarn };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;  // as the file says: GGUF general.architecture or config.json model_type
  size_t vocab_size = 0, hidden = 0, intermediate = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0,
         max_position = 0;
  double rms_eps = 1e-5, rope_theta = 10000.0;
  size_t rope_dim = 0;  // rotated dims per head: head_dim, or the first ones (partial rotary: Phi-4-mini)
  RopeScaling rope_scaling = RopeScaling::None;
  double rope_factor = 1.0;                                        // linear, llama3 and YaRN
  double rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;  // llama3
  size_t rope_original_max_position = 8192;                        // llama3, LongRoPE, YaRN
  double rope_yarn_beta_fast = 32.0, rope_yarn_beta_slow = 1.0;    // YaRN: the ramp's ends, in rotations
  // LongRoPE (Phi-3/4 long-context variants): per-pair divisors of the rotary frequencies for contexts
  // past rope_original_max_position (long) and within it (short).
  std::vector<float> rope_long_factors, rope_short_factors;
  double rope_attn_factor = 1.0;  // LongRoPE and YaRN: the factor on cos and sin
  bool tie_embeddings = false;    // the output projection is the token embedding
  bool qkv_bias = false;          // Qwen2
  bool qk_norm = false;           // Qwen3: RMSNorm over head_dim on q and k, per head, before rope
  // GGUF llama-arch files have q/k rows permuted by convert_hf_to_gguf.py so rotary pairs are
  // interleaved (rope_i); HF checkpoints and qwen GGUFs rotate halves (rope).
  bool rope_interleaved = false;
  // Mistral (config.json sliding_window): a query at position p sees keys p-W+1 .. p. 0: no window.
  // GGUF files have none (llama.cpp's llama arch ignores it too).
  size_t sliding_window = 0;
  // Gemma 3: which layers take the window (the others see every key); empty: every layer. Those layers
  // rotate with base rope_local_theta and no scaling; the others with rope_theta and rope_scaling.
  std::vector<bool> sliding_layers;
  double rope_local_theta = 0;     // 0: rope_theta
  double attention_scale = 0;      // q k^T scale; 0: 1 / sqrt(head_dim)
  double final_logit_softcap = 0;  // logits = cap * tanh(logits / cap); 0: none
  double norm_weight_offset = 0;   // RMSNorm weights applied as offset + w (Gemma's checkpoints: 1)
};

// The fused kernels of a one-token decode step on a GPU, each on by default. Turning one off runs
// the unfused ops in its place: the same numbers up to rounding, for timing one against the other
// (`wick bench-llm --decode-off ...`, docs/llm.md). The CPU runs none of them.
struct DecodeOptions {
  // q and k weights stacked into one product where v's quantized type differs from theirs (stacking
  // q, k and v together needs one type; llama-quantize's Q4_K_M gives some layers a Q6_K v).
  bool stack_qk = true;
  // A norm or silu_mul writes its output in Q8_1 too, for the quantized product that reads it (one
  // quantize kernel fewer per product); where that product is stacked q|k|v or gate|up, the norm
  // runs inside the product's kernel.
  bool q8_1_inputs = true;
  // In a recorded step, the rope of q and k and both KV-cache writes in one kernel (rope_kv_append).
  bool rope_kv_append = true;
  // Plain (not quantized) stacked gate|up weights: the silu product in the matrix-vector kernel's
  // epilogue (matmul_swiglu).
  bool matmul_swiglu = true;
  // Positions below 256 replay a second recorded step that attends over the cache's first 256 rows
  // (one run of keys: no merge kernel); off: one recording over the whole cache.
  bool short_view = true;
};

struct LoadOptions {
  Device device = Device::cpu();
  // Activations and non-quantized weights: default f32 on the CPU, f16 on a GPU (bf16 when the
  // file's weights are bf16).
  std::optional<DType> dtype;
  std::function<void(size_t done_bytes, size_t total_bytes)> progress;  // called per tensor
  // On a GPU, one-token decode steps are recorded once per cache into a graph (wick::Graph) and
  // replayed; false launches every op of every step (the same results, slower: for comparisons).
  bool graphs = true;
  DecodeOptions decode;
  // The longest context the model's caches will hold (0: the model's context length). LongRoPE models
  // take their long factors past the original context and their short ones within it, as llama.cpp
  // does with its context size (`wick run --ctx`).
  size_t context = 0;
};

// Per layer K and V, each (1, n_kv_heads, capacity, head_dim), preallocated and written in place.
class KvCache {
 public:
  KvCache() = default;
  KvCache(size_t n_layers, size_t n_kv_heads, size_t capacity, size_t head_dim, DType dtype, Device device);
  size_t pos() const { return pos_; }  // tokens held
  size_t capacity() const { return capacity_; }
  size_t bytes() const;
  DType dtype() const { return dtype_; }
  size_t n_layers() const { return k_.size(); }
  void clear() { pos_ = 0; }
  // Drops tokens past n (n <= pos), e.g. to reuse a shared prompt prefix.
  void truncate(size_t n);

  // Used by the model's forward: the full preallocated buffers, and moving the position on.
  Tensor& k(size_t layer);
  Tensor& v(size_t layer);
  void advance(size_t n);

 private:
  std::vector<Tensor> k_, v_;
  size_t capacity_ = 0, pos_ = 0;
  DType dtype_ = DType::F16;
};

// A paged KV cache: per layer, K and V rows for n_blocks blocks of block_tokens tokens. Row
// (slot) block * block_tokens + i holds the i-th token of that block, its n_kv_heads x head_dim values.
// Which blocks a sequence holds is its block table (the engine's KvBlockPool keeps them).
class PagedKvCache {
 public:
  PagedKvCache() = default;
  PagedKvCache(size_t n_layers, size_t n_kv_heads, size_t head_dim, size_t n_blocks, size_t block_tokens, DType dtype,
               Device device);
  size_t n_blocks() const { return n_blocks_; }
  size_t block_tokens() const { return block_tokens_; }
  size_t n_layers() const { return k_.size(); }
  size_t bytes() const;
  DType dtype() const { return dtype_; }
  // (n_blocks * block_tokens, n_kv_heads * head_dim), written and read by Model::forward_batch.
  Tensor& k(size_t layer);
  Tensor& v(size_t layer);

 private:
  std::vector<Tensor> k_, v_;
  size_t n_blocks_ = 0, block_tokens_ = 0;
  DType dtype_ = DType::F16;
};

// One sequence's part of a batched forward: its tokens of this step (one decode token, or a chunk of
// its prompt) at positions pos0 .. pos0 + tokens.size() - 1, after the pos0 tokens the cache already
// holds for it in the blocks of its block table (which covers every position through the last new one).
struct BatchSeq {
  std::span<const int32_t> tokens;
  size_t pos0 = 0;
  std::span<const int32_t> blocks;
  bool logits = true;  // whether forward_batch returns the logits of its last token
};

class Model {
 public:
  virtual ~Model() = default;
  // A .gguf file or a Hugging Face directory (config.json + *.safetensors). Unsupported
  // architecture, missing tensor or wrong shape: Error naming it, the file and the shapes.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& o = {});

  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  size_t weight_bytes() const { return weight_bytes_; }  // on the device
  // KV cache for max_ctx tokens; default dtype f16 (bf16 for bf16 models).
  KvCache make_cache(size_t max_ctx, std::optional<DType> dtype = std::nullopt) const;
  // Runs tokens at positions cache.pos().. through the model, appends their K/V to the cache and
  // returns f32 logits (n_tokens, vocab) when all_logits, else (1, vocab) for the last token.
  // Error when the cache would overflow.
  virtual Tensor forward(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits = false) = 0;

  // A paged KV cache of n_blocks blocks; default dtype as make_cache's.
  PagedKvCache make_paged_cache(size_t n_blocks, size_t block_tokens, std::optional<DType> dtype = std::nullopt) const;
  // Bytes of K and V a token takes in every layer together, in a cache of that dtype.
  size_t kv_bytes_per_token(DType dtype) const;
  // One forward over several sequences at once: every sequence's new tokens are written to its blocks
  // and attend over its own earlier tokens; returns f32 logits (rows, vocab), one row for each
  // sequence with logits set, in order. A sequence's rows are the numbers forward() gives it alone, up
  // to the rounding of products over more rows. Error for bad ids, blocks or positions.
  // A model without one (a test's scripted model) throws Error(Unsupported).
  virtual Tensor forward_batch(const std::vector<BatchSeq>& seqs, PagedKvCache& cache);

 protected:
  ModelConfig config_;
  Device device_ = Device::cpu();
  DType dtype_ = DType::F32;
  DType default_cache_dtype_ = DType::F16;
  size_t weight_bytes_ = 0;
};

}  // namespace wick::llm

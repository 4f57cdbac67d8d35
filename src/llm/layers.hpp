#pragma once
// The blocks a decoder-only model is built from, each written once: the embedding, the rotary
// embedding (its variants and scaling kinds), attention (GQA, q/k norm, bias, the KV-cache write),
// the gated MLP, the output head, and the norm between sublayers. The decode fusions of a GPU step
// (Q8_1 activations from their producers, stacked q/k/v and gate/up products, the norm inside the
// product, rope_kv_append, matmul_swiglu) are chosen here, by Fusions, and nowhere else.
#include <string>
#include <utility>
#include <vector>

#include "model_impl.hpp"

namespace wick::llm::detail {

// Which fused kernels a forward runs: the model's DecodeOptions where the device has the fused
// kernels (a GPU); the Q8_1 and norm-in-product choices also depend on the rows (one-token steps).
class Fusions {
 public:
  Fusions(Device device, const DecodeOptions& o) : gpu_(device.is_gpu()), o_(o) {}
  // Stack q/k/v and gate/up into one product each. Only on a GPU: the CPU's per-op cost is small
  // and stacking would copy weights it otherwise maps from the file.
  bool stack() const { return gpu_; }
  bool stack_qk() const { return gpu_ && o_.stack_qk; }
  // Whether the producer of lin's input also writes it in Q8_1: a quantized product of one row on a
  // GPU (its matrix-vector path quantizes x to Q8_1; the producer's kernel does it instead, one
  // launch fewer). The CPU quantizes activations its own way; prefill has no use for it.
  bool q8_1_input(const Linear& lin, size_t rows) const {
    return o_.q8_1_inputs && lin.q.defined() && gpu_ && rows == 1 && lin.q.dim(1) % 32 == 0;
  }
  // Whether the norm before a stacked quantized product (q|k|v, gate|up) runs inside the product's
  // kernel (fast::add_rms_norm_matmul_t): one row on a GPU, as q8_1_input.
  bool norm_in_product(const Linear& lin, size_t rows) const {
    return lin.defined() && !lin.b.defined() && q8_1_input(lin, rows);
  }
  bool rope_kv_append() const { return o_.rope_kv_append; }
  bool matmul_swiglu() const { return o_.matmul_swiglu; }
  bool short_view() const { return o_.short_view; }

 private:
  bool gpu_;
  DecodeOptions o_;
};

// The residual stream between sublayers: x, and the last sublayer's output not yet added to it.
// The next norm adds it (add_rms_norm: one kernel, the same numbers as add then rms_norm).
struct Residual {
  Tensor x, pending;
  Tensor finish() const { return pending.defined() ? x.add(pending) : x; }
};

// A sublayer's input: x + pending through RMSNorm, with its rows in Q8_1 (hq) where `first`, the
// first product to read it, takes them. Where first is the sublayer's only product of h (stacked)
// and the norm runs inside it, h is empty and y is that product's output.
struct Normed {
  Tensor h, y;
  QTensor hq;
};
Normed pre_norm(Residual& r, const Tensor& weight, double eps, const Linear& first, bool stacked, const Fusions& f,
                size_t rows);

enum class RopeKind {
  Halves,       // rotate the first half of a head against the second (transformers, NEOX)
  Interleaved,  // rotate pairs (2i, 2i+1): GGUF llama files, whose q/k rows convert_hf_to_gguf.py permuted
};

// Rotary inverse frequencies as transformers computes them (in f32), with the config's scaling
// (linear, llama3) or GGUF's per-pair divisors (rope_freqs.weight).
std::vector<float> rope_inverse_frequencies(const ModelConfig& c, const std::vector<float>& freq_factors);

// cos/sin tables for positions 0 .. rows-1 on the device, computed on the host as transformers
// does (f32 angle, then cos/sin) and uploaded once, so decode steps upload nothing for rope.
class RopeTable {
 public:
  RopeTable() = default;
  // scale multiplies cos and sin (LongRoPE's attention factor).
  RopeTable(std::vector<float> inv_freq, Device device, DType dtype, double scale = 1.0)
      : inv_freq_(std::move(inv_freq)), device_(device), dtype_(dtype), scale_(scale) {}
  void ensure(size_t rows);
  size_t half() const { return inv_freq_.size(); }
  const Tensor& cos() const { return cos_; }
  const Tensor& sin() const { return sin_; }

 private:
  std::vector<float> inv_freq_;
  Device device_ = Device::cpu();
  DType dtype_ = DType::F32;
  double scale_ = 1.0;
  Tensor cos_, sin_;
};

// Where a forward's K/V rows go and which keys it sees, with the rotary rows of its tokens: host
// positions (pos0, key0), or for a recorded step `step` on the device, (position, position + 1), so
// the same graph serves every position whose keys lie in the cache's first `view` rows.
struct Step {
  size_t rows;  // tokens in this forward
  const Tensor& cos;
  const Tensor& sin;
  size_t pos0, key0;
  const Tensor* step;
  size_t view;
};

// Where a batched forward's K/V rows go and which keys each token sees (Model::forward_batch), as
// fast::paged_attention takes them: each token's rotary rows, cache row (slot), sequence (a row of the
// block table) and position, all on the device, and the sliding window.
struct PagedStep {
  size_t rows;
  Tensor cos, sin;                      // (rows, rope half)
  Tensor slot, seq, pos, block_table;   // i32: (rows) x 3, (sequences, most blocks)
  size_t block_tokens = 0, window = 0;  // window 0: every earlier key
};

struct AttentionSpec {
  size_t hidden, n_heads, n_kv_heads, head_dim;
  double eps;    // of the q/k norms
  bool bias;     // q/k/v biases required (any bias the file holds is used)
  bool qk_norm;  // RMSNorm over head_dim on q and k, per head, before rope
  RopeKind rope;
  bool fused_qkv = false;  // the file holds q|k|v as one tensor (attn_qkv; Phi-3)
  size_t rope_dim = 0;     // dims of each head rotated, the first ones (Phi-4-mini: 3/4); 0: all
  double scale = 0;        // q k^T scale; 0: 1 / sqrt(head_dim)
  bool post_norm = false;  // RMSNorm (post_attention_norm) on the output before the residual add (Gemma 3)
};

// Grouped-query self-attention with rotary embeddings, causal, over the KV cache: the pre-norm, the
// q/k/v projections (stacked on a GPU), q/k norm, rope, the cache write, attention and the output
// projection, whose result it leaves pending in the residual stream.
class Attention {
 public:
  void load(WeightLoader& ld, size_t layer, const AttentionSpec& s, const Fusions& f);
  void forward(Residual& r, Tensor& k_cache, Tensor& v_cache, const Step& s, const Fusions& f, DType dtype) const;
  // The same over a batch of sequences and a paged cache (k_cache, v_cache: PagedKvCache's rows).
  void forward_paged(Residual& r, Tensor& k_cache, Tensor& v_cache, const PagedStep& s, const Fusions& f,
                     DType dtype) const;

 private:
  // The pre-norm and the products: h (and its Q8_1 rows hq) where a product still reads it, y the stacked
  // product's output, v as (1, T, n_kv_heads, head_dim).
  struct Projected {
    Tensor h;
    QTensor hq;
    Tensor y, v;
  };
  Projected project(Residual& r, size_t T, const Fusions& f) const;
  // q (1, n_heads, T, head_dim) and k (1, n_kv_heads, T, head_dim), q/k-normed and rotated.
  std::pair<Tensor, Tensor> rope_qk(const Projected& p, size_t T, const Tensor& cos, const Tensor& sin) const;
  std::optional<double> scale() const { return s_.scale > 0 ? std::optional<double>(s_.scale) : std::nullopt; }
  // The output projection's result as the residual stream takes it: through post_norm_ where there is one.
  Tensor finish(Tensor y) const { return post_norm_.defined() ? y.rms_norm(post_norm_, s_.eps) : y; }

  AttentionSpec s_{};
  Tensor norm_, q_norm_, k_norm_, post_norm_;
  Linear q_, k_, v_, o_;
  Linear qkv_;  // on a GPU, q/k/v stacked where they can be
  Linear qk_;   // else q and k stacked (v's type differs: llama-quantize's Q4_K_M gives some layers Q6_K v)
};

// The gated MLP (SwiGLU: down(silu(gate(x)) * up(x))) with its pre-norm, its result left pending.
class GatedMlp {
 public:
  // fused: the file's ffn_up holds gate|up (2 x intermediate rows; Phi-3), and there is no ffn_gate.
  // gelu: GeLU (tanh) of the gate instead of SiLU; post_norm: RMSNorm (post_ffw_norm) on the output (Gemma 3).
  void load(WeightLoader& ld, size_t layer, size_t hidden, size_t intermediate, double eps, const Fusions& f,
            bool fused = false, bool gelu = false, bool post_norm = false);
  void forward(Residual& r, const Fusions& f) const;

 private:
  size_t ff_ = 0;
  double eps_ = 0;
  bool gelu_ = false;
  Tensor norm_, post_norm_;
  Linear gate_, up_, down_;
  Linear gate_up_;  // on a GPU, stacked where they can be
};

// Token embedding rows: plain, or quantized (gathered and dequantized by QTensor::embedding).
class Embedding {
 public:
  void load(WeightLoader& ld, const WeightSource& src, size_t vocab, size_t hidden, DType dtype);
  Tensor forward(const Tensor& ids) const;
  // One token's row by device copies only (the caller checked the id): no id upload, and no
  // embedding op, whose id check reads a flag back from the device.
  Tensor row(int32_t id) const;
  Linear as_linear() const;  // the tied output projection

 private:
  Tensor w_;
  QTensor q_;
  DType dtype_ = DType::F32;
};

// The final norm and the projection to f32 logits.
class OutputHead {
 public:
  void load(WeightLoader& ld, size_t hidden, size_t vocab, double eps, const Embedding* tied);
  Tensor forward(const Tensor& x, const Fusions& f) const;

 private:
  Tensor norm_;
  Linear out_;
  double eps_ = 0;
};

}  // namespace wick::llm::detail

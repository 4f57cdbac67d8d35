#pragma once
// A decoder-only transformer over the blocks of layers.hpp: the embedding, a stack of layers of
// attention and a gated MLP (pre-norm, residual), the output head. It owns what every such model
// shares: the argument checks of forward(), the sliding window, the rotary tables and the GPU
// graph of a one-token decode step (recorded once per cache, replayed). A family's builder
// (models/*.cpp) declares its DecoderSpec.
#include <memory>
#include <vector>

#include "layers.hpp"

namespace wick::llm::detail {

struct DecoderSpec {
  AttentionSpec attn;
  // A query at position p sees keys p-W+1 .. p (Mistral); 0: every earlier key.
  size_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // which layers take the window; empty: all (Gemma 3: 5 of every 6)
  double rope_local_theta = 0;       // > 0: the window's layers rotate with this base and no scaling
  bool fused_gate_up = false;        // ffn_up holds gate|up (GatedMlp::load)
  bool gelu = false;                 // GeLU (tanh) gate instead of SiLU
  bool post_norms = false;           // post_ffw_norm after the feed-forward (attention's: AttentionSpec::post_norm)
  double embed_scale = 0;            // > 0: embeddings times this (Gemma: sqrt(hidden), in the compute dtype)
  double final_softcap = 0;          // > 0: logits = cap * tanh(logits / cap)
};

// The attention spec every family starts from: the config's sizes, no bias, no q/k norm, the
// config's rope order.
AttentionSpec attention_spec(const ModelConfig& c);

// The activations' dtype: o.dtype, else f32 on the CPU and f16 on a GPU (bf16 for bf16 weights).
DType compute_dtype(const LoadOptions& o, const WeightSource& src);

class DecoderModel : public Model {
 public:
  DecoderModel(const ModelConfig& c, const WeightSource& src, const LoadOptions& o, const DecoderSpec& spec,
               const std::vector<float>& rope_freq_factors);
  Tensor forward(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits) override;
  Tensor forward_batch(const std::vector<BatchSeq>& seqs, PagedKvCache& cache) override;

 private:
  struct Layer {
    Attention attn;
    GatedMlp mlp;
  };
  // A recorded decode step: its inputs, its output, and the cache it writes (the graph holds the
  // cache's addresses: another cache, or this one reallocated, needs a new recording).
  struct DecodeGraph {
    Tensor x_in, cs_in, step, logits;
    Graph graph;
    std::vector<std::weak_ptr<Storage>> kv;
    bool serves(KvCache& cache) const;
  };

  Tensor run(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits);
  // local: the Step of the window's layers where it differs from s (its key0, its rotary table).
  Tensor layers(Tensor x, KvCache& cache, const Step& s, const Step* local = nullptr) const;
  bool slides(size_t layer) const {
    return spec_.sliding_window != 0 && (spec_.sliding_layers.empty() || spec_.sliding_layers[layer]);
  }
  Tensor embed(const Tensor& ids) const;  // the embedding rows, scaled where the spec says
  Tensor soft_cap(Tensor logits) const;   // the spec's final soft-cap, if any
  Tensor decode_graph(int32_t token, KvCache& cache);
  void record_decode(DecodeGraph& g, KvCache& cache, size_t view);

  DecoderSpec spec_;
  Fusions fusions_;
  bool graphs_ = true;
  Embedding embed_;
  std::vector<Layer> layers_;
  OutputHead head_;
  RopeTable rope_, rope_local_;  // rope_local_: the window's layers' table where they have their own
  double embed_scale_ = 0;       // spec_.embed_scale rounded to the compute dtype
  Tensor cs_tab_, positions_;    // a recorded step's input tables (record_decode)
  DecodeGraph graph_, short_graph_;
};

}  // namespace wick::llm::detail

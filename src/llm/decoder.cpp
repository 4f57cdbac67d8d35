// DecoderModel (decoder.hpp): the forward pass over the layers, the sliding window, and the GPU
// graph of a decode step. Prefill and one-token decode take the same ops.
#include "decoder.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "wick/error.hpp"

namespace wick::llm::detail {

AttentionSpec attention_spec(const ModelConfig& c) {
  AttentionSpec s{c.hidden,  c.n_heads,  c.n_kv_heads, c.head_dim,
                  c.rms_eps, c.qkv_bias, c.qk_norm,    c.rope_interleaved ? RopeKind::Interleaved : RopeKind::Halves};
  s.rope_dim = c.rope_dim == c.head_dim ? 0 : c.rope_dim;
  return s;
}

DType compute_dtype(const LoadOptions& o, const WeightSource& src) {
  const DType dtype =
      o.dtype ? *o.dtype
              : (o.device.is_cpu() ? DType::F32 : (src.weight_dtype() == DType::BF16 ? DType::BF16 : DType::F16));
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error(ErrorKind::DType,
                std::string("Model::load: compute dtype must be f32, f16 or bf16, got ") + dtype_name(dtype));
  return dtype;
}

DecoderModel::DecoderModel(const ModelConfig& c, const WeightSource& src, const LoadOptions& o, const DecoderSpec& spec,
                           const std::vector<float>& freq_factors)
    : spec_(spec), fusions_(o.device, o.decode), graphs_(o.graphs) {
  config_ = c;
  device_ = o.device;
  dtype_ = compute_dtype(o, src);
  default_cache_dtype_ = dtype_ == DType::BF16 ? DType::BF16 : DType::F16;
  rope_ = RopeTable(rope_inverse_frequencies(c, freq_factors), device_, dtype_, c.rope_attn_factor);

  // The bytes to load, for the progress callback: every tensor of the file that a layer may read.
  // The layers the file holds, not the count it claims: a file that claims more fails below, at the
  // first missing tensor, having allocated only for the layers before it.
  std::vector<std::string> names = {"token_embd.weight", "output_norm.weight"};
  if (!c.tie_embeddings) names.push_back("output.weight");
  for (size_t l = 0; l < c.n_layers && src.has("blk." + std::to_string(l) + ".attn_norm.weight"); ++l)
    for (const char* p : {"attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                          "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_q.bias",
                          "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_q_norm.weight", "attn_k_norm.weight",
                          "attn_qkv.weight", "attn_qkv.bias", "post_attention_norm.weight", "post_ffw_norm.weight"})
      names.push_back("blk." + std::to_string(l) + "." + p);
  size_t total = 0;
  for (const auto& n : names)
    if (src.has(n)) total += src.file_bytes(n);
  WeightLoader ld(src, o.device, dtype_, o.progress, total);
  ld.set_norm_offset(c.norm_weight_offset);
  if (spec.rope_local_theta > 0) {
    ModelConfig lc = c;
    lc.rope_theta = spec.rope_local_theta;
    lc.rope_scaling = RopeScaling::None;
    rope_local_ = RopeTable(rope_inverse_frequencies(lc, {}), device_, dtype_);
  }
  if (spec.embed_scale > 0)  // as transformers multiplies: by the scale rounded to the activations' dtype
    embed_scale_ = Tensor::from_vector(std::vector<float>{float(spec.embed_scale)}, {1})
                       .to_dtype(dtype_)
                       .to_dtype(DType::F32)
                       .to_vector<float>()[0];
  // The recorded GPU step has one rotary input, no embedding scale and no soft-cap.
  if (spec.rope_local_theta > 0 || spec.embed_scale > 0 || spec.final_softcap > 0) graphs_ = false;

  embed_.load(ld, src, c.vocab_size, c.hidden, dtype_);
  for (size_t l = 0; l < c.n_layers; ++l) {
    Layer& L = layers_.emplace_back();
    L.attn.load(ld, l, spec.attn, fusions_);
    L.mlp.load(ld, l, c.hidden, c.intermediate, c.rms_eps, fusions_, spec.fused_gate_up, spec.gelu, spec.post_norms);
  }
  head_.load(ld, c.hidden, c.vocab_size, c.rms_eps, c.tie_embeddings ? &embed_ : nullptr);
  weight_bytes_ = ld.bytes();
}

Tensor DecoderModel::forward(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits) {
  const ModelConfig& c = config_;
  const size_t T = tokens.size(), pos0 = cache.pos();
  if (T == 0) throw Error(ErrorKind::Argument, "Model::forward: no tokens given");
  if (cache.n_layers() != c.n_layers)
    throw Error(ErrorKind::Argument, "Model::forward: the cache has " + std::to_string(cache.n_layers()) +
                                         " layers, the model " + std::to_string(c.n_layers) +
                                         "; make it with this model's make_cache()");
  if (T > cache.capacity() - pos0)
    throw Error(ErrorKind::Argument, "Model::forward: " + std::to_string(pos0) + " cached + " + std::to_string(T) +
                                         " new tokens exceed the KV cache capacity of " +
                                         std::to_string(cache.capacity()) +
                                         " tokens; make the cache with a larger max_ctx (--ctx)");
  check_token_ids(tokens, c.vocab_size, "Model::forward");
  const Tensor k0 = cache.k(0);
  if (k0.device() != device_ || k0.dim(1) != c.n_kv_heads || k0.dim(3) != c.head_dim)
    throw Error(ErrorKind::Argument,
                "Model::forward: the cache " + k0.str() + " does not fit this model; make it with make_cache()");
  // A sliding window: queries before position W see every earlier key, so they run as one batch;
  // later ones one at a time over their window of keys.
  const size_t W = spec_.sliding_window;
  // f32/f64 caches: the GPU's attention over them reads the key counts on the host, which a recording
  // cannot hold, so such a step runs op by op rather than failing a recording first.
  const bool recordable = k0.dtype() != DType::F32 && k0.dtype() != DType::F64;
  if (T == 1 && graphs_ && recordable && device_.is_gpu() && (W == 0 || pos0 + 1 <= W))
    return decode_graph(tokens[0], cache);
  if (W != 0 && T > 1 && pos0 + T > W) {
    const size_t batch = pos0 < W ? W - pos0 : 0;
    std::vector<Tensor> rows;
    if (batch > 0) rows.push_back(run({tokens.begin(), tokens.begin() + batch}, cache, all_logits));
    for (size_t i = batch; i < T; ++i) rows.push_back(run({tokens[i]}, cache, all_logits || i + 1 == T));
    if (!all_logits) return rows.back();
    return Tensor::cat(rows, 0);
  }
  return run(tokens, cache, all_logits);
}

Tensor DecoderModel::run(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits) {
  const size_t T = tokens.size(), pos0 = cache.pos(), W = spec_.sliding_window;
  // The first key a query may see: 0, or (one token past the window) pos0 + 1 - W.
  const size_t key0 = W != 0 && pos0 + T > W ? pos0 + T - W : 0;
  const Tensor ids = Tensor::from_vector(tokens, {T}, device_);
  // cos/sin rows for positions pos0 .. pos0+T-1: views of a device table that covers the cache.
  rope_.ensure(cache.capacity());  // forward() checked pos0 + T <= capacity
  const Tensor cos = rope_.cos().narrow(0, pos0, T), sin = rope_.sin().narrow(0, pos0, T);
  // Layers with the window start at key0 (with their own rotary table, if any); the others at 0.
  if (spec_.rope_local_theta > 0) rope_local_.ensure(cache.capacity());
  const RopeTable& lt = spec_.rope_local_theta > 0 ? rope_local_ : rope_;
  const Tensor lcos = lt.cos().narrow(0, pos0, T), lsin = lt.sin().narrow(0, pos0, T);
  const Step local{T, lcos, lsin, pos0, key0, nullptr, 0};
  Tensor x = layers(embed(ids), cache, Step{T, cos, sin, pos0, 0, nullptr, 0}, &local);
  cache.advance(T);
  if (!all_logits) x = x.narrow(0, T - 1, 1);
  return soft_cap(head_.forward(x, fusions_));
}

Tensor DecoderModel::embed(const Tensor& ids) const {
  const Tensor x = embed_.forward(ids);
  return embed_scale_ > 0 ? x.affine(embed_scale_, 0.0) : x;
}

Tensor DecoderModel::soft_cap(Tensor logits) const {
  const double cap = spec_.final_softcap;
  return cap > 0 ? logits.affine(1.0 / cap, 0.0).tanh().affine(cap, 0.0) : logits;
}

Tensor DecoderModel::forward_batch(const std::vector<BatchSeq>& seqs, PagedKvCache& cache) {
  const ModelConfig& c = config_;
  if (seqs.empty()) throw Error(ErrorKind::Argument, "Model::forward_batch: no sequences given");
  if (cache.n_layers() != c.n_layers || cache.k(0).dim(1) != c.n_kv_heads * c.head_dim ||
      cache.k(0).device() != device_)
    throw Error(ErrorKind::Argument, "Model::forward_batch: the cache (" + std::to_string(cache.n_layers()) +
                                         " layers of " + cache.k(0).str() +
                                         ") does not fit this model; make it with make_paged_cache()");
  const size_t bt = cache.block_tokens(), nb = cache.n_blocks();
  size_t max_blocks = 1;
  for (const BatchSeq& q : seqs) max_blocks = std::max(max_blocks, q.blocks.size());
  std::vector<int32_t> ids, pos, slot, seq, table(seqs.size() * max_blocks, 0), logit_rows;
  size_t max_pos = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const BatchSeq& q = seqs[si];
    const std::string who = "Model::forward_batch: sequence " + std::to_string(si);
    const size_t n = q.tokens.size(), end = q.pos0 + n;
    if (n == 0) throw Error(ErrorKind::Argument, who + " has no tokens");
    if (end > nb * bt || q.blocks.size() < (end + bt - 1) / bt)
      throw Error(ErrorKind::Argument, who + " reaches position " + std::to_string(end) + " but its " +
                                           std::to_string(q.blocks.size()) + " blocks of " + std::to_string(bt) +
                                           " tokens hold fewer; give it a block for every " + std::to_string(bt) +
                                           " tokens");
    for (size_t j = 0; j < q.blocks.size(); ++j) {
      const int32_t b = q.blocks[j];
      if (b < 0 || size_t(b) >= nb)
        throw Error(ErrorKind::Index,
                    who + ": block " + std::to_string(b) + " is outside the cache's " + std::to_string(nb) + " blocks");
      table[si * max_blocks + j] = b;
    }
    check_token_ids(q.tokens, c.vocab_size, who);
    for (size_t i = 0; i < n; ++i) {
      const size_t p = q.pos0 + i;
      ids.push_back(q.tokens[i]);
      pos.push_back(static_cast<int32_t>(p));
      slot.push_back(static_cast<int32_t>(size_t(q.blocks[p / bt]) * bt + p % bt));
      seq.push_back(static_cast<int32_t>(si));
    }
    max_pos = std::max(max_pos, end);
    if (q.logits) logit_rows.push_back(static_cast<int32_t>(ids.size() - 1));
  }
  const size_t T = ids.size();
  size_t rope_rows = 256;  // the rotary table grows by doubling, up to the cache's rows
  while (rope_rows < max_pos) rope_rows *= 2;
  rope_.ensure(std::min(rope_rows, nb * bt));
  PagedStep step{};
  step.rows = T;
  step.pos = Tensor::from_vector(pos, {T}, device_);
  step.cos = rope_.cos().embedding(step.pos);
  step.sin = rope_.sin().embedding(step.pos);
  step.slot = Tensor::from_vector(slot, {T}, device_);
  step.seq = Tensor::from_vector(seq, {T}, device_);
  step.block_table = Tensor::from_vector(table, {seqs.size(), max_blocks}, device_);
  step.block_tokens = bt;
  // The window's layers: the window and, where they have one, their own rotary rows; the others neither.
  PagedStep local = step;
  local.window = spec_.sliding_window;
  if (spec_.rope_local_theta > 0) {
    rope_local_.ensure(std::min(rope_rows, nb * bt));
    local.cos = rope_local_.cos().embedding(step.pos);
    local.sin = rope_local_.sin().embedding(step.pos);
  }
  Residual r{embed(Tensor::from_vector(ids, {T}, device_)), Tensor()};
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].attn.forward_paged(r, cache.k(l), cache.v(l), slides(l) ? local : step, fusions_, dtype_);
    layers_[l].mlp.forward(r, fusions_);
  }
  if (logit_rows.empty()) return Tensor::zeros({0, c.vocab_size}, DType::F32, device_);
  const Tensor x = r.finish();
  const Tensor last =
      logit_rows.size() == T ? x : x.embedding(Tensor::from_vector(logit_rows, {logit_rows.size()}, device_));
  return soft_cap(head_.forward(last, fusions_));
}

Tensor DecoderModel::layers(Tensor x, KvCache& cache, const Step& s, const Step* local) const {
  Residual r{std::move(x), Tensor()};
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].attn.forward(r, cache.k(l), cache.v(l), local && slides(l) ? *local : s, fusions_, dtype_);
    layers_[l].mlp.forward(r, fusions_);
  }
  return r.finish();
}

bool DecoderModel::DecodeGraph::serves(KvCache& cache) const {
  if (kv.size() != 2 * cache.n_layers()) return false;
  auto same = [](const std::weak_ptr<Storage>& a, const std::shared_ptr<Storage>& b) {
    return !a.expired() && !a.owner_before(b) && !b.owner_before(a);
  };
  for (size_t l = 0; l < cache.n_layers(); ++l)
    if (!same(kv[2 * l], cache.k(l).storage()) || !same(kv[2 * l + 1], cache.v(l).storage())) return false;
  return true;
}

// One token on a GPU: the step recorded once per cache (wick::Graph) and replayed, with the token's
// embedding row, rotary row and position written into the graph's inputs first. The host then
// issues a handful of ops per token instead of hundreds. A step that cannot be recorded (e.g. a
// cache dtype whose attention reads lengths on the host) runs op by op from then on.
// Two recordings (DecodeOptions::short_view): positions below kShortView attend over the cache's
// first kShortView rows (the GPU decode attention then has one run of keys per row and launches no
// merge kernel: one kernel fewer per layer), later ones over the whole cache.
Tensor DecoderModel::decode_graph(int32_t token, KvCache& cache) {
  static constexpr size_t kShortView = 256;
  const size_t pos0 = cache.pos();
  const bool short_view = fusions_.short_view() && pos0 < kShortView && cache.capacity() > kShortView;
  DecodeGraph& g = short_view ? short_graph_ : graph_;
  if (!g.graph.defined() || !g.serves(cache)) {
    try {
      record_decode(g, cache, short_view ? kShortView : cache.capacity());
    } catch (const Error& e) {
      graphs_ = false;
      graph_ = short_graph_ = {};
      std::fprintf(stderr, "wick: decode runs op by op: %s\n", e.what());
      return run({token}, cache, false);
    }
  }
  // Three device-to-device copies and no synchronisation: the token's embedding row (forward()
  // checked the id on the host), the step's (position, key count) from a table of positions, and
  // its rotary row.
  g.x_in.copy_from(embed_.row(token));
  g.step.copy_from(positions_.narrow(0, pos0, 2));
  g.cs_in.copy_from(cs_tab_.narrow(0, pos0, 1));
  g.graph.replay();
  cache.advance(1);
  return g.logits.copy();  // the next replay overwrites g.logits
}

void DecoderModel::record_decode(DecodeGraph& g, KvCache& cache, size_t view) {
  g = {};
  rope_.ensure(cache.capacity());
  if (!positions_.defined() || positions_.dim(0) != rope_.cos().dim(0) + 1) {
    // The step's inputs come from these: cos and sin rows side by side, and positions 0 .. rows.
    cs_tab_ = Tensor::cat({rope_.cos(), rope_.sin()}, 1);
    positions_ = Tensor::arange(0, double(rope_.cos().dim(0) + 1), 1, DType::I32, device_);
  }
  g.x_in = Tensor::zeros({1, config_.hidden}, dtype_, device_);
  const size_t half = rope_.half();
  g.cs_in = Tensor::zeros({1, 2 * half}, dtype_, device_);
  const Tensor cos = g.cs_in.narrow(1, 0, half), sin = g.cs_in.narrow(1, half, half);
  g.step = Tensor::zeros({2}, DType::I32, device_);
  for (size_t l = 0; l < cache.n_layers(); ++l) {
    g.kv.push_back(cache.k(l).storage());
    g.kv.push_back(cache.v(l).storage());
  }
  g.graph = Graph::capture(device_, [&] {
    g.logits = head_.forward(layers(g.x_in, cache, Step{1, cos, sin, 0, 0, &g.step, view}), fusions_);
  });
}

}  // namespace wick::llm::detail

// The LLaMA family (LLaMA 2/3.x, TinyLlama, SmolLM2, Mistral, Qwen2/2.5, Qwen3): pre-norm decoder
// blocks of GQA attention with rotary embeddings and a SwiGLU MLP, built on public Tensor ops only,
// so the same code runs on the CPU and a GPU. Prefill and one-token decode take the same path.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>

#include "model_impl.hpp"
#include "wick/error.hpp"

namespace wick::llm::detail {
namespace {

struct Layer {
  Tensor attn_norm, ffn_norm, q_norm, k_norm;
  Linear q, k, v, o, gate, up, down;
  Linear qkv, gate_up;  // on a GPU, q/k/v and gate/up stacked (stack_linears) when they can be
  Linear qk;            // q and k stacked where v's type differs (llama-quantize's Q4_K_M: Q6_K v on some layers)
};

// Rotary inverse frequencies as transformers computes them (in f32), with the file's scaling.
std::vector<float> inverse_frequencies(const ModelConfig& c, const std::vector<float>& freq_factors) {
  const size_t half = c.rope_dim / 2;
  std::vector<float> inv(half);
  for (size_t i = 0; i < half; ++i) {
    const float e = float(2 * i) / float(c.rope_dim);
    inv[i] = 1.0f / std::pow(float(c.rope_theta), e);
  }
  if (!freq_factors.empty()) {
    // GGUF llama3 scaling: convert_hf_to_gguf.py stores per-pair divisors (rope_freqs.weight).
    for (size_t i = 0; i < half; ++i) inv[i] = inv[i] / freq_factors[i];
  } else if (c.rope_scaling == RopeScaling::Linear) {
    for (float& f : inv) f = f / float(c.rope_factor);
  } else if (c.rope_scaling == RopeScaling::Llama3) {
    // transformers' _compute_llama3_parameters: long wavelengths divided by factor, short kept,
    // the band between blended smoothly.
    const double pi = 3.14159265358979323846;
    const double old_ctx = double(c.rope_original_max_position);
    const double low_wl = old_ctx / c.rope_low_freq_factor, high_wl = old_ctx / c.rope_high_freq_factor;
    for (float& f : inv) {
      const double wl = 2 * pi / f;
      if (wl < high_wl) continue;
      if (wl > low_wl) {
        f = float(f / c.rope_factor);
        continue;
      }
      const double smooth =
          (old_ctx / wl - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
      f = float((1 - smooth) * f / c.rope_factor + smooth * f);
    }
  }
  return inv;
}

class LlamaModel : public Model {
 public:
  LlamaModel(const ModelConfig& c, const WeightSource& src, const LoadOptions& o, DType dtype,
             const std::vector<float>& freq_factors) {
    config_ = c;
    device_ = o.device;
    graphs_ = o.graphs;
    dtype_ = dtype;
    default_cache_dtype_ = dtype == DType::BF16 ? DType::BF16 : DType::F16;
    inv_freq_ = inverse_frequencies(c, freq_factors);

    const size_t H = c.hidden, hd = c.head_dim, q_out = c.n_heads * hd, kv_out = c.n_kv_heads * hd;
    std::vector<std::string> names = {"token_embd.weight", "output_norm.weight"};
    if (!c.tie_embeddings) names.push_back("output.weight");
    auto blk = [](size_t l, const char* part) { return "blk." + std::to_string(l) + "." + part; };
    for (size_t l = 0; l < c.n_layers; ++l)
      for (const char* p :
           {"attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
            "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_q.bias", "attn_k.bias",
            "attn_v.bias", "attn_output.bias", "attn_q_norm.weight", "attn_k_norm.weight"})
        names.push_back(blk(l, p));
    size_t total = 0;
    for (const auto& n : names)
      if (src.has(n)) total += src.file_bytes(n);
    WeightLoader ld(src, o.device, dtype, o.progress, total);

    const std::string emb = "token_embd.weight";
    const Shape emb_shape{c.vocab_size, H};
    if (src.has(emb) && src.quantized(emb))
      embd_q_ = ld.qtensor(emb, emb_shape);  // stays quantized: QTensor::embedding gathers rows
    else
      embd_ = ld.tensor(emb, emb_shape);
    layers_.resize(c.n_layers);
    for (size_t l = 0; l < c.n_layers; ++l) {
      Layer& L = layers_[l];
      L.attn_norm = ld.tensor(blk(l, "attn_norm.weight"), {H});
      L.q = ld.linear(blk(l, "attn_q"), {q_out, H}, c.qkv_bias);
      L.k = ld.linear(blk(l, "attn_k"), {kv_out, H}, c.qkv_bias);
      L.v = ld.linear(blk(l, "attn_v"), {kv_out, H}, c.qkv_bias);
      L.o = ld.linear(blk(l, "attn_output"), {H, q_out}, false);
      if (c.qk_norm) {
        L.q_norm = ld.tensor(blk(l, "attn_q_norm.weight"), {hd});
        L.k_norm = ld.tensor(blk(l, "attn_k_norm.weight"), {hd});
      }
      L.ffn_norm = ld.tensor(blk(l, "ffn_norm.weight"), {H});
      L.gate = ld.linear(blk(l, "ffn_gate"), {c.intermediate, H}, false);
      L.up = ld.linear(blk(l, "ffn_up"), {c.intermediate, H}, false);
      L.down = ld.linear(blk(l, "ffn_down"), {H, c.intermediate}, false);
      // Fewer launches per GPU decode step. The CPU keeps the parts: its per-op cost is small and
      // stacking would copy weights it otherwise maps from the file.
      if (o.device.is_gpu()) {
        L.qkv = stack_linears({&L.q, &L.k, &L.v});
        if (L.qkv.defined()) L.q = L.k = L.v = Linear{};
        // Otherwise q and k alone: one product for both and, in a recorded step, rope_kv_append
        // instead of two ropes and two cache copies (WICK_NO_QK_STACK=1 keeps them apart: the A/B knob).
        if (!L.qkv.defined() && !lever_off("WICK_NO_QK_STACK")) L.qk = stack_linears({&L.q, &L.k});
        if (L.qk.defined()) L.q = L.k = Linear{};
        L.gate_up = stack_linears({&L.gate, &L.up});
        if (L.gate_up.defined()) L.gate = L.up = Linear{};
      }
    }
    out_norm_ = ld.tensor("output_norm.weight", {H});
    if (c.tie_embeddings) {
      output_.w = embd_;
      output_.q = embd_q_;
    } else {
      output_ = ld.linear("output", {c.vocab_size, H}, false);
    }
    weight_bytes_ = ld.bytes();
  }

  Tensor forward(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits) override {
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
    for (int32_t id : tokens)
      if (id < 0 || size_t(id) >= c.vocab_size)
        throw Error(ErrorKind::Index, "Model::forward: token id " + std::to_string(id) +
                                          " is outside the vocabulary (" + std::to_string(c.vocab_size) + " tokens)");
    const Tensor k0 = cache.k(0);
    if (k0.device() != device_ || k0.dim(1) != c.n_kv_heads || k0.dim(3) != c.head_dim)
      throw Error(ErrorKind::Argument,
                  "Model::forward: the cache " + k0.str() + " does not fit this model; make it with make_cache()");
    // A sliding window (Mistral): queries before position W see every earlier key, so they run as one
    // batch; later ones one at a time over their window of keys.
    const size_t W = c.sliding_window;
    if (T == 1 && graphs_ && device_.is_gpu() && (W == 0 || pos0 + 1 <= W)) return decode_graph(tokens[0], cache);
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

 private:
  Tensor run(const std::vector<int32_t>& tokens, KvCache& cache, bool all_logits) {
    const ModelConfig& c = config_;
    const size_t T = tokens.size(), pos0 = cache.pos();
    // The first key a query may see: 0, or (one token past the window) pos0 + 1 - W.
    const size_t key0 = c.sliding_window != 0 && pos0 + T > c.sliding_window ? pos0 + T - c.sliding_window : 0;
    const Tensor ids = Tensor::from_vector(tokens, {T}, device_);
    // cos/sin rows for positions pos0 .. pos0+T-1: views of a device table that covers the cache.
    ensure_rope_table(cache.capacity());  // forward() checked pos0 + T <= capacity
    const Tensor cos = cos_tab_.narrow(0, pos0, T), sin = sin_tab_.narrow(0, pos0, T);
    Tensor x = blocks(embed(ids), cos, sin, cache, Where{pos0, key0, nullptr, 0});
    cache.advance(T);
    if (!all_logits) x = x.narrow(0, T - 1, 1);
    return head(x);
  }

  // Where a step's K/V rows go and which keys it sees: host positions (pos0, key0), or for a recorded
  // step `step` on the device: (position, position + 1), so the same graph serves every position
  // whose keys lie in the cache's first `view` rows.
  struct Where {
    size_t pos0, key0;
    const Tensor* step;
    size_t view;
  };

  Tensor embed(const Tensor& ids) const { return embd_q_.defined() ? embd_q_.embedding(ids, dtype_) : embd_.embedding(ids); }
  // One token's row of embed() by device copies only (the caller checked the id): no id upload, and
  // no embedding op, whose id check reads a flag back from the device.
  Tensor embed_row(int32_t id) const {
    return embd_q_.defined() ? embd_q_.rows(size_t(id), 1).dequantize(dtype_) : embd_.narrow(0, size_t(id), 1);
  }

  // The decoder blocks over x (T, hidden) at the positions of `cos`/`sin`, writing K/V into the cache.
  Tensor blocks(Tensor x, const Tensor& cos, const Tensor& sin, KvCache& cache, const Where& w) const {
    const ModelConfig& c = config_;
    const size_t T = x.dim(0);
    const DType cdt = cache.dtype();
    auto rope = [&](const Tensor& t) { return c.rope_interleaved ? t.rope_i(cos, sin) : t.rope(cos, sin); };
    const size_t nh = c.n_heads, nkv = c.n_kv_heads, hd = c.head_dim;
    // Each sublayer's output is added to x by the next norm (add_rms_norm: one kernel, the same
    // numbers as add then rms_norm).
    Tensor pending;
    for (size_t l = 0; l < c.n_layers; ++l) {
      const Layer& L = layers_[l];
      Tensor h, y;
      QTensor hq;  // h in Q8_1 from the norm's own kernel, where the products it feeds take it
      if (norm_in_product(L.qkv, T)) {
        std::tie(x, y) = L.qkv.q.add_rms_norm_matmul_t(x, pending, L.attn_norm, c.rms_eps);
      } else {
        const Linear& first = L.qkv.defined() ? L.qkv : L.qk.defined() ? L.qk : L.q;  // the first product of h
        QTensor* hq_out = q8_1_input(first, T) ? &hq : nullptr;
        if (pending.defined())
          std::tie(x, h) = x.add_rms_norm(pending, L.attn_norm, c.rms_eps, hq_out);
        else
          h = x.rms_norm(L.attn_norm, c.rms_eps, hq_out);
        y = L.qkv.defined() ? L.qkv.forward(h, hq) : L.qk.defined() ? L.qk.forward(h, hq) : Tensor();
      }
      // q, k, v as (1, T, heads, hd): column ranges of the stacked product (q | k | v, or q | k with
      // v its own product), or one product each.
      auto heads = [&](const Tensor& t, size_t n) { return t.reshape({1, T, n, hd}); };
      const Tensor v =
          heads(L.qkv.defined() ? y.narrow(1, (nh + nkv) * hd, nkv * hd) : L.v.forward(h, hq), nkv);
      Tensor& kc = cache.k(l);
      Tensor& vc = cache.v(l);
      Tensor a;
      if (w.step && y.defined() && !c.qk_norm && cdt == x.dtype() && fused_append()) {
        // A recorded step: rope of q and k and both cache writes are one kernel (rope_kv_append).
        const Tensor qk = heads(y.narrow(1, 0, (nh + nkv) * hd), nh + nkv).transpose(1, 2);
        const Tensor q =
            rope_kv_append(qk, cos, sin, c.rope_interleaved, nh, v.transpose(1, 2), kc, vc, w.step->narrow(0, 0, 1));
        a = attention_kv_len(q, kc.narrow(2, 0, w.view), vc.narrow(2, 0, w.view), w.step->narrow(0, 1, 1),
                             /*causal=*/true);
      } else {
        Tensor q, k;
        if (y.defined() && !c.qk_norm) {
          // q and k heads side by side take the same rotation: one rope for both.
          const Tensor qk = rope(heads(y.narrow(1, 0, (nh + nkv) * hd), nh + nkv).transpose(1, 2));
          q = qk.narrow(1, 0, nh);
          k = qk.narrow(1, nh, nkv);
        } else {
          q = heads(y.defined() ? y.narrow(1, 0, nh * hd) : L.q.forward(h, hq), nh);
          k = heads(y.defined() ? y.narrow(1, nh * hd, nkv * hd) : L.k.forward(h, hq), nkv);
          if (c.qk_norm) {  // Qwen3: per-head RMSNorm over head_dim, before rope
            q = q.rms_norm(L.q_norm, c.rms_eps);
            k = k.rms_norm(L.k_norm, c.rms_eps);
          }
          q = rope(q.transpose(1, 2));
          k = rope(k.transpose(1, 2));
        }
        if (w.step) {
          const Tensor pos = w.step->narrow(0, 0, 1), len = w.step->narrow(0, 1, 1);
          kc.slice_set(k.to_dtype(cdt), 2, pos);
          vc.slice_set(v.transpose(1, 2).to_dtype(cdt), 2, pos);
          a = attention_kv_len(q.to_dtype(cdt), kc.narrow(2, 0, w.view), vc.narrow(2, 0, w.view), len,
                               /*causal=*/true);
        } else {
          kc.slice_set(k.to_dtype(cdt), 2, w.pos0);
          vc.slice_set(v.transpose(1, 2).to_dtype(cdt), 2, w.pos0);
          const size_t n = w.pos0 + T - w.key0;
          a = attention(q.to_dtype(cdt), kc.narrow(2, w.key0, n), vc.narrow(2, w.key0, n), /*causal=*/true);
        }
      }
      a = a.to_dtype(dtype_).transpose(1, 2).reshape({T, nh * hd});
      QTensor h2q, sq;
      QTensor* sq_out = q8_1_input(L.down, T) ? &sq : nullptr;
      const Tensor o = L.o.forward(a);
      Tensor s;
      if (norm_in_product(L.gate_up, T)) {
        Tensor y;
        std::tie(x, y) = L.gate_up.q.add_rms_norm_matmul_t(x, o, L.ffn_norm, c.rms_eps);
        s = y.narrow(1, 0, c.intermediate).silu_mul(y.narrow(1, c.intermediate, c.intermediate), sq_out);
      } else {
        Tensor h2;
        std::tie(x, h2) = x.add_rms_norm(o, L.ffn_norm, c.rms_eps,
                                         q8_1_input(L.gate_up.defined() ? L.gate_up : L.gate, T) ? &h2q : nullptr);
        if (L.gate_up.defined() && !L.gate_up.q.defined() && !L.gate_up.b.defined() && !sq_out && fused_swiglu()) {
          s = h2.matmul_swiglu(L.gate_up.w.t());  // plain weights: one kernel on a GPU's decode shapes
        } else if (L.gate_up.defined()) {
          const Tensor y = L.gate_up.forward(h2, h2q);
          s = y.narrow(1, 0, c.intermediate).silu_mul(y.narrow(1, c.intermediate, c.intermediate), sq_out);
        } else {
          s = L.gate.forward(h2, h2q).silu_mul(L.up.forward(h2, h2q), sq_out);
        }
      }
      pending = L.down.forward(s, sq);
    }
    return pending.defined() ? x.add(pending) : x;
  }

  // Whether the producer of `lin`'s input should also write it in Q8_1: a quantized product of a
  // few rows on a GPU (its matrix-vector path quantizes x to Q8_1; the producer's kernel does it
  // instead, one launch fewer). The CPU quantizes activations its own way, prefill has no use.
  bool q8_1_input(const Linear& lin, size_t rows) const {
    static const bool off = lever_off("WICK_NO_Q8P");  // the A/B knob of docs/quant.md
    return !off && lin.q.defined() && device_.is_gpu() && rows == 1 && lin.q.dim(1) % 32 == 0;
  }

  // Whether the norm before a stacked quantized product (q | k | v, gate | up) goes to
  // QTensor::add_rms_norm_matmul_t, whose GPU kernel normalises x itself where it takes the product
  // (else it runs the norm, writing Q8_1, and the product: the path below). One row on a GPU, as
  // q8_1_input; WICK_QMV_NORM=0 turns the kernel off (the A/B knob of docs/gpu.md).
  bool norm_in_product(const Linear& lin, size_t rows) const {
    return lin.defined() && !lin.b.defined() && q8_1_input(lin, rows);
  }

  // Whether a recorded step ropes and appends to the cache in one kernel (rope_kv_append);
  // WICK_NO_ROPE_KV keeps rope and two slice_set copies (the A/B knob of docs/performance.md).
  static bool fused_append() {
    static const bool off = lever_off("WICK_NO_ROPE_KV");
    return !off;
  }

  // Whether plain stacked gate/up weights run matmul_swiglu (the silu product in the matrix-vector
  // kernel's epilogue); WICK_NO_SWIGLU keeps the product and silu_mul apart (the A/B knob).
  static bool fused_swiglu() {
    static const bool off = lever_off("WICK_NO_SWIGLU");
    return !off;
  }

  // The A/B knobs of the decode levers: the variable set (to anything) turns the lever off.
  static bool lever_off(const char* name) { return std::getenv(name) != nullptr; }

  Tensor head(const Tensor& x) const {
    QTensor xq;
    const Tensor h = x.rms_norm(out_norm_, config_.rms_eps, q8_1_input(output_, x.dim(0)) ? &xq : nullptr);
    return output_.forward(h, xq).to_dtype(DType::F32);
  }

  // A recorded decode step: its inputs, its output, and the cache it writes (the graph holds the
  // cache's addresses: another cache, or this one reallocated, needs a new recording).
  struct DecodeGraph {
    Tensor x_in, cs_in, step, logits;
    Graph graph;
    std::vector<std::weak_ptr<Storage>> kv;
    bool serves(KvCache& cache) const {
      if (kv.size() != 2 * cache.n_layers()) return false;
      for (size_t l = 0; l < cache.n_layers(); ++l)
        if (!same(kv[2 * l], cache.k(l).storage()) || !same(kv[2 * l + 1], cache.v(l).storage())) return false;
      return true;
    }
    static bool same(const std::weak_ptr<Storage>& a, const std::shared_ptr<Storage>& b) {
      return !a.expired() && !a.owner_before(b) && !b.owner_before(a);
    }
  };

  // One token on a GPU: the step recorded once per cache (wick::Graph) and replayed, with the token's
  // embedding row, rotary row and position written into the graph's inputs first. The host then
  // issues a handful of ops per token instead of hundreds. A step that cannot be recorded (e.g. a
  // cache dtype whose attention reads lengths on the host) runs op by op from then on.
  // Two recordings: positions below kShortView attend over the cache's first kShortView rows (the
  // GPU decode attention then has one run of keys per row and launches no merge kernel: one kernel
  // fewer per layer), later ones over the whole cache. WICK_NO_SHORT_VIEW: the whole cache always.
  static constexpr size_t kShortView = 256;
  Tensor decode_graph(int32_t token, KvCache& cache) {
    static const bool one_view = lever_off("WICK_NO_SHORT_VIEW");
    const size_t pos0 = cache.pos();
    const bool short_view = !one_view && pos0 < kShortView && cache.capacity() > kShortView;
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
    g.x_in.copy_from(embed_row(token));
    g.step.copy_from(positions_.narrow(0, pos0, 2));
    g.cs_in.copy_from(cs_tab_.narrow(0, pos0, 1));
    g.graph.replay();
    cache.advance(1);
    return g.logits.copy();  // the next replay overwrites g.logits
  }

  void record_decode(DecodeGraph& g, KvCache& cache, size_t view) {
    g = {};
    ensure_rope_table(cache.capacity());
    if (!positions_.defined() || positions_.dim(0) != cos_tab_.dim(0) + 1) {
      // The step's inputs come from these: cos and sin rows side by side, and positions 0 .. rows.
      cs_tab_ = Tensor::cat({cos_tab_, sin_tab_}, 1);
      positions_ = Tensor::arange(0, double(cos_tab_.dim(0) + 1), 1, DType::I32, device_);
    }
    g.x_in = Tensor::zeros({1, config_.hidden}, dtype_, device_);
    const size_t half = config_.rope_dim / 2;
    g.cs_in = Tensor::zeros({1, 2 * half}, dtype_, device_);
    const Tensor cos = g.cs_in.narrow(1, 0, half), sin = g.cs_in.narrow(1, half, half);
    g.step = Tensor::zeros({2}, DType::I32, device_);
    for (size_t l = 0; l < cache.n_layers(); ++l) {
      g.kv.push_back(cache.k(l).storage());
      g.kv.push_back(cache.v(l).storage());
    }
    g.graph = Graph::capture(device_, [&] {
      g.logits = head(blocks(g.x_in, cos, sin, cache, Where{0, 0, &g.step, view}));
    });
  }

  // Rotary tables for positions 0 .. rows-1, computed on the host as transformers does (f32 angle,
  // then cos/sin) and uploaded once, so decode steps upload nothing for rope.
  void ensure_rope_table(size_t rows) {
    if (cos_tab_.defined() && cos_tab_.dim(0) >= rows) return;
    const size_t half = config_.rope_dim / 2;
    std::vector<float> cs(rows * half), sn(rows * half);
    for (size_t t = 0; t < rows; ++t)
      for (size_t i = 0; i < half; ++i) {
        const float ang = float(t) * inv_freq_[i];
        cs[t * half + i] = float(std::cos(double(ang)));
        sn[t * half + i] = float(std::sin(double(ang)));
      }
    cos_tab_ = Tensor::from_vector(cs, {rows, half}, device_).to_dtype(dtype_);
    sin_tab_ = Tensor::from_vector(sn, {rows, half}, device_).to_dtype(dtype_);
  }

  Tensor embd_, out_norm_, cos_tab_, sin_tab_;
  Tensor cs_tab_, positions_;  // a recorded step's input tables (record_decode)
  DecodeGraph graph_, short_graph_;
  bool graphs_ = true;
  QTensor embd_q_;
  Linear output_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
};

}  // namespace

std::unique_ptr<Model> load_llama(const ModelConfig& c, const WeightSource& src, const LoadOptions& o,
                                  std::vector<float> rope_freq_factors) {
  DType dtype = o.dtype
                    ? *o.dtype
                    : (o.device.is_cpu() ? DType::F32 : (src.weight_dtype() == DType::BF16 ? DType::BF16 : DType::F16));
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error(ErrorKind::DType,
                std::string("Model::load: compute dtype must be f32, f16 or bf16, got ") + dtype_name(dtype));
  return std::make_unique<LlamaModel>(c, src, o, dtype, rope_freq_factors);
}

}  // namespace wick::llm::detail

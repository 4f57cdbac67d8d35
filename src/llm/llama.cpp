// The LLaMA family (LLaMA 2/3.x, TinyLlama, SmolLM2, Mistral, Qwen2/2.5, Qwen3): pre-norm decoder
// blocks of GQA attention with rotary embeddings and a SwiGLU MLP, built on public Tensor ops only,
// so the same code runs on the CPU and a GPU. Prefill and one-token decode take the same path.
#include <algorithm>
#include <cmath>

#include "llm/model_impl.hpp"
#include "wick/error.hpp"

namespace wick::llm::detail {
namespace {

struct Layer {
  Tensor attn_norm, ffn_norm, q_norm, k_norm;
  Linear q, k, v, o, gate, up, down;
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
    const DType cdt = cache.dtype();
    // The first key a query may see: 0, or (one token past the window) pos0 + 1 - W.
    const size_t key0 = c.sliding_window != 0 && pos0 + T > c.sliding_window ? pos0 + T - c.sliding_window : 0;

    const Tensor ids = Tensor::from_vector(tokens, {T}, device_);
    Tensor x = embd_q_.defined() ? embd_q_.embedding(ids, dtype_) : embd_.embedding(ids);

    // cos/sin rows for positions pos0 .. pos0+T-1: views of a device table that covers the cache.
    ensure_rope_table(cache.capacity());  // forward() checked pos0 + T <= capacity
    const Tensor cos = cos_tab_.narrow(0, pos0, T), sin = sin_tab_.narrow(0, pos0, T);
    auto rope = [&](const Tensor& t) { return c.rope_interleaved ? t.rope_i(cos, sin) : t.rope(cos, sin); };

    const size_t nh = c.n_heads, nkv = c.n_kv_heads, hd = c.head_dim;
    for (size_t l = 0; l < c.n_layers; ++l) {
      const Layer& L = layers_[l];
      const Tensor h = x.rms_norm(L.attn_norm, c.rms_eps);
      Tensor q = L.q.forward(h).reshape({1, T, nh, hd});
      Tensor k = L.k.forward(h).reshape({1, T, nkv, hd});
      const Tensor v = L.v.forward(h).reshape({1, T, nkv, hd});
      if (c.qk_norm) {  // Qwen3: per-head RMSNorm over head_dim, before rope
        q = q.rms_norm(L.q_norm, c.rms_eps);
        k = k.rms_norm(L.k_norm, c.rms_eps);
      }
      q = rope(q.transpose(1, 2));
      k = rope(k.transpose(1, 2));
      Tensor& kc = cache.k(l);
      Tensor& vc = cache.v(l);
      kc.slice_set(k.to_dtype(cdt), 2, pos0);
      vc.slice_set(v.transpose(1, 2).to_dtype(cdt), 2, pos0);
      const Tensor kv_k = kc.narrow(2, key0, pos0 + T - key0), kv_v = vc.narrow(2, key0, pos0 + T - key0);
      Tensor a = attention(q.to_dtype(cdt), kv_k, kv_v, /*causal=*/true).to_dtype(dtype_);
      a = a.transpose(1, 2).reshape({T, nh * hd});
      x = x.add(L.o.forward(a));
      const Tensor h2 = x.rms_norm(L.ffn_norm, c.rms_eps);
      x = x.add(L.down.forward(L.gate.forward(h2).silu_mul(L.up.forward(h2))));
    }
    cache.advance(T);
    if (!all_logits) x = x.narrow(0, T - 1, 1);
    x = x.rms_norm(out_norm_, c.rms_eps);
    return output_.forward(x).to_dtype(DType::F32);
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

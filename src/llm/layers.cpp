// The blocks of layers.hpp. Each runs the same public Tensor ops on the CPU and a GPU; the fused
// decode kernels are taken where Fusions says, with the unfused ops as the fallback.
#include "layers.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "wick/error.hpp"
#include "wick/fast.hpp"

namespace wick::llm::detail {
namespace {
std::string blk(size_t l, const char* part) { return "blk." + std::to_string(l) + "." + part; }
}  // namespace

Normed pre_norm(Residual& r, const Tensor& weight, double eps, const Linear& first, bool stacked, const Fusions& f,
                size_t rows) {
  Normed n;
  if (stacked && f.norm_in_product(first, rows)) {
    std::tie(r.x, n.y) = fast::add_rms_norm_matmul_t(first.q, r.x, r.pending, weight, eps);
  } else {
    const bool q8_1 = f.q8_1_input(first, rows);
    if (r.pending.defined() && q8_1)
      std::tie(r.x, n.h, n.hq) = fast::add_rms_norm_q8_1(r.x, r.pending, weight, eps);
    else if (r.pending.defined())
      std::tie(r.x, n.h) = r.x.add_rms_norm(r.pending, weight, eps);
    else if (q8_1)
      std::tie(n.h, n.hq) = fast::rms_norm_q8_1(r.x, weight, eps);
    else
      n.h = r.x.rms_norm(weight, eps);
  }
  r.pending = Tensor();
  return n;
}

std::vector<float> rope_inverse_frequencies(const ModelConfig& c, const std::vector<float>& freq_factors) {
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
  } else if (c.rope_scaling == RopeScaling::Yarn) {
    // transformers' _compute_yarn_parameters (ggml's rope_yarn the same): pairs below the dim where beta_fast
    // rotations fit the original context keep their frequency, pairs past beta_slow's are divided by
    // factor, a linear ramp between.
    const double pi = 3.14159265358979323846, dim = double(c.rope_dim);
    const auto corr = [&](double rotations) {
      return dim * std::log(double(c.rope_original_max_position) / (rotations * 2 * pi)) / (2 * std::log(c.rope_theta));
    };
    const double low = std::max(0.0, std::floor(corr(c.rope_yarn_beta_fast)));
    const double high = std::min(dim - 1, std::ceil(corr(c.rope_yarn_beta_slow)));
    for (size_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((double(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
      const double extrap = inv[i], interp = inv[i] / c.rope_factor;
      inv[i] = float(interp * ramp + extrap * (1 - ramp));
    }
  }
  return inv;
}

void RopeTable::ensure(size_t rows) {
  if (cos_.defined() && cos_.dim(0) >= rows) return;
  const size_t half = inv_freq_.size();
  std::vector<float> cs(rows * half), sn(rows * half);
  for (size_t t = 0; t < rows; ++t)
    for (size_t i = 0; i < half; ++i) {
      const float ang = float(t) * inv_freq_[i];
      cs[t * half + i] = float(std::cos(double(ang)) * scale_);
      sn[t * half + i] = float(std::sin(double(ang)) * scale_);
    }
  cos_ = Tensor::from_vector(cs, {rows, half}, device_).to_dtype(dtype_);
  sin_ = Tensor::from_vector(sn, {rows, half}, device_).to_dtype(dtype_);
}

void Attention::load(WeightLoader& ld, size_t l, const AttentionSpec& s, const Fusions& f) {
  s_ = s;
  const size_t H = s.hidden, hd = s.head_dim, q_out = s.n_heads * hd, kv_out = s.n_kv_heads * hd;
  norm_ = ld.tensor(blk(l, "attn_norm.weight"), {H});
  if (s.fused_qkv) {
    qkv_ = ld.linear(blk(l, "attn_qkv"), {q_out + 2 * kv_out, H}, s.bias);
  } else {
    q_ = ld.linear(blk(l, "attn_q"), {q_out, H}, s.bias);
    k_ = ld.linear(blk(l, "attn_k"), {kv_out, H}, s.bias);
    v_ = ld.linear(blk(l, "attn_v"), {kv_out, H}, s.bias);
  }
  o_ = ld.linear(blk(l, "attn_output"), {H, q_out}, false);
  if (s.qk_norm) {
    q_norm_ = ld.tensor(blk(l, "attn_q_norm.weight"), {hd});
    k_norm_ = ld.tensor(blk(l, "attn_k_norm.weight"), {hd});
  }
  if (s.post_norm) post_norm_ = ld.tensor(blk(l, "post_attention_norm.weight"), {H});
  if (!s.fused_qkv && f.stack()) {
    qkv_ = stack_linears({&q_, &k_, &v_});
    if (qkv_.defined()) q_ = k_ = v_ = Linear{};
    // Otherwise q and k alone: one product for both and, in a recorded step, rope_kv_append
    // instead of two ropes and two cache copies.
    if (!qkv_.defined() && f.stack_qk()) qk_ = stack_linears({&q_, &k_});
    if (qk_.defined()) q_ = k_ = Linear{};
  }
}

Attention::Projected Attention::project(Residual& r, size_t T, const Fusions& f) const {
  const size_t nh = s_.n_heads, nkv = s_.n_kv_heads, hd = s_.head_dim;
  const Linear& stacked = qkv_.defined() ? qkv_ : qk_;
  // The norm goes inside the product only where that product is q|k|v: with q|k, v reads h too.
  Normed n = pre_norm(r, norm_, s_.eps, stacked.defined() ? stacked : q_, qkv_.defined(), f, T);
  Projected p{n.h, n.hq, n.y, Tensor()};
  if (!p.y.defined() && stacked.defined()) p.y = stacked.forward(p.h, p.hq);
  // v as (1, T, heads, hd): a column range of the stacked q | k | v, or its own product.
  p.v = (qkv_.defined() ? p.y.narrow(1, (nh + nkv) * hd, nkv * hd) : v_.forward(p.h, p.hq)).reshape({1, T, nkv, hd});
  return p;
}

std::pair<Tensor, Tensor> Attention::rope_qk(const Projected& p, size_t T, const Tensor& cos, const Tensor& sin) const {
  const size_t nh = s_.n_heads, nkv = s_.n_kv_heads, hd = s_.head_dim;
  const bool interleaved = s_.rope == RopeKind::Interleaved;
  const size_t rd = s_.rope_dim;
  auto rope = [&](const Tensor& t) {
    if (rd == 0) return interleaved ? t.rope_i(cos, sin) : t.rope(cos, sin);
    // Partial rotary: the first rd dims of each head rotate (as pairs of their own), the rest pass.
    const Tensor rot = t.narrow(3, 0, rd);
    return Tensor::cat({interleaved ? rot.rope_i(cos, sin) : rot.rope(cos, sin), t.narrow(3, rd, hd - rd)}, 3);
  };
  auto heads = [&](const Tensor& t, size_t n_heads) { return t.reshape({1, T, n_heads, hd}); };
  if (p.y.defined() && !s_.qk_norm) {
    // q and k heads side by side take the same rotation: one rope for both.
    const Tensor qk = rope(heads(p.y.narrow(1, 0, (nh + nkv) * hd), nh + nkv).transpose(1, 2));
    return {qk.narrow(1, 0, nh), qk.narrow(1, nh, nkv)};
  }
  Tensor q = heads(p.y.defined() ? p.y.narrow(1, 0, nh * hd) : q_.forward(p.h, p.hq), nh);
  Tensor k = heads(p.y.defined() ? p.y.narrow(1, nh * hd, nkv * hd) : k_.forward(p.h, p.hq), nkv);
  if (s_.qk_norm) {
    q = q.rms_norm(q_norm_, s_.eps);
    k = k.rms_norm(k_norm_, s_.eps);
  }
  return {rope(q.transpose(1, 2)), rope(k.transpose(1, 2))};
}

void Attention::forward(Residual& r, Tensor& kc, Tensor& vc, const Step& s, const Fusions& f, DType dtype) const {
  const size_t T = s.rows, nh = s_.n_heads, nkv = s_.n_kv_heads, hd = s_.head_dim;
  const Projected p = project(r, T, f);
  const Tensor& y = p.y;
  const Tensor& v = p.v;
  const DType cdt = kc.dtype();
  Tensor a;
  if (s.step && y.defined() && !s_.qk_norm && s_.rope_dim == 0 && cdt == r.x.dtype() && f.rope_kv_append()) {
    // A recorded step: rope of q and k and both cache writes are one kernel.
    const Tensor qk = y.narrow(1, 0, (nh + nkv) * hd).reshape({1, T, nh + nkv, hd}).transpose(1, 2);
    const Tensor q = fast::rope_kv_append(qk, s.cos, s.sin, s_.rope == RopeKind::Interleaved, nh, v.transpose(1, 2), kc,
                                          vc, s.step->narrow(0, 0, 1));
    a = attention_kv_len(q, kc.narrow(2, 0, s.view), vc.narrow(2, 0, s.view), s.step->narrow(0, 1, 1),
                         /*causal=*/true, scale());
  } else {
    const auto [q, k] = rope_qk(p, T, s.cos, s.sin);
    if (s.step) {
      const Tensor pos = s.step->narrow(0, 0, 1), len = s.step->narrow(0, 1, 1);
      kc.slice_set(k.to_dtype(cdt), 2, pos);
      vc.slice_set(v.transpose(1, 2).to_dtype(cdt), 2, pos);
      a = attention_kv_len(q.to_dtype(cdt), kc.narrow(2, 0, s.view), vc.narrow(2, 0, s.view), len, /*causal=*/true,
                           scale());
    } else {
      kc.slice_set(k.to_dtype(cdt), 2, s.pos0);
      vc.slice_set(v.transpose(1, 2).to_dtype(cdt), 2, s.pos0);
      const size_t nk = s.pos0 + T - s.key0;
      a = attention(q.to_dtype(cdt), kc.narrow(2, s.key0, nk), vc.narrow(2, s.key0, nk), /*causal=*/true, scale());
    }
  }
  a = a.to_dtype(dtype).transpose(1, 2).reshape({T, nh * hd});
  r.pending = finish(o_.forward(a));
}

void Attention::forward_paged(Residual& r, Tensor& kc, Tensor& vc, const PagedStep& s, const Fusions& f,
                              DType dtype) const {
  const size_t T = s.rows, nh = s_.n_heads, nkv = s_.n_kv_heads, hd = s_.head_dim;
  const Projected p = project(r, T, f);
  const auto [q, k] = rope_qk(p, T, s.cos, s.sin);
  // Tokens first: q (T, heads, hd), k and v (T, kv heads, hd); the op writes k and v to their slots, then
  // attends each token over its sequence's keys through the block table.
  const Tensor a = fast::paged_attention(q.transpose(1, 2).reshape({T, nh, hd}),
                                         k.transpose(1, 2).reshape({T, nkv, hd}), p.v.reshape({T, nkv, hd}), kc, vc,
                                         s.slot, s.block_table, s.seq, s.pos, s.block_tokens, s.window, scale());
  r.pending = finish(o_.forward(a.to_dtype(dtype).reshape({T, nh * hd})));
}

void GatedMlp::load(WeightLoader& ld, size_t l, size_t H, size_t ff, double eps, const Fusions& f, bool fused,
                    bool gelu, bool post_norm) {
  ff_ = ff;
  eps_ = eps;
  gelu_ = gelu;
  norm_ = ld.tensor(blk(l, "ffn_norm.weight"), {H});
  if (post_norm) post_norm_ = ld.tensor(blk(l, "post_ffw_norm.weight"), {H});
  if (fused) {
    gate_up_ = ld.linear(blk(l, "ffn_up"), {2 * ff, H}, false);
    down_ = ld.linear(blk(l, "ffn_down"), {H, ff}, false);
    return;
  }
  gate_ = ld.linear(blk(l, "ffn_gate"), {ff, H}, false);
  up_ = ld.linear(blk(l, "ffn_up"), {ff, H}, false);
  down_ = ld.linear(blk(l, "ffn_down"), {H, ff}, false);
  if (f.stack()) {
    gate_up_ = stack_linears({&gate_, &up_});
    if (gate_up_.defined()) gate_ = up_ = Linear{};
  }
}

void GatedMlp::forward(Residual& r, const Fusions& f) const {
  const size_t T = r.x.dim(0);
  QTensor sq;  // silu_mul's output in Q8_1, where down takes it
  const bool sq_out = !gelu_ && f.q8_1_input(down_, T);
  auto silu_mul = [&](const Tensor& g, const Tensor& u) {
    if (gelu_) return g.gelu().mul(u);
    if (!sq_out) return g.silu_mul(u);
    Tensor y;
    std::tie(y, sq) = fast::silu_mul_q8_1(g, u);
    return y;
  };
  const Linear& first = gate_up_.defined() ? gate_up_ : gate_;
  Normed n = pre_norm(r, norm_, eps_, first, gate_up_.defined(), f, T);
  Tensor s;
  if (n.y.defined()) {
    s = silu_mul(n.y.narrow(1, 0, ff_), n.y.narrow(1, ff_, ff_));
  } else if (gate_up_.defined() && !gate_up_.q.defined() && !gate_up_.b.defined() && !sq_out && !gelu_ &&
             f.matmul_swiglu()) {
    s = fast::matmul_swiglu(n.h, gate_up_.w.t());  // plain weights: one kernel on a GPU's decode shapes
  } else if (gate_up_.defined()) {
    const Tensor y = gate_up_.forward(n.h, n.hq);
    s = silu_mul(y.narrow(1, 0, ff_), y.narrow(1, ff_, ff_));
  } else {
    s = silu_mul(gate_.forward(n.h, n.hq), up_.forward(n.h, n.hq));
  }
  r.pending = down_.forward(s, sq);
  if (post_norm_.defined()) r.pending = r.pending.rms_norm(post_norm_, eps_);
}

void Embedding::load(WeightLoader& ld, const WeightSource& src, size_t vocab, size_t hidden, DType dtype) {
  dtype_ = dtype;
  const std::string name = "token_embd.weight";
  if (src.has(name) && src.quantized(name))
    q_ = ld.qtensor(name, {vocab, hidden});  // stays quantized: QTensor::embedding gathers rows
  else
    w_ = ld.tensor(name, {vocab, hidden});
}

Tensor Embedding::forward(const Tensor& ids) const {
  return q_.defined() ? q_.embedding(ids, dtype_) : w_.embedding(ids);
}

Tensor Embedding::row(int32_t id) const {
  return q_.defined() ? q_.rows(size_t(id), 1).dequantize(dtype_) : w_.narrow(0, size_t(id), 1);
}

Linear Embedding::as_linear() const {
  Linear l;
  l.w = w_;
  l.q = q_;
  return l;
}

void OutputHead::load(WeightLoader& ld, size_t hidden, size_t vocab, double eps, const Embedding* tied) {
  eps_ = eps;
  norm_ = ld.tensor("output_norm.weight", {hidden});
  out_ = tied ? tied->as_linear() : ld.linear("output", {vocab, hidden}, false);
}

Tensor OutputHead::forward(const Tensor& x, const Fusions& f) const {
  QTensor xq;
  Tensor h;
  if (f.q8_1_input(out_, x.dim(0)))
    std::tie(h, xq) = fast::rms_norm_q8_1(x, norm_, eps_);
  else
    h = x.rms_norm(norm_, eps_);
  return out_.forward(h, xq).to_dtype(DType::F32);
}

}  // namespace wick::llm::detail

// Fused nn ops: shape/dtype/device validation, then one backend call. Row ops and rope get
// contiguous operands (a strided view is copied once); attention keeps q/k/v strides and only
// needs a unit-stride last dim.
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "core/checks.hpp"
#include "wick/fast.hpp"
#include "wick/quant.hpp"

namespace wick {
namespace {

std::string S(size_t v) { return std::to_string(v); }

void check_nn_input(const Tensor& x, const char* op) {
  check_defined(x, op);
  check_float(x, op);
  if (x.rank() == 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": needs at least one dim, got " + describe(x) +
                                      "; unsqueeze(0) a scalar first");
}

// weight/bias of a norm: undefined, or 1-D of the last dim's size, same dtype and device.
void check_norm_param(const Tensor& p, const Tensor& x, const char* op, const char* what) {
  if (!p.defined()) return;
  check_same_device(x, p, op);
  check_same_dtype(x, p, op);
  if (p.rank() != 1 || p.dim(0) != x.dim(-1))
    throw Error(ErrorKind::Shape, std::string(op) + ": " + what + " must be 1-D of the last dim's size " +
                                      S(x.dim(-1)) + ", got " + describe(p) + " for input " + describe(x));
}

// The Q8_1 rows of fast::rms_norm_q8_1 / add_rms_norm_q8_1 / silu_mul_q8_1 (a result of dtype dt
// and shape s): checked before the op runs.
void check_q8_1_out(DType dt, const Shape& s, const char* op) {
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16)
    throw Error(ErrorKind::DType, std::string(op) + ": Q8_1 rows come from f32, f16 or bf16 results, not " +
                                      dtype_name(dt) + "; run the op without _q8_1 and quantize a cast copy");
  if (s.empty() || s.back() % 32 != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": Q8_1 rows need a last dim that is a multiple of 32, got " +
                                      shape_str(s) + "; run the op without _q8_1");
}

// *q8_1 from the backend's bytes, or (a backend that wrote none) the result quantized here.
void set_q8_1(QTensor* q8_1, const StoragePtr& bytes, const Tensor& y) {
  *q8_1 = bytes ? QTensor(bytes, GGMLType::Q8_1, y.shape(), y.device()) : QTensor::quantize(y, GGMLType::Q8_1);
}

// residual (add_rms_norm): normalise x + residual and return that sum in *sum. q8_1: also set to
// the result's rows in Q8_1.
Tensor norm_impl(const Tensor& x, const Tensor& w, const Tensor& b, double eps, bool rms, const char* op,
                 const Tensor* residual = nullptr, Tensor* sum = nullptr, QTensor* q8_1 = nullptr) {
  check_nn_input(x, op);
  if (q8_1) check_q8_1_out(x.dtype(), x.shape(), op);
  if (residual) {
    check_defined(*residual, op);
    check_same_device(x, *residual, op);
    check_same_dtype(x, *residual, op);
    if (residual->shape() != x.shape())
      throw Error(ErrorKind::Shape, std::string(op) + ": residual must have x's shape, got " + describe(*residual) +
                                        " for x " + describe(x) +
                                        "; broadcast it first (expand), or use add then rms_norm");
  }
  check_norm_param(w, x, op, "weight");
  check_norm_param(b, x, op, "bias");
  if (!(eps >= 0))
    throw Error(ErrorKind::Argument, std::string(op) + ": eps must be >= 0 (and not NaN), got " + std::to_string(eps) +
                                         "; a typical value is 1e-5 or 1e-6");
  Tensor xd = x.contiguous(), wd, bd;
  NormArgs a;
  a.eps = eps;
  a.rms = rms;
  if (w.defined()) {
    wd = w.contiguous();
    a.weight = wd.storage().get();
    a.weight_offset = wd.layout().offset;
  }
  if (b.defined()) {
    bd = b.contiguous();
    a.bias = bd.storage().get();
    a.bias_offset = bd.layout().offset;
  }
  Tensor rd;
  StoragePtr sum_s;
  if (residual) {
    rd = residual->contiguous();
    a.residual = rd.storage().get();
    a.residual_offset = rd.layout().offset;
    a.sum = &sum_s;
  }
  StoragePtr q8_s;
  if (q8_1) a.q8_1 = &q8_s;
  Tensor out = wrap_like(xd.storage()->norm_last_dim(xd.layout(), a), x.shape(), x);
  if (residual) *sum = wrap_like(sum_s, x.shape(), x);
  if (q8_1) set_q8_1(q8_1, q8_s, out);
  return out;
}

// silu(gate) * up; q8_1: also set to the result's rows in Q8_1.
Tensor silu_mul_impl(const Tensor& gate, const Tensor& up, const char* op, QTensor* q8_1 = nullptr) {
  check_defined(gate, op);
  check_defined(up, op);
  check_same_device(gate, up, op);
  check_same_dtype(gate, up, op);
  check_float(gate, op);
  Shape s = broadcast_shapes(gate.shape(), up.shape(), op);
  if (q8_1) check_q8_1_out(gate.dtype(), s, op);
  StoragePtr q8_s;
  Tensor y = wrap_like(gate.storage()->silu_mul(gate.layout().broadcast_as(s), *up.storage(),
                                                up.layout().broadcast_as(s), q8_1 ? &q8_s : nullptr),
                       s, gate);
  if (q8_1) set_q8_1(q8_1, q8_s, y);
  return y;
}

// rope's operands checked and made contiguous, with the dims the backend takes.
struct RopeArgs {
  Tensor x, cos, sin;
  RopeDims dims;
};
RopeArgs rope_args(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeKind kind, const char* op) {
  check_nn_input(x, op);
  for (const Tensor* t : {&cos, &sin}) {
    check_defined(*t, op);
    check_same_device(x, *t, op);
    check_same_dtype(x, *t, op);
  }
  if (x.rank() != 4)
    throw Error(ErrorKind::Shape, std::string(op) + ": x must be 4-D " +
                                      (kind == RopeKind::HalfSplitThd ? "(b, t, h, d)" : "(b, h, t, d)") + ", got " +
                                      describe(x) + "; reshape it");
  const size_t b = x.dim(0), d = x.dim(3);
  const size_t h = kind == RopeKind::HalfSplitThd ? x.dim(2) : x.dim(1);
  const size_t t = kind == RopeKind::HalfSplitThd ? x.dim(1) : x.dim(2);
  if (d % 2 != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": the last dim must be even, got " + describe(x));
  const Shape table{t, d / 2}, table_b{b, t, d / 2};
  if (cos.shape() != sin.shape() || (cos.shape() != table && cos.shape() != table_b))
    throw Error(ErrorKind::Shape, std::string(op) + ": cos and sin must both be " + shape_str(table) + " or " +
                                      shape_str(table_b) + " for x " + describe(x) + ", got cos " + describe(cos) +
                                      " and sin " + describe(sin));
  return {x.contiguous(), cos.contiguous(), sin.contiguous(), RopeDims{b, h, t, d, cos.rank() == 3}};
}

Tensor rope_impl(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeKind kind, const char* op) {
  const RopeArgs r = rope_args(x, cos, sin, kind, op);
  return wrap_like(r.x.storage()->rope(kind, r.x.layout(), *r.cos.storage(), r.cos.layout(), *r.sin.storage(),
                                       r.sin.layout(), r.dims),
                   x.shape(), x);
}

// softmax / log_softmax over any dim: the last dim is the fused kernel; another dim is moved
// last (transpose + the kernel's contiguous copy), computed there and transposed back (a view).
Tensor softmax_dim(const Tensor& x, int64_t dim, bool log, const char* op) {
  check_nn_input(x, op);
  const size_t d = norm_dim(dim, x.rank(), op);
  const int64_t last = int64_t(x.rank()) - 1;
  auto fused = [log](const Tensor& t) { return log ? t.log_softmax_last_dim() : t.softmax_last_dim(); };
  if (int64_t(d) == last) return fused(x);
  return fused(x.transpose(int64_t(d), last)).transpose(int64_t(d), last);
}

// A rank-4 view whose last dim has stride 1 (copied when it does not).
Tensor unit_last(const Tensor& t) { return (t.dim(3) <= 1 || t.layout().strides[3] == 1) ? t : t.contiguous(); }

}  // namespace

Tensor Tensor::softmax_last_dim() const {
  check_nn_input(*this, "softmax_last_dim");
  Tensor x = contiguous();
  return wrap_like(x.storage()->softmax_last_dim(x.layout(), false), shape(), *this);
}

Tensor Tensor::log_softmax_last_dim() const {
  check_nn_input(*this, "log_softmax_last_dim");
  Tensor x = contiguous();
  return wrap_like(x.storage()->softmax_last_dim(x.layout(), true), shape(), *this);
}

Tensor Tensor::softmax(int64_t dim) const { return softmax_dim(*this, dim, false, "softmax"); }
Tensor Tensor::log_softmax(int64_t dim) const { return softmax_dim(*this, dim, true, "log_softmax"); }

Tensor Tensor::rms_norm(const Tensor& weight, double eps) const {
  return norm_impl(*this, weight, Tensor(), eps, true, "rms_norm");
}

std::pair<Tensor, Tensor> Tensor::add_rms_norm(const Tensor& residual, const Tensor& weight, double eps) const {
  Tensor sum;
  Tensor y = norm_impl(*this, weight, Tensor(), eps, true, "add_rms_norm", &residual, &sum);
  return {sum, y};
}

Tensor Tensor::layer_norm(const Tensor& weight, const Tensor& bias, double eps) const {
  return norm_impl(*this, weight, bias, eps, false, "layer_norm");
}

Tensor Tensor::rope_i(const Tensor& cos, const Tensor& sin) const {
  return rope_impl(*this, cos, sin, RopeKind::Interleaved, "rope_i");
}
Tensor Tensor::rope(const Tensor& cos, const Tensor& sin) const {
  return rope_impl(*this, cos, sin, RopeKind::HalfSplit, "rope");
}
Tensor Tensor::rope_thd(const Tensor& cos, const Tensor& sin) const {
  return rope_impl(*this, cos, sin, RopeKind::HalfSplitThd, "rope_thd");
}

Tensor Tensor::silu_mul(const Tensor& up) const { return silu_mul_impl(*this, up, "silu_mul"); }

Tensor Tensor::swiglu() const {
  check_nn_input(*this, "swiglu");
  const size_t n = dim(-1);
  if (n % 2 != 0)
    throw Error(ErrorKind::Shape, "swiglu: the last dim must be even (gate and up halves), got " + describe(*this));
  return narrow(-1, 0, n / 2).silu_mul(narrow(-1, n / 2, n / 2));
}

std::pair<Tensor, QTensor> fast::rms_norm_q8_1(const Tensor& x, const Tensor& weight, double eps) {
  QTensor q;
  Tensor y = norm_impl(x, weight, Tensor(), eps, true, "rms_norm_q8_1", nullptr, nullptr, &q);
  return {y, q};
}

std::tuple<Tensor, Tensor, QTensor> fast::add_rms_norm_q8_1(const Tensor& x, const Tensor& residual,
                                                            const Tensor& weight, double eps) {
  Tensor sum;
  QTensor q;
  Tensor y = norm_impl(x, weight, Tensor(), eps, true, "add_rms_norm_q8_1", &residual, &sum, &q);
  return {sum, y, q};
}

std::pair<Tensor, QTensor> fast::silu_mul_q8_1(const Tensor& gate, const Tensor& up) {
  QTensor q;
  Tensor y = silu_mul_impl(gate, up, "silu_mul_q8_1", &q);
  return {y, q};
}

Tensor fast::rope_kv_append(const Tensor& qk, const Tensor& cos, const Tensor& sin, bool interleaved, size_t q_heads,
                            const Tensor& v, Tensor& k_cache, Tensor& v_cache, const Tensor& start) {
  const char* op = "rope_kv_append";
  const RopeKind kind = interleaved ? RopeKind::Interleaved : RopeKind::HalfSplit;
  RopeArgs r = rope_args(qk, cos, sin, kind, op);
  const size_t b = r.dims.b, h = r.dims.h, t = r.dims.t, d = r.dims.d;
  if (q_heads >= h)
    throw Error(ErrorKind::Shape, std::string(op) + ": q_heads (" + S(q_heads) + ") must leave at least one k head " +
                                      "in qk " + describe(qk) + " (q heads then k heads along dim 1)");
  const size_t h_kv = h - q_heads;
  for (const Tensor* x : {&v, static_cast<const Tensor*>(&k_cache), static_cast<const Tensor*>(&v_cache)}) {
    check_defined(*x, op);
    check_same_device(qk, *x, op);
    check_same_dtype(qk, *x, op);
  }
  const std::string shapes =
      "qk " + describe(qk) + ", v " + describe(v) + ", k_cache " + describe(k_cache) + ", v_cache " + describe(v_cache);
  const bool fit = v.rank() == 4 && k_cache.rank() == 4 && v_cache.rank() == 4 && v.dim(0) == b && v.dim(1) == h_kv &&
                   v.dim(2) == t && k_cache.dim(0) == b && k_cache.dim(1) == h_kv && k_cache.dim(3) == d &&
                   v_cache.dim(0) == b && v_cache.dim(1) == h_kv && v_cache.dim(3) == v.dim(3) &&
                   v_cache.dim(2) == k_cache.dim(2);
  if (!fit)
    throw Error(ErrorKind::Shape, std::string(op) + ": with " + S(q_heads) + " q heads, v must be (" + S(b) + ", " +
                                      S(h_kv) + ", " + S(t) + ", d_v), k_cache (" + S(b) + ", " + S(h_kv) +
                                      ", capacity, " + S(d) + ") and v_cache (" + S(b) + ", " + S(h_kv) +
                                      ", capacity, d_v), one capacity for both; got " + shapes);
  const size_t cap = k_cache.dim(2);
  if (t > cap)
    throw Error(ErrorKind::Shape, std::string(op) + ": " + S(t) + " new rows do not fit a cache of capacity " + S(cap) +
                                      " (" + shapes + "); a KV cache this full needs a larger capacity");
  check_device_start(k_cache, start, op);
  check_writable(k_cache, op);
  check_writable(v_cache, op);
  // Both caches in one storage (a K/V pair of one allocation) must not overlap: the kernel writes
  // them in no set order.
  if (k_cache.storage() == v_cache.storage()) {
    const Layout &kl = k_cache.layout(), &vl = v_cache.layout();
    if (kl.offset < vl.max_offset_plus_one() && vl.offset < kl.max_offset_plus_one())
      throw Error(ErrorKind::Argument, std::string(op) + ": k_cache and v_cache overlap in one storage (" + shapes +
                                           "); give each its own tensor");
  }
  // An input sharing a cache's storage may be overwritten while it is read: read it out first.
  auto apart = [&](const Tensor& x) {
    return x.storage() == k_cache.storage() || x.storage() == v_cache.storage() ? x.copy() : x;
  };
  r.x = apart(r.x);
  r.cos = apart(r.cos);
  r.sin = apart(r.sin);
  const Tensor vv = apart(v), st = apart(start);
  const KvAppend a{q_heads,
                   vv.storage().get(),
                   vv.layout(),
                   k_cache.storage().get(),
                   k_cache.narrow(2, 0, t).layout(),
                   v_cache.storage().get(),
                   v_cache.narrow(2, 0, t).layout(),
                   st.storage().get(),
                   st.layout().offset,
                   cap - t};
  const Tensor rotated = wrap_like(r.x.storage()->rope_kv_append(kind, r.x.layout(), *r.cos.storage(), r.cos.layout(),
                                                                 *r.sin.storage(), r.sin.layout(), r.dims, a),
                                   qk.shape(), qk);
  return rotated.narrow(1, 0, q_heads);
}

namespace {

// attention and attention_kv_len (kv_len undefined for the former): one validation, one backend call.
Tensor attention_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kv_len, bool causal,
                      std::optional<double> scale, const char* op) {
  for (const Tensor* t : {&q, &k, &v}) check_defined(*t, op);
  check_same_device(q, k, op);
  check_same_device(q, v, op);
  check_same_dtype(q, k, op);
  check_same_dtype(q, v, op);
  const DType dt = q.dtype();
  if (dt != DType::F16 && dt != DType::BF16 && dt != DType::F32 && dt != DType::F64)
    throw Error(ErrorKind::DType, std::string(op) + ": needs f16, bf16, f32 or f64, got " + describe(q) +
                                      "; convert q, k and v with to_dtype(DType::F16)");
  const std::string shapes = "q " + describe(q) + ", k " + describe(k) + ", v " + describe(v);
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    throw Error(ErrorKind::Shape, std::string(op) + ": q, k and v must be 4-D (batch, heads, seq, head_dim), got " +
                                      shapes + "; unsqueeze(0) a missing batch dim");
  const size_t b = q.dim(0), hq = q.dim(1), tq = q.dim(2), d = q.dim(3);
  const size_t hkv = k.dim(1), tkv = k.dim(2), dv = v.dim(3);
  if (k.dim(0) != b || v.dim(0) != b || v.dim(1) != hkv || v.dim(2) != tkv || k.dim(3) != d)
    throw Error(ErrorKind::Shape, std::string(op) + ": shapes do not fit (" + shapes +
                                      "): k and v need q's batch, the same heads and seq, and k q's head_dim");
  if (hkv == 0 ? hq != 0 : hq % hkv != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": q's heads (" + S(hq) + ") must be a multiple of k/v's heads (" +
                                      S(hkv) + ") for grouped-query attention (" + shapes + ")");
  if (causal && tkv < tq)
    throw Error(ErrorKind::Shape, std::string(op) + ": causal attention needs at least as many keys as queries (" +
                                      shapes + "); the first queries would see no key");
  if (tkv == 0 && tq != 0 && b * hq * dv != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": no keys to attend to (" + shapes + ")");
  const double sc = scale ? *scale : (d == 0 ? 1.0 : 1.0 / std::sqrt(double(d)));
  if (!std::isfinite(sc))
    throw Error(ErrorKind::Argument, std::string(op) + ": scale must be finite, got " + std::to_string(sc) +
                                         "; leave it unset for the default 1/sqrt(head_dim)");
  AttentionDims a{b, hq, hkv, tq, tkv, d, dv, sc, causal};
  if (kv_len.defined()) {
    check_same_device(q, kv_len, op);
    const DType lt = kv_len.dtype();
    if (lt != DType::U32 && lt != DType::I32 && lt != DType::I64)
      throw Error(ErrorKind::DType, std::string(op) + ": kv_len must be u32, i32 or i64, got " + describe(kv_len) +
                                        "; convert it with to_dtype(DType::I32)");
    const bool per_batch = kv_len.rank() == 1 && kv_len.dim(0) == b;
    if (!per_batch && kv_len.numel() != 1)
      throw Error(ErrorKind::Shape, std::string(op) + ": kv_len must be (" + S(b) +
                                        ") (one length per batch) or hold one length for every batch, got " +
                                        describe(kv_len) + " for " + shapes);
    a.kv_len = kv_len.storage().get();
    a.kv_len_offset = kv_len.layout().offset;
    a.kv_len_stride = per_batch ? kv_len.layout().strides[0] : 0;
  }
  Tensor qd = unit_last(q), kd = unit_last(k), vd = unit_last(v);
  return wrap_like(qd.storage()->attention(qd.layout(), *kd.storage(), kd.layout(), *vd.storage(), vd.layout(), a),
                   Shape{b, hq, tq, dv}, q);
}

}  // namespace

Tensor fast::paged_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                             const Tensor& slot, const Tensor& block_table, const Tensor& seq, const Tensor& pos,
                             size_t block_size, size_t window, std::optional<double> scale) {
  const char* op = "paged_attention";
  for (const Tensor* t : {&q, &k, &v, static_cast<const Tensor*>(&k_cache), static_cast<const Tensor*>(&v_cache), &slot,
                          &block_table, &seq, &pos}) {
    check_defined(*t, op);
    check_same_device(q, *t, op);
  }
  const DType dt = q.dtype(), cdt = k_cache.dtype();
  if (dt != DType::F16 && dt != DType::BF16 && dt != DType::F32)
    throw Error(ErrorKind::DType, std::string(op) + ": q, k and v must be f16, bf16 or f32, got " + describe(q));
  check_same_dtype(q, k, op);
  check_same_dtype(q, v, op);
  if (cdt != DType::F16 && cdt != DType::BF16 && cdt != DType::F32 && cdt != DType::F8E4M3)
    throw Error(ErrorKind::DType,
                std::string(op) + ": the caches must be f16, bf16, f32 or f8e4m3, got " + describe(k_cache));
  check_same_dtype(k_cache, v_cache, op);
  for (const Tensor* t : {&slot, &block_table, &seq, &pos})
    if (t->dtype() != DType::I32)
      throw Error(ErrorKind::DType, std::string(op) + ": slot, block_table, seq and pos must be i32, got " +
                                        describe(*t) + "; convert it with to_dtype(DType::I32)");
  const std::string shapes = "q " + describe(q) + ", k " + describe(k) + ", v " + describe(v) + ", k_cache " +
                             describe(k_cache) + ", v_cache " + describe(v_cache) + ", slot " + describe(slot) +
                             ", block_table " + describe(block_table) + ", seq " + describe(seq) + ", pos " +
                             describe(pos);
  if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 || k_cache.rank() != 2 || v_cache.rank() != 2 ||
      block_table.rank() != 2 || slot.rank() != 1 || seq.rank() != 1 || pos.rank() != 1)
    throw Error(ErrorKind::Shape, std::string(op) +
                                      ": needs q (t, h_q, d), k (t, h_kv, d), v (t, h_kv, d_v), "
                                      "k_cache (rows, h_kv*d), v_cache (rows, h_kv*d_v), block_table "
                                      "(n_seqs, max_blocks) and slot, seq, pos (t); got " +
                                      shapes);
  const size_t t = q.dim(0), h_q = q.dim(1), d = q.dim(2), h_kv = k.dim(1), d_v = v.dim(2), rows = k_cache.dim(0);
  const bool fit = k.dim(0) == t && v.dim(0) == t && k.dim(2) == d && v.dim(1) == h_kv && h_kv > 0 && h_q % h_kv == 0 &&
                   k_cache.dim(1) == h_kv * d && v_cache.dim(1) == h_kv * d_v && v_cache.dim(0) == rows &&
                   slot.dim(0) == t && seq.dim(0) == t && pos.dim(0) == t;
  if (!fit)
    throw Error(ErrorKind::Shape, std::string(op) +
                                      ": shapes do not agree (t tokens, h_q a multiple of h_kv, the "
                                      "caches' columns h_kv*d and h_kv*d_v, one row count): " +
                                      shapes);
  if (block_size == 0 || rows == 0 || rows % block_size != 0 || block_table.dim(0) == 0 || block_table.dim(1) == 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": the caches' " + S(rows) + " rows must be whole blocks of " +
                                      S(block_size) + " (block_size > 0) and block_table non-empty: " + shapes);
  if (!k_cache.is_contiguous() || !v_cache.is_contiguous())
    throw Error(ErrorKind::Argument, std::string(op) + ": the caches must be contiguous: " + shapes);
  if (k_cache.storage() == v_cache.storage())
    throw Error(ErrorKind::Argument, std::string(op) + ": k_cache and v_cache share a storage; give each its own");
  // Contiguous inputs; one sharing a cache's storage may be overwritten while it is read: read it out first.
  // q, k and v also start at element 0 of their storages (as the backend takes them).
  auto apart = [&](const Tensor& x, bool from_zero) {
    const Tensor c = x.contiguous();
    const bool shared = c.storage() == k_cache.storage() || c.storage() == v_cache.storage();
    return shared || (from_zero && c.layout().offset != 0) ? c.copy() : c;
  };
  const Tensor qc = apart(q, true), kc = apart(k, true), vc = apart(v, true), sl = apart(slot, false),
               tb = apart(block_table, false), sq = apart(seq, false), ps = apart(pos, false);
  const PagedAttention a{t,
                         h_q,
                         h_kv,
                         d,
                         d_v,
                         rows,
                         block_table.dim(0),
                         block_table.dim(1),
                         block_size,
                         window,
                         scale ? *scale : (d == 0 ? 1.0 : 1.0 / std::sqrt(double(d))),
                         kc.storage().get(),
                         vc.storage().get(),
                         k_cache.storage().get(),
                         v_cache.storage().get(),
                         k_cache.layout().offset,
                         v_cache.layout().offset,
                         cdt,
                         sl.storage().get(),
                         sq.storage().get(),
                         ps.storage().get(),
                         tb.storage().get(),
                         sl.layout().offset,
                         sq.layout().offset,
                         ps.layout().offset,
                         tb.layout().offset};
  return wrap_like(qc.storage()->paged_attention(a), {t, h_q, d_v}, q);
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, std::optional<double> scale) {
  return attention_impl(q, k, v, Tensor(), causal, scale, "attention");
}

Tensor attention_kv_len(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kv_len, bool causal,
                        std::optional<double> scale) {
  check_defined(kv_len, "attention_kv_len");
  return attention_impl(q, k, v, kv_len, causal, scale, "attention_kv_len");
}

}  // namespace wick

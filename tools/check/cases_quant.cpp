// Cases: the quantized ops of wick/quant.hpp for every supported block type (Q4_0 ... MXFP4):
// dequantize to f32/f16/bf16, embedding rows, qmatmul's decode (m = 1, 3, 8) and prefill (m = 9,
// 64) paths with x f32/f16/bf16 in every layout, and quantize to the activation formats Q8_0,
// Q8_1, Q8_K (the ones a GPU quantizes). Weights are random valid blocks made on the host
// (quant_util.hpp), not by the quantizers under test.
//
// Each case checks itself against a host reference and throws ReferenceFailure; the runner's own
// comparisons then see only results that must be exact on every device (dequantize, embedding).
//  - dequantize / embedding: bit for bit the CPU's f32 dequantize (itself bit-identical to
//    gguf-py, tests/test_quant.cpp), rounded to f16/bf16 on the host (round to nearest even).
//    Blocks with Inf and NaN scales included: every device must give the CPU's values.
//  - qmatmul: reference y = x @ W^T in f64 from x's values and the CPU's f32 dequantize of W.
//    Bound per output element (derivation in qmatmul_bound below):
//      decode:  E = E_act + gamma * S
//      prefill: E = max(E_act, E_half) + gamma * S   (whichever path the backend takes)
//      |y - y_ref| <= E + (|y_ref| + E) * u_out
//    and over all elements sum (y - y_ref)^2 <= 16 * (the sum of the errors' variances): the
//    rounding errors are unbiased, so a systematic error the worst-case bound misses fails here.
//    E_act = sum_j |w_j| e_j (+ the Q8_1 sum term for Q4_1/Q5_1), e_j the activation's rounding
//    error; E_half the rounding of W (and an f32 x) to the GEMM's half type; gamma * S the f32
//    accumulation; u_out the unit roundoff of x's dtype for the output.
//  - add_rms_norm_matmul_t: the sum exact, y as qmatmul's decode against the host's f64 norm
//    (check_normed_qmatmul).
//  - quantize (Q8_0/Q8_1/Q8_K): every block decodes within its rounding bound of x, the scale is
//    amax/127, Q8_1's s is d * sum(q), Q8_K's bsums are the sums of its quants; on a GPU the
//    bytes equal the CPU quantizer's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "check/cases.hpp"
#include "check/quant_util.hpp"
#include "wick/fast.hpp"
#include "wick/quant.hpp"

namespace wick::check {
namespace {

const std::vector<DType> kQFloats = {DType::BF16, DType::F16, DType::F32};

constexpr double kF32U = 0x1p-24;    // f32 unit roundoff
constexpr double kF16U = 0x1p-11;    // f16
constexpr double kF16Sub = 0x1p-25;  // half the f16 subnormal spacing: the absolute rounding floor

double unit_roundoff(DType d) {
  switch (d) {
    case DType::F16:
      return kF16U;
    case DType::BF16:
      return 0x1p-8;
    case DType::F64:
      return 0x1p-53;
    default:
      return kF32U;
  }
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

[[noreturn]] void fail(const std::string& what) { throw ReferenceFailure(what); }

// Row length of the case weights: an odd number of blocks, and for the 32-blocks not a multiple
// of 256 (a kernel may not assume whole super-blocks). 37 rows: not a multiple of any tile.
size_t case_k(GGMLType t) { return ggml_block_size(t) == 32 ? 32 * 11 : 256 * 3; }
constexpr size_t kRows = 37;

// A weight matrix made on the host, and its values as the CPU dequantizes them.
struct Weights {
  GGMLType type;
  size_t n, k;
  std::vector<uint8_t> bytes;
  std::vector<double> w;  // (n, k) CPU f32 dequantize
  std::vector<double> m;  // |offset m| per 32-block (Q4_1/Q5_1), else zeros
};

Weights make_weights(GGMLType t, size_t n, size_t k, uint64_t seed, bool specials = false) {
  Weights W{t, n, k, random_qblocks(t, n, k, seed), {}, {}};
  if (specials) set_special_scales(t, W.bytes, n, k);
  W.w = host_values(QTensor::from_bytes(t, {n, k}, W.bytes.data(), W.bytes.size()).dequantize(DType::F32));
  W.m = block_offsets(t, W.bytes, n, k);
  return W;
}

// An exact f32 value rounded to dtype on the host (software round to nearest even).
double round_to(DType d, double v) {
  if (d == DType::F16) return double(f16_bits_to_f32(f32_to_f16_bits(float(v))));
  if (d == DType::BF16) return double(bf16_bits_to_f32(f32_to_bf16_bits(float(v))));
  return v;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void check_shape(const Tensor& got, const Shape& want, DType dtype, const std::string& what) {
  if (got.shape() != want || got.dtype() != dtype)
    fail(what + ": result " + shape_str(got.shape()) + " " + dtype_name(got.dtype()) + ", want " + shape_str(want) +
         " " + dtype_name(dtype));
}

// ---- qmatmul's bound
//
// The backend computes y = sum_j x~_j w_j with x~ either x quantized to an activation format
// (integer path) or x and w rounded to a half type (GEMM path), accumulated in f32.
// Activation formats (llama.cpp's choice, which ours follow): Q8_0/Q8_1 blocks of 32 with an f16
// scale for every type; Q8_K blocks of 256 with an f32 scale for the 256-block types on the CPU.
// For a block with amax = max |x_j|, d = amax / 127, q_j = round(x_j / d) and the stored scale D:
//   |x_j - D q_j| <= |x_j - d q_j| + |q_j| |d - D| <= d (1/2 + 2^-16) + 127 delta,
// delta = max(d 2^-11, 2^-25) for an f16 D (rounding, subnormal floor), d 2^-22 for Q8_K's f32
// D = 1/(-127/max); the 2^-16 covers x_j / d evaluated in f32. e_j is the larger of the two
// formats' bounds where both may apply. Then |sum_j (x_j - x~_j) w_j| <= sum_j |w_j| e_j.
// Q4_1/Q5_1 (w = d_w q + m) with Q8_1 use s = f16(d * sum q) for m's part: per block
//   |m| |s - D sum q| <= |m| (32 * 127 (delta + d 2^-11) + 2^-25).
// GEMM path: w rounded to the half type u_w (x's dtype when half, else f16), an f32 x to f16:
//   |x w - x~ w~| <= |x| |w| (u_w + u_x + u_w u_x) + (|x| + |w|) 2^-25.
// f32 accumulation of k products (any order, the scale products included): gamma = (k + 16) 2^-24
// times S = sum_j |w_j| (|x_j| + e_j). Output in x's dtype: + (|y_ref| + E) u_out.
struct ActError {
  std::vector<double> e;  // per element of the row
  std::vector<double> s;  // per 32-block: Q8_1's sum error factor
};

ActError act_error(const double* x, size_t k, bool k256) {
  ActError a{std::vector<double>(k), std::vector<double>(k / 32)};
  for (size_t b = 0; b < k; b += 32) {
    double amax = 0;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const double d = amax / 127, delta = std::max(d * kF16U, kF16Sub);
    for (size_t j = b; j < b + 32; ++j) a.e[j] = d * (0.5 + 0x1p-16) + 127 * delta;
    a.s[b / 32] = 32 * 127 * (delta + d * kF16U) + kF16Sub;
  }
  if (k256)
    for (size_t b = 0; b < k; b += 256) {
      double amax = 0;
      for (size_t j = b; j < b + 256; ++j) amax = std::max(amax, std::fabs(x[j]));
      const double d = amax / 127, err = d * (0.5 + 0x1p-16) + 127 * d * 0x1p-22;
      for (size_t j = b; j < b + 256; ++j) a.e[j] = std::max(a.e[j], err);
    }
  return a;
}

}  // namespace

static void check_qmatmul(const Weights& W, const Tensor& x, const Tensor& y, bool prefill, const std::string& what) {
  Shape want_shape = x.shape();
  want_shape.back() = W.n;
  check_shape(y, want_shape, x.dtype(), what);
  const size_t k = W.k, n = W.n, m = x.numel() / k;
  const std::vector<double> xv = host_values(x), yv = host_values(y);
  const bool k256 = ggml_block_size(W.type) == 256, with_sum = qtype_uses_q8_1_sum(W.type);
  const double u_out = unit_roundoff(y.dtype());
  const double u_w = x.dtype() == DType::BF16 ? 0x1p-8 : kF16U, u_x = x.dtype() == DType::F32 ? kF16U : 0;
  const double gamma = double(k + 16) * kF32U;
  double sum_err2 = 0, sum_var = 0;
  for (size_t i = 0; i < m; ++i) {
    const double* xr = xv.data() + i * k;
    const ActError a = act_error(xr, k, k256);
    for (size_t r = 0; r < n; ++r) {
      const double* wr = W.w.data() + r * k;
      double ref = 0, e_act = 0, s = 0, e_half = 0, v_act = 0, v_half = 0;
      for (size_t j = 0; j < k; ++j) {
        const double ax = std::fabs(xr[j]), aw = std::fabs(wr[j]);
        const double eh = ax * aw * (u_w + u_x + u_w * u_x) + (ax + aw) * kF16Sub;
        ref += xr[j] * wr[j];
        e_act += aw * a.e[j];
        s += aw * (ax + a.e[j]);
        e_half += eh;
        v_act += aw * aw * a.e[j] * a.e[j] / 3;
        v_half += eh * eh / 3;
      }
      if (with_sum)
        for (size_t b = 0; b < k / 32; ++b) {
          const double es = W.m[r * (k / 32) + b] * a.s[b];
          e_act += es;
          v_act += es * es / 3;
        }
      const double e = (prefill ? std::max(e_act, e_half) : e_act) + gamma * s;
      sum_var += (prefill ? std::max(v_act, v_half) : v_act) + (gamma * s) * (gamma * s) +
                 (std::fabs(ref) + e) * u_out * (std::fabs(ref) + e) * u_out + kF16Sub * kF16Sub;
      const double bound = e + (std::fabs(ref) + e) * u_out + kF16Sub;
      const double got = yv[i * n + r];
      if (!(std::fabs(got - ref) <= bound))
        fail(what + ": y[" + std::to_string(i) + ", " + std::to_string(r) + "] = " + num(got) +
             ", reference (CPU dequantize + f64 matmul) " + num(ref) + ": |difference| " + num(std::fabs(got - ref)) +
             " > bound " + num(bound) + (prefill ? " (activation or half rounding)" : " (activation quantization)"));
      sum_err2 += (got - ref) * (got - ref);
    }
  }
  // The worst-case bound grows with k; rounding errors of either path are unbiased, so their sum
  // of squares stays near the sum of the variances (errors uniform within +-e: e^2 / 3, above the
  // true (d/2)^2 / 3). Not exactly: one x row's errors are shared by every weight row, and k-quant
  // sub-blocks of random quants have a common mean, so few independent sums remain (the CPU's
  // Q5_K reaches 2x the predicted rms). 4x the rms still catches a scale or offset ~5% off, which
  // the worst-case bound lets pass (it allows ~10-25%).
  if (!(sum_err2 <= 16 * sum_var))
    fail(what + ": root mean square error " + num(std::sqrt(sum_err2 / double(m * n))) + " is more than 4x the " +
         num(std::sqrt(sum_var / double(m * n))) + " that rounding predicts (a systematic error, e.g. a scale off)");
}

void check_qmatmul(GGMLType t, const std::vector<uint8_t>& w_bytes, size_t n, size_t k, const Tensor& x,
                   const Tensor& y, bool prefill, const std::string& what) {
  Weights W{t, n, k, w_bytes, {}, {}};
  W.w = host_values(QTensor::from_bytes(t, {n, k}, w_bytes.data(), w_bytes.size()).dequantize(DType::F32));
  W.m = block_offsets(t, w_bytes, n, k);
  check_qmatmul(W, x, y, prefill, what);
}

// ---- the activation formats' blocks

static double ld_f16(const uint8_t* p) { return double(f16_bits_to_f32(uint16_t(p[0] | (p[1] << 8)))); }

void check_activation_blocks(GGMLType t, const std::vector<double>& x, const std::vector<uint8_t>& bytes, size_t rows,
                             size_t k, const std::string& what) {
  const size_t be = ggml_block_size(t), bb = ggml_type_size(t), nb = k / be;
  const size_t qs_at = t == GGMLType::Q8_0 ? 2 : 4;
  if (bytes.size() != rows * nb * bb)
    fail(what + ": " + std::to_string(bytes.size()) + " bytes, want " + std::to_string(rows * nb * bb));
  for (size_t i = 0; i < rows; ++i)
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* p = bytes.data() + (i * nb + b) * bb;
      const double* xb = x.data() + i * k + b * be;
      double amax = 0;
      for (size_t j = 0; j < be; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const double d = amax / 127;
      const double delta = t == GGMLType::Q8_K ? d * 0x1p-22 : std::max(d * kF16U, kF16Sub);
      double D;
      if (t == GGMLType::Q8_K) {
        float f;
        std::memcpy(&f, p, 4);
        D = double(f);
      } else {
        D = ld_f16(p);
      }
      const std::string at = what + ": row " + std::to_string(i) + " block " + std::to_string(b);
      if (!(std::fabs(std::fabs(D) - d) <= delta + d * 0x1p-20))
        fail(at + ": scale " + num(D) + ", want amax/127 = " + num(d));
      const double tol = d * (0.5 + 0x1p-16) + 127 * delta;
      long sum = 0;
      for (size_t j = 0; j < be; ++j) {
        const int q = int8_t(p[qs_at + j]);
        sum += q;
        if (q < -127 || !(std::fabs(xb[j] - D * q) <= tol))
          fail(at + " element " + std::to_string(j) + ": x " + num(xb[j]) + " decodes as " + num(D) + " * " +
               std::to_string(q) + ", error > bound " + num(tol));
      }
      if (t == GGMLType::Q8_1) {
        const double s = ld_f16(p + 2), want = d * double(sum);
        const double tol_s = std::fabs(want) * (kF16U + 0x1p-22) + kF16Sub;
        if (!(std::fabs(s - want) <= tol_s)) fail(at + ": s = " + num(s) + ", want d * sum(q) = " + num(want));
      }
      if (t == GGMLType::Q8_K)
        for (size_t g = 0; g < 16; ++g) {
          int s = 0;
          for (size_t j = 0; j < 16; ++j) s += int8_t(p[4 + g * 16 + j]);
          int16_t stored;
          std::memcpy(&stored, p + 260 + 2 * g, 2);
          if (stored != s)
            fail(at + ": bsums[" + std::to_string(g) + "] = " + std::to_string(stored) + ", want " + std::to_string(s));
        }
    }
}

namespace {

// Exact comparison of a dequantized result with the CPU's f32 values rounded to its dtype.
void check_rows(const Tensor& got, const std::vector<double>& want_f32, DType dtype, const std::string& what) {
  const std::vector<double> g = host_values(got);
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = round_to(dtype, want_f32[i]);
    if (!same(g[i], w))
      fail(what + ": element " + std::to_string(i) + " is " + num(g[i]) + ", the CPU's f32 dequantize rounded to " +
           dtype_name(dtype) + " is " + num(w));
  }
}

}  // namespace

// add_rms_norm_matmul_t: the sum x + r rounded to the dtype (f32 add, one rounding) must be exact;
// y is checked as qmatmul's decode against h = s * rstd * w computed in f64 on the host, with the
// backend's h off by rho |h_j| (its rounding to the dtype, the f32 sum of squares and rstd: rho =
// u + (k + 8) 2^-24), which also moves each block's scale by that factor.
static void check_normed_qmatmul(const Weights& W, const Tensor& x, const Tensor& r, const Tensor& nw, double eps,
                                 const Tensor& sum, const Tensor& y, const std::string& what) {
  const size_t k = W.k, n = W.n, m = x.numel() / k;
  const DType dt = x.dtype();
  check_shape(sum, x.shape(), dt, what + " (sum)");
  Shape want = x.shape();
  want.back() = n;
  check_shape(y, want, dt, what);
  const std::vector<double> xv = host_values(x), rv = host_values(r), wv = host_values(nw), sv = host_values(sum);
  const std::vector<double> yv = host_values(y);
  const double u_out = unit_roundoff(dt), gamma = double(k + 16) * kF32U;
  const double rho = (dt == DType::F32 ? 0.0 : u_out) + double(k + 8) * kF32U;
  for (size_t i = 0; i < m; ++i) {
    std::vector<double> s(k), h(k);
    double ms = 0;
    for (size_t j = 0; j < k; ++j) {
      s[j] = round_to(dt, double(float(xv[i * k + j]) + float(rv[i * k + j])));
      if (!same(sv[i * k + j], s[j]))
        fail(what + ": sum[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + num(sv[i * k + j]) +
             ", want x + r rounded to " + dtype_name(dt) + " = " + num(s[j]));
      ms += s[j] * s[j];
    }
    const double rstd = 1 / std::sqrt(ms / double(k) + eps);
    for (size_t j = 0; j < k; ++j) h[j] = s[j] * rstd * wv[j];
    const ActError a = act_error(h.data(), k, false);
    double sum_err2 = 0, sum_var = 0;
    for (size_t o = 0; o < n; ++o) {
      const double* wr = W.w.data() + o * k;
      double ref = 0, e = 0, sa = 0, v = 0;
      for (size_t j = 0; j < k; ++j) {
        const double ah = std::fabs(h[j]), aw = std::fabs(wr[j]), ej = a.e[j] * (1 + rho) + rho * ah;
        ref += wr[j] * h[j];
        e += aw * ej;
        sa += aw * (ah + a.e[j]);
        v += aw * aw * ej * ej / 3;
      }
      e += gamma * sa;
      const double bound = e + (std::fabs(ref) + e) * u_out + kF16Sub, got = yv[i * n + o];
      if (!(std::fabs(got - ref) <= bound))
        fail(what + ": y[" + std::to_string(i) + ", " + std::to_string(o) + "] = " + num(got) +
             ", reference (host norm in f64, CPU dequantize) " + num(ref) + ": |difference| " +
             num(std::fabs(got - ref)) + " > bound " + num(bound));
      sum_err2 += (got - ref) * (got - ref);
      sum_var += v + (gamma * sa) * (gamma * sa) + (std::fabs(ref) + e) * u_out * (std::fabs(ref) + e) * u_out;
    }
    // As check_qmatmul: unbiased rounding keeps the squared errors near their variances; a scale
    // off by a few percent (a wrong rstd or eps) does not.
    if (!(sum_err2 <= 16 * sum_var))
      fail(what + ": root mean square error " + num(std::sqrt(sum_err2 / double(n))) + " is more than 4x the " +
           num(std::sqrt(sum_var / double(n))) + " that rounding predicts (a systematic error, e.g. the norm's scale)");
  }
}

void add_quant_cases(std::vector<Case>& out) {
  for (GGMLType t : supported_qtypes()) {
    const std::string tn = ggml_type_name(t);
    const size_t k = case_k(t);
    // Blocks only: no layout to vary.
    add(out, "dequantize", tn, kQFloats,
        [t, k](Inputs& in) -> std::vector<Tensor> {
          const Weights W = make_weights(t, 6, k, 11, /*specials=*/true);
          QTensor q = QTensor::from_bytes(t, {2, 3, k}, W.bytes.data(), W.bytes.size(), in.device());
          Tensor got = q.dequantize(in.dtype());
          const std::string what = std::string(ggml_type_name(t)) + " dequantize";
          check_shape(got, {2, 3, k}, in.dtype(), what);
          check_rows(got, W.w, in.dtype(), what);
          return {got};
        },
        {LayoutKind::Contiguous});
    // ids in every index dtype and layout; the Empty layout asks for no rows.
    add(out, "qembedding", tn, kQFloats, [t, k](Inputs& in) -> std::vector<Tensor> {
      const size_t vocab = 50;
      const Weights W = make_weights(t, vocab, k, 13);
      QTensor q = QTensor::from_bytes(t, {vocab, k}, W.bytes.data(), W.bytes.size(), in.device());
      std::vector<Tensor> res;
      uint64_t seed = 60;
      for (DType idt : kIdDTypes) {
        Tensor ids = in.ids({in.n(7), 3}, seed++, vocab, idt);
        Tensor got = q.embedding(ids, in.dtype());
        const std::string what = std::string(ggml_type_name(t)) + " embedding, ids " + dtype_name(idt);
        Shape want_shape = ids.shape();
        want_shape.push_back(k);
        check_shape(got, want_shape, in.dtype(), what);
        const std::vector<double> idv = host_values(ids);
        std::vector<double> want(idv.size() * k);
        for (size_t i = 0; i < idv.size(); ++i)
          std::copy_n(W.w.begin() + ptrdiff_t(size_t(idv[i]) * k), k, want.begin() + ptrdiff_t(i * k));
        check_rows(got, want, in.dtype(), what);
        res.push_back(got);
      }
      return res;
    });
    // x of rank 2 and 3; the Empty layout gives m = 0.
    for (bool prefill : {false, true}) {
      const std::vector<Shape> shapes =
          prefill ? std::vector<Shape>{{9, k}, {2, 32, k}} : std::vector<Shape>{{1, k}, {3, k}, {2, 4, k}};
      add(out, "qmatmul", tn + (prefill ? ",prefill" : ",decode"), kQFloats,
          [t, k, prefill, shapes](Inputs& in) -> std::vector<Tensor> {
            const Weights W = make_weights(t, kRows, k, 17);
            QTensor q = QTensor::from_bytes(t, {kRows, k}, W.bytes.data(), W.bytes.size(), in.device());
            uint64_t seed = 80;
            for (Shape s : shapes) {
              s[0] = in.n(s[0]);
              Tensor x = in.x(s, seed++);
              const std::string what = std::string(ggml_type_name(t)) + " qmatmul, x " + shape_str(s) + " " +
                                       dtype_name(in.dtype()) + " (" + layout_name(in.kind()) + ")";
              check_qmatmul(W, x, q.matmul_t(x), prefill, what);
            }
            return {};
          });
    }
  }
  // add_rms_norm_matmul_t on the shape a GPU's staged matvec normalises itself (Q4_0 / Q8_0, k = 4096,
  // n = 8192, one contiguous row); the other layouts, which run the two ops, on 37 rows of W (the
  // f64 reference of 8192 rows costs about a second a case). With and without residual.
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q8_0}) {
    add(out, "add_rms_norm_matmul_t", ggml_type_name(t), kQFloats, [t](Inputs& in) -> std::vector<Tensor> {
      const size_t k = 4096, n = in.kind() == LayoutKind::Contiguous ? 8192 : kRows;
      const Weights W = make_weights(t, n, k, 23);
      QTensor q = QTensor::from_bytes(t, {n, k}, W.bytes.data(), W.bytes.size(), in.device());
      const Tensor x = in.x({in.n(1), k}, 101), r = in.x_nb({in.n(1), k}, 102), nw = in.x_nb({k}, 103);
      const double eps = 1e-5;
      for (bool with_r : {true, false}) {
        const std::string what = std::string(ggml_type_name(t)) + " add_rms_norm_matmul_t" +
                                 (with_r ? "" : " (no residual)") + ", x " + dtype_name(in.dtype()) + " (" +
                                 layout_name(in.kind()) + ")";
        const auto [sum, y] = fast::add_rms_norm_matmul_t(q, x, with_r ? r : Tensor(), nw, eps);
        const Tensor zero = Tensor::zeros(x.shape(), x.dtype(), x.device());
        check_normed_qmatmul(W, x, with_r ? r : zero, nw, eps, sum, y, what);
      }
      return {};
    });
  }
  // The activation formats, from every float dtype a QTensor quantizes.
  for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q8_1, GGMLType::Q8_K}) {
    const size_t k = t == GGMLType::Q8_K ? 512 : 32 * 5;
    add(out, "quantize", ggml_type_name(t), {DType::BF16, DType::F16, DType::F32, DType::F64},
        [t, k](Inputs& in) -> std::vector<Tensor> {
          Tensor x = in.x({in.n(5), k}, 90);
          QTensor q = QTensor::quantize(x, t);
          const std::string what = std::string(ggml_type_name(t)) + " quantize from " + dtype_name(in.dtype());
          if (q.type() != t || q.shape() != x.shape() || q.device() != x.device())
            fail(what + ": got " + q.str() + ", want " + ggml_type_name(t) + " " + shape_str(x.shape()) + " on " +
                 x.device().name());
          const std::vector<uint8_t> bytes = q.to_bytes();
          check_activation_blocks(t, host_values(x), bytes, x.dim(0), k, what);
          if (!in.device().is_cpu()) {
            const std::vector<uint8_t> cpu = QTensor::quantize(x.to_device(Device::cpu()), t).to_bytes();
            for (size_t i = 0; i < bytes.size(); ++i)
              if (bytes[i] != cpu[i])
                fail(what + ": byte " + std::to_string(i) + " is " + std::to_string(bytes[i]) + ", the CPU's " +
                     std::to_string(cpu[i]));
          }
          return {};
        });
  }
}

}  // namespace wick::check

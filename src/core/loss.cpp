// candle_nn's losses as composites of Tensor ops (so every backend has them). Inputs are read in
// their dtype and the arithmetic runs in f32 (f64 for f64), rounded once to the input dtype.
#include <cmath>
#include <limits>
#include <string>

#include "core/checks.hpp"
#include "wick/nn.hpp"

namespace wick::loss {
namespace {

DType compute_of(DType d) { return d == DType::F64 ? DType::F64 : DType::F32; }

bool is_id_dtype(DType d) {
  return d == DType::U8 || d == DType::U32 || d == DType::I16 || d == DType::I32 || d == DType::I64;
}

// The mean of every element as a 0-D tensor of dtype `out` (NaN when x is empty).
Tensor mean_all(const Tensor& x, DType out) { return x.flatten_all().mean({0}).to_dtype(out); }

// inp and target: same float dtype, device and shape (Candle's element-wise ops do not
// broadcast, and a broadcast target is almost always a bug in a loss).
void check_pair(const Tensor& inp, const Tensor& target, const char* op) {
  check_defined(inp, op);
  check_defined(target, op);
  check_float(inp, op);
  check_same_device(inp, target, op);
  check_same_dtype(inp, target, op);
  if (inp.shape() != target.shape())
    throw Error(ErrorKind::Shape, std::string(op) + ": inp " + describe(inp) + " and target " + describe(target) +
                                      " must have the same shape");
}

// inp (N, C) float rows and target (N) class ids.
void check_classes(const Tensor& inp, const Tensor& target, const char* op) {
  check_defined(inp, op);
  check_defined(target, op);
  check_float(inp, op);
  check_same_device(inp, target, op);
  if (!is_id_dtype(target.dtype()))
    throw Error(ErrorKind::DType, std::string(op) + ": target must hold class ids of an index dtype (u8 u32 i16 " +
                                      "i32 i64), got " + describe(target) + "; convert it with to_dtype(DType::U32)");
  if (inp.rank() != 2)
    throw Error(ErrorKind::Shape,
                std::string(op) + ": inp must be 2-D (N, C), got " + describe(inp) + "; reshape it to (N, C)");
  if (target.rank() != 1 || target.dim(0) != inp.dim(0))
    throw Error(ErrorKind::Shape, std::string(op) +
                                      ": target must be 1-D with inp's batch size N = " + std::to_string(inp.dim(0)) +
                                      ", got " + describe(target) + " for inp " + describe(inp));
}

// -mean_n logp[n, target[n]], as 0-D of dtype out. Candle divides by N even where the target
// is the sentinel id (gather reads 0 there).
Tensor nll_of(const Tensor& logp, const Tensor& target, const char* op, DType out) {
  Tensor picked;
  try {
    picked = logp.gather(target.unsqueeze(1), 1);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Index) throw;
    std::string m = e.what();  // "...gather: id 7 at position [2, 0] of the ids [4, 1] ..."
    const size_t at = m.find("gather: ");
    throw Error(ErrorKind::Index, std::string(op) + " (target ids against C = " + std::to_string(logp.dim(1)) +
                                      " classes): " + (at == std::string::npos ? m : m.substr(at + 8)));
  }
  const size_t n = logp.dim(0);
  const double scale = n ? -1.0 / double(n) : std::numeric_limits<double>::quiet_NaN();
  return picked.to_dtype(compute_of(out)).sum_all().affine(scale, 0.0).to_dtype(out);
}

}  // namespace

Tensor nll(const Tensor& inp, const Tensor& target) {
  check_classes(inp, target, "nll");
  return nll_of(inp, target, "nll", inp.dtype());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  check_classes(logits, target, "cross_entropy");
  Tensor logp = logits.to_dtype(compute_of(logits.dtype())).log_softmax(1);
  return nll_of(logp, target, "cross_entropy", logits.dtype());
}

Tensor binary_cross_entropy_with_logit(const Tensor& inp, const Tensor& target) {
  const char* op = "binary_cross_entropy_with_logit";
  check_pair(inp, target, op);
  const DType c = compute_of(inp.dtype());
  Tensor x = inp.to_dtype(c), t = target.to_dtype(c);
  // log(1 + exp(-|x|)) never overflows; max(x, 0) - x t is exact for the two log-sigmoid halves.
  Tensor softplus = x.abs().neg().exp().add(Scalar(1.0)).log();
  return mean_all(x.maximum(Scalar(0.0)).sub(x.mul(t)).add(softplus), inp.dtype());
}

Tensor mse(const Tensor& inp, const Tensor& target) {
  check_pair(inp, target, "mse");
  const DType c = compute_of(inp.dtype());
  return mean_all(inp.to_dtype(c).sub(target.to_dtype(c)).sqr(), inp.dtype());
}

Tensor huber(const Tensor& inp, const Tensor& target, double delta) {
  check_pair(inp, target, "huber");
  if (!(delta > 0) || !std::isfinite(delta))
    throw Error(ErrorKind::Argument,
                "huber: delta must be positive and finite, got " + std::to_string(delta) + " (PyTorch's default is 1)");
  const DType c = compute_of(inp.dtype());
  Tensor d = inp.to_dtype(c).sub(target.to_dtype(c)), ad = d.abs();
  Tensor quadratic = d.sqr().affine(0.5, 0.0), linear = ad.affine(delta, -0.5 * delta * delta);
  return mean_all(ad.lt(Scalar(delta)).where_cond(quadratic, linear), inp.dtype());
}

}  // namespace wick::loss

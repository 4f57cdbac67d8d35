// Element-wise Tensor methods: validation, numpy broadcasting (zero-stride views, never a
// copy), then one backend call.
#include <string>

#include "core/checks.hpp"

namespace wick {
namespace {

Tensor unary_op(const Tensor& t, UnaryOp op) {
  const char* name = unary_op_name(op);
  check_defined(t, name);
  if (unary_op_float_only(op)) check_float(t, name);
  return wrap_like(t.storage()->unary(op, t.layout()), t.shape(), t);
}

// Both operands viewed at the broadcast shape of the two.
struct Broadcast2 {
  Shape shape;
  Layout a, b;
};
Broadcast2 broadcast2(const Tensor& a, const Tensor& b, const char* op) {
  check_same_device(a, b, op);
  check_same_dtype(a, b, op);
  Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  return {s, a.layout().broadcast_as(s), b.layout().broadcast_as(s)};
}

Tensor binary_op(const Tensor& a, const Tensor& b, BinaryOp op) {
  const char* name = binary_op_name(op);
  Broadcast2 bc = broadcast2(a, b, name);
  return wrap_like(a.storage()->binary(op, *b.storage(), bc.a, bc.b), bc.shape, a);
}

Tensor cmp_op(const Tensor& a, const Tensor& b, CmpOp op) {
  const char* name = cmp_op_name(op);
  Broadcast2 bc = broadcast2(a, b, name);
  return wrap(a.storage()->cmp(op, *b.storage(), bc.a, bc.b), bc.shape, DType::U8, a.device());
}

// A rank-0 tensor holding s converted to t's dtype (integers stay exact); binary ops
// broadcast it with a zero stride.
Tensor scalar_like(const Tensor& t, Scalar s, const char* op) {
  check_defined(t, op);
  return Tensor::full({}, s, t.dtype(), t.device());
}

}  // namespace

Tensor Tensor::exp() const { return unary_op(*this, UnaryOp::Exp); }
Tensor Tensor::log() const { return unary_op(*this, UnaryOp::Log); }
Tensor Tensor::sin() const { return unary_op(*this, UnaryOp::Sin); }
Tensor Tensor::cos() const { return unary_op(*this, UnaryOp::Cos); }
Tensor Tensor::tanh() const { return unary_op(*this, UnaryOp::Tanh); }
Tensor Tensor::neg() const { return unary_op(*this, UnaryOp::Neg); }
Tensor Tensor::recip() const { return unary_op(*this, UnaryOp::Recip); }
Tensor Tensor::sqr() const { return unary_op(*this, UnaryOp::Sqr); }
Tensor Tensor::sqrt() const { return unary_op(*this, UnaryOp::Sqrt); }
Tensor Tensor::abs() const { return unary_op(*this, UnaryOp::Abs); }
Tensor Tensor::gelu() const { return unary_op(*this, UnaryOp::Gelu); }
Tensor Tensor::gelu_erf() const { return unary_op(*this, UnaryOp::GeluErf); }
Tensor Tensor::erf() const { return unary_op(*this, UnaryOp::Erf); }
Tensor Tensor::relu() const { return unary_op(*this, UnaryOp::Relu); }
Tensor Tensor::silu() const { return unary_op(*this, UnaryOp::Silu); }
Tensor Tensor::sigmoid() const { return unary_op(*this, UnaryOp::Sigmoid); }
Tensor Tensor::ceil() const { return unary_op(*this, UnaryOp::Ceil); }
Tensor Tensor::floor() const { return unary_op(*this, UnaryOp::Floor); }
Tensor Tensor::round() const { return unary_op(*this, UnaryOp::Round); }
Tensor Tensor::sign() const { return unary_op(*this, UnaryOp::Sign); }

Tensor Tensor::affine(double mul, double add) const {
  check_defined(*this, "affine");
  return wrap_like(storage_->affine(layout_, mul, add), shape(), *this);
}

Tensor Tensor::powf(double e) const {
  check_defined(*this, "powf");
  check_float(*this, "powf");
  return wrap_like(storage_->powf(layout_, e), shape(), *this);
}

Tensor Tensor::elu(double alpha) const {
  check_defined(*this, "elu");
  check_float(*this, "elu");
  return wrap_like(storage_->elu(layout_, alpha), shape(), *this);
}

Tensor Tensor::add(const Tensor& o) const { return binary_op(*this, o, BinaryOp::Add); }
Tensor Tensor::sub(const Tensor& o) const { return binary_op(*this, o, BinaryOp::Sub); }
Tensor Tensor::mul(const Tensor& o) const { return binary_op(*this, o, BinaryOp::Mul); }
Tensor Tensor::div(const Tensor& o) const { return binary_op(*this, o, BinaryOp::Div); }
Tensor Tensor::maximum(const Tensor& o) const { return binary_op(*this, o, BinaryOp::Maximum); }
Tensor Tensor::minimum(const Tensor& o) const { return binary_op(*this, o, BinaryOp::Minimum); }

// Candle's pow: exp(log(x) * e), so negative bases give NaN.
Tensor Tensor::pow(const Tensor& exponent) const {
  check_same_device(*this, exponent, "pow");
  check_same_dtype(*this, exponent, "pow");
  check_float(*this, "pow");
  broadcast_shapes(shape(), exponent.shape(), "pow");
  return log().mul(exponent).exp();
}

Tensor Tensor::eq(const Tensor& o) const { return cmp_op(*this, o, CmpOp::Eq); }
Tensor Tensor::ne(const Tensor& o) const { return cmp_op(*this, o, CmpOp::Ne); }
Tensor Tensor::lt(const Tensor& o) const { return cmp_op(*this, o, CmpOp::Lt); }
Tensor Tensor::le(const Tensor& o) const { return cmp_op(*this, o, CmpOp::Le); }
Tensor Tensor::gt(const Tensor& o) const { return cmp_op(*this, o, CmpOp::Gt); }
Tensor Tensor::ge(const Tensor& o) const { return cmp_op(*this, o, CmpOp::Ge); }
Tensor Tensor::eq(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, "eq"), CmpOp::Eq); }
Tensor Tensor::ne(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, "ne"), CmpOp::Ne); }
Tensor Tensor::lt(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, "lt"), CmpOp::Lt); }
Tensor Tensor::le(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, "le"), CmpOp::Le); }
Tensor Tensor::gt(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, "gt"), CmpOp::Gt); }
Tensor Tensor::ge(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, "ge"), CmpOp::Ge); }

Tensor Tensor::where_cond(const Tensor& on_true, const Tensor& on_false) const {
  const char* op = "where_cond";
  check_same_device(*this, on_true, op);
  check_same_device(*this, on_false, op);
  if (!dtype_is_int(dtype_))
    throw Error(ErrorKind::DType, std::string(op) + ": the condition must be an integer tensor (u8, u32, i16, i32, "
                                                    "i64; nonzero = true), got " + describe(*this) +
                                      "; make one with ne(0) or to_dtype(DType::U8)");
  check_same_dtype(on_true, on_false, op);
  Shape s = broadcast_shapes(broadcast_shapes(shape(), on_true.shape(), op), on_false.shape(), op);
  Layout lc = layout_.broadcast_as(s), lt = on_true.layout().broadcast_as(s), lf = on_false.layout().broadcast_as(s);
  return wrap_like(storage_->where_cond(lc, *on_true.storage(), lt, *on_false.storage(), lf), s, on_true);
}

// Candle: maximum(lo) then minimum(hi), with lo and hi converted to this dtype.
Tensor Tensor::clamp(Scalar lo, Scalar hi) const { return maximum(lo).minimum(hi); }

Tensor Tensor::add(Scalar s) const { return binary_op(*this, scalar_like(*this, s, "add"), BinaryOp::Add); }
Tensor Tensor::sub(Scalar s) const { return binary_op(*this, scalar_like(*this, s, "sub"), BinaryOp::Sub); }
Tensor Tensor::mul(Scalar s) const { return binary_op(*this, scalar_like(*this, s, "mul"), BinaryOp::Mul); }
Tensor Tensor::div(Scalar s) const { return binary_op(*this, scalar_like(*this, s, "div"), BinaryOp::Div); }
Tensor Tensor::maximum(Scalar s) const {
  return binary_op(*this, scalar_like(*this, s, "maximum"), BinaryOp::Maximum);
}
Tensor Tensor::minimum(Scalar s) const {
  return binary_op(*this, scalar_like(*this, s, "minimum"), BinaryOp::Minimum);
}

}  // namespace wick

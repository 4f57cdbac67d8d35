// Element-wise Tensor methods: validation, numpy broadcasting (zero-stride views, never a
// copy), then one backend call.
#include <string>

#include "core/checks.hpp"
#include "ops/op_kinds.hpp"

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

// The one-line methods of every table op (src/ops/op_table.hpp): no per-op code here.
#define WICK_UNARY_METHOD(E, n, ...) \
  Tensor Tensor::n() const { return unary_op(*this, UnaryOp::E); }
WICK_UNARY_OPS(WICK_UNARY_METHOD)
#undef WICK_UNARY_METHOD

#define WICK_BINARY_METHOD(E, n, ...)                                                  \
  Tensor Tensor::n(const Tensor& o) const { return binary_op(*this, o, BinaryOp::E); } \
  Tensor Tensor::n(Scalar s) const { return binary_op(*this, scalar_like(*this, s, #n), BinaryOp::E); }
WICK_BINARY_OPS(WICK_BINARY_METHOD)
#undef WICK_BINARY_METHOD

#define WICK_CMP_METHOD(E, n)                                                    \
  Tensor Tensor::n(const Tensor& o) const { return cmp_op(*this, o, CmpOp::E); } \
  Tensor Tensor::n(Scalar s) const { return cmp_op(*this, scalar_like(*this, s, #n), CmpOp::E); }
WICK_CMP_OPS(WICK_CMP_METHOD)
#undef WICK_CMP_METHOD

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

// Candle's pow: exp(log(x) * e), so negative bases give NaN.
Tensor Tensor::pow(const Tensor& exponent) const {
  check_same_device(*this, exponent, "pow");
  check_same_dtype(*this, exponent, "pow");
  check_float(*this, "pow");
  broadcast_shapes(shape(), exponent.shape(), "pow");
  return log().mul(exponent).exp();
}

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

}  // namespace wick

#pragma once
// Host-side op enum -> functor dispatch, shared by the CPU and GPU element-wise backends so
// both map each UnaryOp/BinaryOp/CmpOp to the same functor of src/ops/{unary,binary}.hpp.
// Host-only (throws); included by .cpp and .cu files alike.
#include <string>

#include "ops/binary.hpp"
#include "ops/op_kinds.hpp"
#include "ops/unary.hpp"
#include "wick/dtype.hpp"
#include "wick/error.hpp"

namespace wick {

template <class F> decltype(auto) with_unary_op(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::Exp: return f(uop::Exp{});
    case UnaryOp::Log: return f(uop::Log{});
    case UnaryOp::Sin: return f(uop::Sin{});
    case UnaryOp::Cos: return f(uop::Cos{});
    case UnaryOp::Tanh: return f(uop::Tanh{});
    case UnaryOp::Neg: return f(uop::Neg{});
    case UnaryOp::Recip: return f(uop::Recip{});
    case UnaryOp::Sqr: return f(uop::Sqr{});
    case UnaryOp::Sqrt: return f(uop::Sqrt{});
    case UnaryOp::Abs: return f(uop::Abs{});
    case UnaryOp::Gelu: return f(uop::Gelu{});
    case UnaryOp::GeluErf: return f(uop::GeluErf{});
    case UnaryOp::Erf: return f(uop::Erf{});
    case UnaryOp::Relu: return f(uop::Relu{});
    case UnaryOp::Silu: return f(uop::Silu{});
    case UnaryOp::Sigmoid: return f(uop::Sigmoid{});
    case UnaryOp::Ceil: return f(uop::Ceil{});
    case UnaryOp::Floor: return f(uop::Floor{});
    case UnaryOp::Round: return f(uop::Round{});
    case UnaryOp::Sign: return f(uop::Sign{});
  }
  throw Error(ErrorKind::Internal, "unary: unknown op");
}

template <class F> decltype(auto) with_binary_op(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Add: return f(bop::Add{});
    case BinaryOp::Sub: return f(bop::Sub{});
    case BinaryOp::Mul: return f(bop::Mul{});
    case BinaryOp::Div: return f(bop::Div{});
    case BinaryOp::Maximum: return f(bop::Maximum{});
    case BinaryOp::Minimum: return f(bop::Minimum{});
  }
  throw Error(ErrorKind::Internal, "binary: unknown op");
}

template <class F> decltype(auto) with_cmp_op(CmpOp op, F&& f) {
  switch (op) {
    case CmpOp::Eq: return f(bop::Eq{});
    case CmpOp::Ne: return f(bop::Ne{});
    case CmpOp::Lt: return f(bop::Lt{});
    case CmpOp::Le: return f(bop::Le{});
    case CmpOp::Gt: return f(bop::Gt{});
    case CmpOp::Ge: return f(bop::Ge{});
  }
  throw Error(ErrorKind::Internal, "cmp: unknown op");
}

// The error of a float-only op (exp, powf, elu, ...) called on an integer dtype.
[[noreturn]] inline void float_only(const char* op, DType d) {
  throw Error(ErrorKind::DType, std::string(op) + ": not defined for integer dtype " + dtype_name(d) +
                                    "; convert with to_dtype(DType::F32) first");
}

}  // namespace wick

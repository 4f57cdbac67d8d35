#include "ops/op_kinds.hpp"

namespace wick {

const char* unary_op_name(UnaryOp op) {
  static const char* const kNames[kNumUnaryOps] = {"exp",  "log",  "sin",  "cos",     "tanh",    "neg",  "recip",
                                                    "sqr",  "sqrt", "abs",  "gelu",    "gelu_erf", "erf", "relu",
                                                    "silu", "sigmoid", "ceil", "floor", "round",   "sign"};
  return kNames[int(op)];
}

bool unary_op_float_only(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: case UnaryOp::Sqr: case UnaryOp::Abs: case UnaryOp::Relu: case UnaryOp::Sign:
    case UnaryOp::Ceil: case UnaryOp::Floor: case UnaryOp::Round:
      return false;
    default:
      return true;
  }
}

const char* binary_op_name(BinaryOp op) {
  static const char* const kNames[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  return kNames[int(op)];
}
const char* cmp_op_name(CmpOp op) {
  static const char* const kNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return kNames[int(op)];
}
const char* reduce_op_name(ReduceOp op) {
  static const char* const kNames[] = {"sum", "min", "max", "argmin", "argmax"};
  return kNames[int(op)];
}

}  // namespace wick

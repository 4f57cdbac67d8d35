#pragma once
// The op enums shared by the core and every backend.
#include <cstdint>

namespace wick {

enum class UnaryOp : uint8_t {
  Exp, Log, Sin, Cos, Tanh, Neg, Recip, Sqr, Sqrt, Abs, Gelu, GeluErf, Erf, Relu, Silu, Sigmoid,
  Ceil, Floor, Round, Sign
};
constexpr int kNumUnaryOps = 20;
const char* unary_op_name(UnaryOp op);
// Ops with no integer meaning (exp, log, ..., gelu): Error(DType) on integer inputs.
bool unary_op_float_only(UnaryOp op);

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Maximum, Minimum };
const char* binary_op_name(BinaryOp op);

enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
const char* cmp_op_name(CmpOp op);

enum class ReduceOp : uint8_t { Sum, Min, Max, ArgMin, ArgMax };
const char* reduce_op_name(ReduceOp op);

}  // namespace wick

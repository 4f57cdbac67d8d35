#pragma once
// The op enums shared by the core and every backend, with each op's name and dtype class:
// all generated from the rows of op_table.hpp.
#include <cstdint>
#include <iterator>

#include "ops/op_table.hpp"

namespace wick {

// Which dtypes an op accepts: all ten, or the floats only (Error(DType) on integers).
enum class DTypeClass : uint8_t { All, Float };
// The inputs where an op is defined on the reals (the parity cases draw from it).
enum class Domain : uint8_t { Any, Positive };
// A reduction's output dtype: the input's, or u32 indices.
enum class ReduceOut : uint8_t { Same, U32 };

#define WICK_OP_ENUM(E, ...) E,

enum class UnaryOp : uint8_t { WICK_UNARY_OPS(WICK_OP_ENUM) };
enum class BinaryOp : uint8_t { WICK_BINARY_OPS(WICK_OP_ENUM) };
enum class CmpOp : uint8_t { WICK_CMP_OPS(WICK_OP_ENUM) };
enum class ReduceOp : uint8_t { WICK_REDUCE_OPS(WICK_OP_ENUM) };

#undef WICK_OP_ENUM

struct UnaryOpInfo {
  UnaryOp op;
  const char* name;
  DTypeClass dtypes;
  Domain domain;
};
struct BinaryOpInfo {
  BinaryOp op;
  const char* name;
  Domain rhs_domain;
};
struct CmpOpInfo {
  CmpOp op;
  const char* name;
};
struct ReduceOpInfo {
  ReduceOp op;
  const char* name;
  ReduceOut out;
};

// In enum order, so kUnaryOps[int(op)] is op's row.
inline constexpr UnaryOpInfo kUnaryOps[] = {
#define WICK_OP_ROW(E, n, d, dom) {UnaryOp::E, #n, DTypeClass::d, Domain::dom},
    WICK_UNARY_OPS(WICK_OP_ROW)
#undef WICK_OP_ROW
};
inline constexpr BinaryOpInfo kBinaryOps[] = {
#define WICK_OP_ROW(E, n, dom) {BinaryOp::E, #n, Domain::dom},
    WICK_BINARY_OPS(WICK_OP_ROW)
#undef WICK_OP_ROW
};
inline constexpr CmpOpInfo kCmpOps[] = {
#define WICK_OP_ROW(E, n) {CmpOp::E, #n},
    WICK_CMP_OPS(WICK_OP_ROW)
#undef WICK_OP_ROW
};
inline constexpr ReduceOpInfo kReduceOps[] = {
#define WICK_OP_ROW(E, n, o) {ReduceOp::E, #n, ReduceOut::o},
    WICK_REDUCE_OPS(WICK_OP_ROW)
#undef WICK_OP_ROW
};

inline constexpr int kNumUnaryOps = int(std::size(kUnaryOps));
inline constexpr int kNumBinaryOps = int(std::size(kBinaryOps));
inline constexpr int kNumCmpOps = int(std::size(kCmpOps));
inline constexpr int kNumReduceOps = int(std::size(kReduceOps));

constexpr const char* unary_op_name(UnaryOp op) { return kUnaryOps[int(op)].name; }
// Ops with no integer meaning (exp, log, ..., gelu): Error(DType) on integer inputs.
constexpr bool unary_op_float_only(UnaryOp op) { return kUnaryOps[int(op)].dtypes == DTypeClass::Float; }
constexpr const char* binary_op_name(BinaryOp op) { return kBinaryOps[int(op)].name; }
constexpr const char* cmp_op_name(CmpOp op) { return kCmpOps[int(op)].name; }
constexpr const char* reduce_op_name(ReduceOp op) { return kReduceOps[int(op)].name; }

// The rows are in enum order (the generated arrays cannot drift, but keep that visible).
static_assert([] {
  for (int i = 0; i < kNumUnaryOps; ++i)
    if (int(kUnaryOps[i].op) != i) return false;
  for (int i = 0; i < kNumReduceOps; ++i)
    if (int(kReduceOps[i].op) != i) return false;
  return true;
}());

}  // namespace wick

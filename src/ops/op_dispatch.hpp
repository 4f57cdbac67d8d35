#pragma once
// Host-side op enum -> functor dispatch, generated from the rows of op_table.hpp and shared by
// the CPU and GPU element-wise backends, so both map each UnaryOp/BinaryOp/CmpOp to the same
// functor of src/ops/{unary,binary}.hpp.
// Host-only (throws); included by .cpp and .cu files alike.
#include <string>

#include "ops/binary.hpp"
#include "ops/dtype_dispatch.hpp"  // float_only
#include "ops/op_kinds.hpp"
#include "ops/unary.hpp"
#include "wick/dtype.hpp"
#include "wick/error.hpp"

namespace wick {

// A table functor with its dtype class attached: F::kInt says whether the op is instantiated
// for integer types (the backends skip the float-only ones at compile time).
template <class Fn, DTypeClass C> struct TableOp : Fn {
  static constexpr bool kInt = C == DTypeClass::All;
};

// One case per table row: f(the op's functor). -Wswitch flags a row without a case.
template <class F> decltype(auto) with_unary_op(UnaryOp op, F&& f) {
  switch (op) {
#define WICK_OP_CASE(E, n, d, dom) \
  case UnaryOp::E: return f(TableOp<uop::E, DTypeClass::d>{});
    WICK_UNARY_OPS(WICK_OP_CASE)
#undef WICK_OP_CASE
  }
  throw Error(ErrorKind::Internal, "unary: unknown op");
}

template <class F> decltype(auto) with_binary_op(BinaryOp op, F&& f) {
  switch (op) {
#define WICK_OP_CASE(E, ...) \
  case BinaryOp::E: return f(bop::E{});
    WICK_BINARY_OPS(WICK_OP_CASE)
#undef WICK_OP_CASE
  }
  throw Error(ErrorKind::Internal, "binary: unknown op");
}

template <class F> decltype(auto) with_cmp_op(CmpOp op, F&& f) {
  switch (op) {
#define WICK_OP_CASE(E, ...) \
  case CmpOp::E: return f(bop::E{});
    WICK_CMP_OPS(WICK_OP_CASE)
#undef WICK_OP_CASE
  }
  throw Error(ErrorKind::Internal, "cmp: unknown op");
}

}  // namespace wick

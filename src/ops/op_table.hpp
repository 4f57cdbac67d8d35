#pragma once
// The one list of element-wise and reduce ops. Each row is an op's enum value (also the name of
// its functor in src/ops/unary.hpp / binary.hpp), its name (also its Tensor method), its dtype
// class and its input domain. Everything else follows from these rows: the enums and names
// (op_kinds.hpp), the functor dispatch (op_dispatch.hpp), the Tensor method bodies
// (tensor_elementwise.cpp), the parity cases (tools/check/cases_elementwise.cpp), the test
// coverage and the docs rows (tools/check/ops_doc.cpp).
//
// Adding a unary op: the functor in unary.hpp, one row here, the declaration in
// include/wick/tensor.hpp, and its expected values in tests/fixtures/gen_elementwise.py.
//
// Columns of a unary row:  X(Enum, name, dtypes, domain)
//   dtypes: All (integers too: the functor handles them) or Float (Error(DType) on integers)
//   domain: Any or Positive (the parity inputs stay in (0, inf): log, sqrt, recip)
#define WICK_UNARY_OPS(X)          \
  X(Exp, exp, Float, Any)          \
  X(Log, log, Float, Positive)     \
  X(Sin, sin, Float, Any)          \
  X(Cos, cos, Float, Any)          \
  X(Tanh, tanh, Float, Any)        \
  X(Neg, neg, All, Any)            \
  X(Recip, recip, Float, Positive) \
  X(Sqr, sqr, All, Any)            \
  X(Sqrt, sqrt, Float, Positive)   \
  X(Abs, abs, All, Any)            \
  X(Gelu, gelu, Float, Any)        \
  X(GeluErf, gelu_erf, Float, Any) \
  X(Erf, erf, Float, Any)          \
  X(Relu, relu, All, Any)          \
  X(Silu, silu, Float, Any)        \
  X(Sigmoid, sigmoid, Float, Any)  \
  X(Ceil, ceil, All, Any)          \
  X(Floor, floor, All, Any)        \
  X(Round, round, All, Any)        \
  X(Sign, sign, All, Any)

// Binary ops (same dtype in and out, numpy broadcasting): X(Enum, name, rhs domain).
// The functor is bop::Enum of binary.hpp; all ten dtypes.
#define WICK_BINARY_OPS(X) \
  X(Add, add, Any)         \
  X(Sub, sub, Any)         \
  X(Mul, mul, Any)         \
  X(Div, div, Positive)    \
  X(Maximum, maximum, Any) \
  X(Minimum, minimum, Any)

// Comparisons (-> u8, numpy broadcasting): X(Enum, name). Functor bop::Enum; all ten dtypes.
#define WICK_CMP_OPS(X) \
  X(Eq, eq)             \
  X(Ne, ne)             \
  X(Lt, lt)             \
  X(Le, le)             \
  X(Gt, gt)             \
  X(Ge, ge)

// Reductions over any set of dims: X(Enum, name, output). Out: the input dtype; U32: an index.
// The accumulators differ per backend (src/backend/{cpu/reduce.cpp,gpu/kernels/reduce.cu}).
#define WICK_REDUCE_OPS(X) \
  X(Sum, sum, Same)        \
  X(Min, min, Same)        \
  X(Max, max, Same)        \
  X(ArgMin, argmin, U32)   \
  X(ArgMax, argmax, U32)

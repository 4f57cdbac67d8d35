// Cases: unary, affine/powf/elu, binary (tensor, broadcast row, scalar), comparisons, where_cond,
// clamp, pow.
#include <cmath>
#include <string>

#include "check/cases.hpp"
#include "ops/op_kinds.hpp"

namespace wick::check {

namespace {

// The parity cases of every op of src/ops/op_table.hpp: a new row gets its cases here for free.
using UnaryFn = Tensor (Tensor::*)() const;
struct UnaryEntry {
  const char* name;
  UnaryFn fn;
  bool ints;      // defined on integer dtypes too
  Values values;  // input range
};

constexpr Values values_of(Domain d) { return d == Domain::Positive ? Values::Positive : Values::Normal; }

const UnaryEntry kUnary[] = {
#define WICK_X(E, n, d, dom) {#n, &Tensor::n, DTypeClass::d == DTypeClass::All, values_of(Domain::dom)},
    WICK_UNARY_OPS(WICK_X)
#undef WICK_X
};

using BinaryFn = Tensor (Tensor::*)(const Tensor&) const;
using ScalarFn = Tensor (Tensor::*)(Scalar) const;
struct BinaryEntry {
  const char* name;
  BinaryFn fn;
  ScalarFn scalar;
  bool positive_rhs;  // divisors stay away from zero
};
const BinaryEntry kBinary[] = {
#define WICK_X(E, n, dom) {#n, &Tensor::n, &Tensor::n, Domain::dom == Domain::Positive},
    WICK_BINARY_OPS(WICK_X)
#undef WICK_X
};
const BinaryEntry kCmp[] = {
#define WICK_X(E, n) {#n, &Tensor::n, &Tensor::n, false},
    WICK_CMP_OPS(WICK_X)
#undef WICK_X
};

// A scalar every dtype holds exactly (integers stay small and non-negative for u8/u32).
Scalar scalar_for(DType d) { return dtype_is_float(d) ? Scalar(0.75) : Scalar(3); }

}  // namespace

void add_elementwise_cases(std::vector<Case>& out) {
  for (const UnaryEntry& u : kUnary) {
    add(out, u.name, "", u.ints ? kAll : kFloats, [u](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(17), 33}, 101, u.values).*u.fn)()};
    });
  }
  // Halfway points and specials for the rounding family and sign.
  for (const char* name : {"round", "ceil", "floor", "sign", "abs", "relu"}) {
    UnaryFn fn = nullptr;
    for (const UnaryEntry& u : kUnary)
      if (std::string(u.name) == name) fn = u.fn;
    if (!fn) throw std::logic_error(std::string("cases_elementwise: no unary op '") + name + "' in op_table.hpp");
    add(out, name, "special", kFloats, [fn](Inputs& in) -> std::vector<Tensor> {
      std::vector<double> v = {0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.0, -0.0, NAN, INFINITY, -INFINITY, 3.7, -3.7, 1e-3};
      size_t rows = in.n(3);
      std::vector<double> all;
      for (size_t r = 0; r < rows; ++r) all.insert(all.end(), v.begin(), v.end());
      return {(in.lay(Tensor::from_vector(all, {rows, v.size()}).to_dtype(in.dtype())).*fn)()};
    });
  }
  add(out, "affine", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    bool f = dtype_is_float(in.dtype());
    return {in.x({in.n(17), 33}, 102).affine(f ? 1.5 : 2.0, f ? -0.25 : 1.0)};
  });
  add(out, "powf", "e=2.5", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(17), 33}, 103, Values::Positive).powf(2.5)};
  });
  add(out, "powf", "e=2,negative base", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(17), 33}, 104).powf(2.0)};
  });
  add(out, "elu", "alpha=0.7", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(17), 33}, 105).elu(0.7)};
  });

  for (const BinaryEntry& b : kBinary) {
    Values rv = b.positive_rhs ? Values::Positive : Values::Normal;
    add(out, b.name, "", kAll, [b, rv](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(17), 33}, 106).*b.fn)(in.x({in.n(17), 33}, 107, rv))};
    });
    // Core broadcasting: a row against a matrix, and a column on the left.
    add(out, b.name, "bcast", kAll, [b, rv](Inputs& in) -> std::vector<Tensor> {
      Tensor m = in.x({in.n(17), 33}, 108, b.positive_rhs ? Values::Positive : Values::Normal);
      return {(m.*b.fn)(in.x({33}, 109, rv)), (in.x({in.n(17), 1}, 110).*b.fn)(in.x({4, 1, 33}, 111, rv))};
    });
    add(out, b.name, "scalar", kAll, [b](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(17), 33}, 112).*b.scalar)(scalar_for(in.dtype()))};
    });
  }
  for (const BinaryEntry& c : kCmp) {
    add(out, c.name, "", kAll, [c](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(17), 33}, 113).*c.fn)(in.x({in.n(17), 33}, 114))};
    });
    // Equal operands (so eq/le/ge are true somewhere) and a broadcast row.
    add(out, c.name, "equal,bcast", kAll, [c](Inputs& in) -> std::vector<Tensor> {
      Tensor a = in.x({in.n(17), 33}, 115);
      return {(a.*c.fn)(in.x({in.n(17), 33}, 115)), (a.*c.fn)(in.x({33}, 116))};
    });
    add(out, c.name, "scalar", kAll, [c](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(17), 33}, 117).*c.scalar)(scalar_for(in.dtype()))};
    });
  }
  for (DType cond : {DType::U8, DType::U32, DType::I64}) {
    add(out, "where_cond", std::string("cond=") + dtype_name(cond), kAll, [cond](Inputs& in) -> std::vector<Tensor> {
      Tensor c = in.ids({in.n(17), 33}, 118, 2, cond);
      return {c.where_cond(in.x({in.n(17), 33}, 119), in.x({in.n(17), 33}, 120)),
              c.where_cond(in.x({33}, 121), in.x({in.n(17), 1}, 122))};
    });
  }
  add(out, "clamp", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    bool f = dtype_is_float(in.dtype());
    return {in.x({in.n(17), 33}, 123).clamp(f ? Scalar(-0.5) : Scalar(2), f ? Scalar(0.7) : Scalar(6))};
  });
  add(out, "pow", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(17), 33}, 124, Values::Positive).pow(in.x({in.n(17), 33}, 125, Values::Unit))};
  });
}

}  // namespace wick::check

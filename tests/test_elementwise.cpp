// Element-wise ops: unary, affine/powf/elu, binary with broadcasting, comparisons, where_cond,
// scalar forms. Expected values come from tests/fixtures/elementwise.json (written by
// gen_elementwise.py with NumPy / Python math) or from hand arithmetic.
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "ops/op_kinds.hpp"
#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::as_offset;
using wick::test::as_transposed;
using wick::test::doubles_from_json;
using wick::test::load_json_fixture;
using wick::test::rtol_for;
using wick::test::values;

namespace {

const nlohmann::json& fixture() {
  static nlohmann::json j = load_json_fixture("elementwise.json");
  return j;
}

const DType kFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8E4M3};
const DType kIntDTypes[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

// Absolute slack for results near zero whose f32 evaluation cancels (gelu, silu of large -x).
double atol_for(DType d) {
  switch (d) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-6;
    case DType::F16: case DType::BF16: return 1e-5;
    default: return 2e-3;
  }
}

Tensor make(const std::vector<double>& v, const Shape& s, DType d) { return Tensor::from_vector(v, s).to_dtype(d); }

Tensor make_int(const nlohmann::json& data, const Shape& s, DType d) {
  std::vector<int64_t> v;
  for (const auto& x : data) v.push_back(x.is_number_unsigned() ? int64_t(x.get<uint64_t>()) : x.get<int64_t>());
  return Tensor::from_vector(v, s).to_dtype(d);
}

std::vector<int64_t> ints(const Tensor& t) { return t.to_dtype(DType::I64).to_vector<int64_t>(); }
std::vector<int64_t> ints(const nlohmann::json& data) {
  std::vector<int64_t> v;
  for (const auto& x : data) v.push_back(x.is_number_unsigned() ? int64_t(x.get<uint64_t>()) : x.get<int64_t>());
  return v;
}

// Every op of src/ops/op_table.hpp, by name. The fixture is the independent side: each table op
// must have its expected values there (gen_elementwise.py), and the fixture no op the table lacks.
using UnaryFn = Tensor (Tensor::*)() const;
const std::map<std::string, UnaryFn>& unary_fns() {
  static const std::map<std::string, UnaryFn> m = {
#define WICK_X(E, n, ...) {#n, &Tensor::n},
      WICK_UNARY_OPS(WICK_X)
#undef WICK_X
  };
  return m;
}
using BinaryFn = Tensor (Tensor::*)(const Tensor&) const;
const std::map<std::string, BinaryFn>& binary_fns() {
  static const std::map<std::string, BinaryFn> m = {
#define WICK_X(E, n, ...) {#n, &Tensor::n},
      WICK_BINARY_OPS(WICK_X)
#undef WICK_X
  };
  return m;
}
const std::map<std::string, BinaryFn>& cmp_fns() {
  static const std::map<std::string, BinaryFn> m = {
#define WICK_X(E, n) {#n, &Tensor::n},
      WICK_CMP_OPS(WICK_X)
#undef WICK_X
  };
  return m;
}

std::set<std::string> keys(const nlohmann::json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}
std::set<std::string> names(const std::map<std::string, UnaryFn>& m) {
  std::set<std::string> out;
  for (const auto& [k, v] : m) out.insert(k);
  return out;
}
const char* kRegen = "; add the op's expected values to tests/fixtures/gen_elementwise.py and rerun it";

}  // namespace

TEST(Unary, AllOpsAllFloatDTypesMatchNumpy) {
  const auto& u = fixture()["unary"];
  EXPECT_EQ(unary_fns().size(), size_t(kNumUnaryOps));
  EXPECT_EQ(keys(u), names(unary_fns())) << "fixture ops vs op_table.hpp" << kRegen;
  for (const auto& [name, fn] : unary_fns()) {
    ASSERT_TRUE(u.contains(name)) << "no expected values for unary op " << name << kRegen;
    for (DType d : kFloatDTypes) {
      const auto& c = u.at(name).at(dtype_name(d));
      std::vector<double> x = doubles_from_json(c["x"]), y = doubles_from_json(c["y"]);
      Tensor t = make(x, {x.size()}, d);
      Tensor r = (t.*fn)();
      EXPECT_EQ(r.dtype(), d);
      EXPECT_TRUE(all_close(r, y, rtol_for(d), atol_for(d))) << name << " " << dtype_name(d);
    }
  }
}

TEST(Unary, TransposedAndOffsetLayouts) {
  const auto& u = fixture()["unary"];
  for (const auto& [name, fn] : unary_fns()) {
    for (DType d : {DType::F32, DType::BF16}) {
      const auto& c = u.at(name).at(dtype_name(d));
      std::vector<double> x = doubles_from_json(c["x"]), y = doubles_from_json(c["y"]);
      ASSERT_EQ(x.size(), 32u);
      Tensor t = make(x, {4, 8}, d);
      EXPECT_TRUE(all_close((as_transposed(t).*fn)(), y, rtol_for(d), atol_for(d))) << name << " transposed";
      EXPECT_TRUE(all_close((as_offset(t).*fn)(), y, rtol_for(d), atol_for(d))) << name << " offset";
      // a broadcast (stride 0) input: every row is the same 8 values
      Tensor row = make(std::vector<double>(x.begin(), x.begin() + 8), {1, 8}, d).broadcast_as({3, 8});
      std::vector<double> want;
      for (int i = 0; i < 3; ++i) want.insert(want.end(), y.begin(), y.begin() + 8);
      EXPECT_TRUE(all_close((row.*fn)(), want, rtol_for(d), atol_for(d))) << name << " broadcast";
    }
  }
}

TEST(Unary, HandValues) {
  // round: half away from zero (Candle), not half to even
  EXPECT_TRUE(all_close(make({0.5, -0.5, 1.5, 2.5, -2.5, 2.4999}, {6}, DType::F32).round(), {1, -1, 2, 3, -3, 2}));
  // sigmoid stays finite and exact at the ends; sign of NaN is NaN, of 0 is 0
  EXPECT_TRUE(all_close(make({-200, 200, 0}, {3}, DType::F32).sigmoid(), {0, 1, 0.5}, 0, 0));
  EXPECT_TRUE(all_close(make({NAN, 0.0, -3, 7}, {4}, DType::F64).sign(), {NAN, 0, -1, 1}, 0, 0));
  // relu keeps NaN (it equals maximum(x, 0))
  EXPECT_TRUE(all_close(make({NAN, -1, 2}, {3}, DType::F16).relu(), {NAN, 0, 2}, 0, 0));
  // gelu(1) tanh approximation: 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906082768
  EXPECT_TRUE(all_close(make({1.0}, {1}, DType::F64).gelu(), {0.8411919906082768}, 1e-14));
  // gelu_erf(1) = 0.5 * (1 + erf(1/sqrt 2)) = 0.8413447460685429
  EXPECT_TRUE(all_close(make({1.0}, {1}, DType::F64).gelu_erf(), {0.8413447460685429}, 1e-14));
}

TEST(Unary, EmptyAndScalarShapes) {
  Tensor e = Tensor::zeros({0, 3}, DType::F32);
  Tensor r = e.exp();
  EXPECT_EQ(r.shape(), (Shape{0, 3}));
  EXPECT_EQ(r.numel(), 0u);
  Tensor s = Tensor::full({}, 2.0, DType::F64).sqr();
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.to_scalar_double(), 4.0);
  EXPECT_EQ(Tensor::zeros({2, 0}, DType::I32).neg().numel(), 0u);
}

// The integer-defined ops are those the fixture has integer values for; the table must agree.
TEST(Unary, IntegerOpsWrapAndMatchNumpy) {
  const auto& ic = fixture()["int"];
  std::set<std::string> table_int;
  for (const UnaryOpInfo& u : kUnaryOps)
    if (u.dtypes == DTypeClass::All) table_int.insert(u.name);
  for (DType d : kIntDTypes) {
    const auto& c = ic.at(dtype_name(d));
    EXPECT_EQ(keys(c["unary"]), table_int) << "integer ops of the fixture vs op_table.hpp" << kRegen;
    Tensor a = make_int(c["a"], {c["a"].size()}, d);
    for (const std::string& name : table_int) {
      if (!c["unary"].contains(name)) continue;
      Tensor r = (a.*unary_fns().at(name))();
      EXPECT_EQ(r.dtype(), d) << name;
      EXPECT_EQ(ints(r), ints(c["unary"][name])) << name << " " << dtype_name(d);
    }
    // whole numbers already: identity (by hand, beside the fixture's)
    EXPECT_EQ(ints(a.round()), ints(c["a"]));
    EXPECT_EQ(ints(as_offset(a.reshape({2, a.numel() / 2})).neg()), ints(c["unary"]["neg"])) << dtype_name(d);
  }
}

TEST(Unary, FloatOnlyOpsThrowOnIntegers) {
  for (DType d : kIntDTypes) {
    Tensor t = Tensor::ones({2}, d);
    for (const auto& [name, fn] : unary_fns()) {
      bool int_ok = fixture()["int"].at(dtype_name(d))["unary"].contains(name);
      if (int_ok) {
        EXPECT_NO_THROW((t.*fn)()) << name;
      } else {
        try {
          (t.*fn)();
          ADD_FAILURE() << name << " on " << dtype_name(d) << " did not throw";
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::DType);
          EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
      }
    }
    EXPECT_THROW(t.powf(2.0), Error);
    EXPECT_THROW(t.elu(1.0), Error);
    EXPECT_THROW(t.pow(t), Error);
  }
  EXPECT_THROW(Tensor().exp(), Error);
}

TEST(Param, AffinePowfEluMatchNumpy) {
  const auto& p = fixture()["param"];
  for (DType d : kFloatDTypes) {
    auto check = [&](const char* name, auto op) {
      const auto& c = p.at(name).at(dtype_name(d));
      std::vector<double> x = doubles_from_json(c["x"]), y = doubles_from_json(c["y"]);
      Tensor t = make(x, {3, 4}, d);
      EXPECT_TRUE(all_close(op(t), y, rtol_for(d), atol_for(d))) << name << " " << dtype_name(d);
      EXPECT_TRUE(all_close(op(as_transposed(t)), y, rtol_for(d), atol_for(d))) << name << " transposed";
    };
    check("affine", [](const Tensor& t) { return t.affine(1.5, -0.25); });
    check("powf", [](const Tensor& t) { return t.powf(2.5); });
    check("elu", [](const Tensor& t) { return t.elu(0.7); });
  }
}

TEST(Param, AffineOnIntegersConvertsMulAddAndWraps) {
  // Candle converts mul/add to the dtype: 2.9 -> 2, then x * 2 + 3 wraps in u8.
  EXPECT_EQ(ints(make({0, 10, 200}, {3}, DType::U8).affine(2.9, 3.0)), (std::vector<int64_t>{3, 23, 147}));
  // i64 stays exact: 2^40 * 3 + 1
  Tensor big = Tensor::from_vector(std::vector<int64_t>{int64_t(1) << 40, -5}, {2});
  EXPECT_EQ(ints(big.affine(3, 1)), (std::vector<int64_t>{(int64_t(3) << 40) + 1, -14}));
  EXPECT_EQ(ints(make({-3, 4}, {2}, DType::I32).affine(-1, 0)), (std::vector<int64_t>{3, -4}));
}

TEST(Binary, FloatBroadcastMatchesNumpy) {
  const auto& b = fixture()["binary"];
  Shape as = b["a_shape"].get<Shape>(), bs = b["b_shape"].get<Shape>(), os = b["out_shape"].get<Shape>();
  for (DType d : kFloatDTypes) {
    const auto& c = b["dtypes"].at(dtype_name(d));
    Tensor x = make(doubles_from_json(c["a"]), as, d), y = make(doubles_from_json(c["b"]), bs, d);
    auto check = [&](const char* name, const Tensor& r) {
      EXPECT_EQ(r.shape(), os);
      EXPECT_EQ(r.dtype(), d);
      EXPECT_TRUE(all_close(r, doubles_from_json(c[name]), rtol_for(d), atol_for(d))) << name << " " << dtype_name(d);
    };
    for (const auto& [name, fn] : binary_fns()) ASSERT_TRUE(c.contains(name)) << name << kRegen;
    for (int variant = 0; variant < 3; ++variant) {
      Tensor xa = variant == 1 ? as_offset(x) : x;
      Tensor yb = variant == 1 ? as_transposed(y) : variant == 2 ? as_offset(y) : y;
      for (const auto& [name, fn] : binary_fns()) check(name.c_str(), (xa.*fn)(yb));
      check("add", xa + yb);
    }
  }
}

TEST(Binary, BroadcastHandValues) {
  Tensor col = make({1, 2}, {2, 1}, DType::F32), row = make({10, 20, 30}, {1, 3}, DType::F32);
  EXPECT_TRUE(all_close(col * row, {10, 20, 30, 20, 40, 60}));
  EXPECT_TRUE(all_close(row - col, {9, 19, 29, 8, 18, 28}));
  Tensor m = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::F64);
  EXPECT_TRUE(all_close(m + make({1, 1, 1}, {3}, DType::F64), {2, 3, 4, 5, 6, 7}));
  // transposed lhs: m.t() is [[1,4],[2,5],[3,6]]
  EXPECT_TRUE(all_close(m.t() * make({1, 10}, {2}, DType::F64), {1, 40, 2, 50, 3, 60}));
  // narrow (offset) operands
  EXPECT_TRUE(all_close(m.narrow(1, 1, 2) - m.narrow(1, 0, 2), {1, 1, 1, 1}));
  // rank-0 with rank-0, and empty with broadcast
  EXPECT_EQ((Tensor::full({}, 2.0, DType::F32) + Tensor::full({}, 3.0, DType::F32)).to_scalar_double(), 5.0);
  Tensor e = Tensor::zeros({0, 3}, DType::F32) + make({1, 2, 3}, {3}, DType::F32);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ((Tensor::zeros({4, 0}, DType::I64) * Tensor::ones({1, 1}, DType::I64)).shape(), (Shape{4, 0}));
}

TEST(Binary, IntegerArithmeticWrapsAndDivisionTruncates) {
  const auto& ic = fixture()["int"];
  for (DType d : kIntDTypes) {
    const auto& c = ic.at(dtype_name(d));
    size_t n = c["a"].size();
    Tensor a = make_int(c["a"], {n}, d), b = make_int(c["b"], {n}, d);
    for (const auto& [name, fn] : binary_fns()) {
      ASSERT_TRUE(c.contains(name)) << name << kRegen;
      EXPECT_EQ(ints((a.*fn)(b)), ints(c[name])) << name << " " << dtype_name(d);
    }
    EXPECT_EQ(ints(a / b), ints(c["div"])) << dtype_name(d);
    EXPECT_EQ(ints(a.lt(b)), ints(c["lt"])) << dtype_name(d);
    EXPECT_EQ(ints(a.eq(b)), ints(c["eq"])) << dtype_name(d);
    EXPECT_EQ(ints(a.ge(b)), ints(c["ge"])) << dtype_name(d);
    // strided operands: every other element of a doubled tensor
    Tensor a2 = Tensor::stack({a, a}, 1).narrow(1, 0, 1).squeeze(1);
    EXPECT_EQ(ints(a2 + b), ints(c["add"])) << dtype_name(d);
  }
  // hand cases: truncation toward zero, x / 0 = 0, INT_MIN / -1 wraps
  EXPECT_EQ(ints(make({7, -7, 7, -7, 5, 0}, {6}, DType::I32) / make({2, 2, -2, -2, 0, 0}, {6}, DType::I32)),
            (std::vector<int64_t>{3, -3, -3, 3, 0, 0}));
  Tensor mn = Tensor::from_vector(std::vector<int64_t>{INT64_MIN}, {1});
  EXPECT_EQ(ints(mn / Tensor::from_vector(std::vector<int64_t>{-1}, {1})), (std::vector<int64_t>{INT64_MIN}));
  EXPECT_EQ(ints(make({250}, {1}, DType::U8) + make({10}, {1}, DType::U8)), (std::vector<int64_t>{4}));
  EXPECT_EQ(ints(make({3}, {1}, DType::U32) - make({5}, {1}, DType::U32)), (std::vector<int64_t>{4294967294}));
}

TEST(Binary, MaximumMinimumPropagateNaN) {
  Tensor a = make({NAN, 1, 2, NAN}, {4}, DType::F32), b = make({0, NAN, 1, NAN}, {4}, DType::F32);
  EXPECT_TRUE(all_close(a.maximum(b), {NAN, NAN, 2, NAN}, 0, 0));
  EXPECT_TRUE(all_close(a.minimum(b), {NAN, NAN, 1, NAN}, 0, 0));
  EXPECT_TRUE(all_close(a.to_dtype(DType::BF16).maximum(b.to_dtype(DType::BF16)), {NAN, NAN, 2, NAN}, 0, 0));
}

TEST(Binary, LargeContiguousAndStridedUseAllPaths) {
  // above the parallel grain: exercises the multi-threaded split
  const size_t n = 200003;
  std::vector<float> x(n), y(n);
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = float(i % 1000);
    y[i] = float(i % 7) * 0.5f;
    want[i] = double(i % 1000) + double(i % 7) * 0.5;
  }
  Tensor a = Tensor::from_vector(x, {n}), b = Tensor::from_vector(y, {n});
  EXPECT_TRUE(all_close(a + b, want, 0, 0));
  // transposed 500 x 400 operand plus a column bias
  std::vector<float> m(500 * 400);
  for (size_t i = 0; i < m.size(); ++i) m[i] = float(i);
  Tensor mt = Tensor::from_vector(m, {500, 400}).t();  // (400, 500), element [r][c] = c * 400 + r
  std::vector<float> bias(400);
  for (size_t r = 0; r < 400; ++r) bias[r] = float(r) * 1000.0f;
  Tensor s = mt + Tensor::from_vector(bias, {400, 1});
  std::vector<double> w(400 * 500);
  for (size_t r = 0; r < 400; ++r)
    for (size_t c = 0; c < 500; ++c) w[r * 500 + c] = double(c * 400 + r) + double(r) * 1000.0;
  EXPECT_TRUE(all_close(s, w, 0, 0));
  // f16 row broadcast, large
  Tensor h = Tensor::ones({300, 256}, DType::F16) * Tensor::arange(0, 256, 1, DType::F16);
  std::vector<double> hw(300 * 256);
  for (size_t i = 0; i < hw.size(); ++i) hw[i] = double(i % 256);
  EXPECT_TRUE(all_close(h, hw, 0, 0));
}

TEST(Pow, ExpLogOfTensors) {
  Tensor x = make({1, 2, 4, 9}, {4}, DType::F64);
  EXPECT_TRUE(all_close(x.pow(make({3, 3, 0.5, 0.5}, {4}, DType::F64)), {1, 8, 2, 3}, 1e-12));
  EXPECT_TRUE(all_close(x.pow(make({2}, {1}, DType::F64)), {1, 4, 16, 81}, 1e-12));
  EXPECT_TRUE(std::isnan(make({-2}, {1}, DType::F32).pow(make({2}, {1}, DType::F32)).item<float>()));
  EXPECT_THROW(x.pow(make({1, 2}, {2}, DType::F64)), Error);
  EXPECT_THROW(x.pow(make({1}, {1}, DType::F32)), Error);
}

TEST(Cmp, FloatBroadcastMatchesNumpyAndNaN) {
  const auto& b = fixture()["binary"];
  Shape as = b["a_shape"].get<Shape>(), bs = b["b_shape"].get<Shape>(), os = b["out_shape"].get<Shape>();
  for (DType d : kFloatDTypes) {
    const auto& c = b["dtypes"].at(dtype_name(d));
    Tensor x = make(doubles_from_json(c["a"]), as, d), y = make(doubles_from_json(c["b"]), bs, d);
    for (int variant = 0; variant < 2; ++variant) {
      Tensor xa = variant ? as_offset(x) : x, yb = variant ? as_transposed(y) : y;
      for (const auto& [name, fn] : cmp_fns()) {
        ASSERT_TRUE(c.contains(name)) << name << kRegen;
        Tensor r = (xa.*fn)(yb);
        EXPECT_EQ(r.dtype(), DType::U8);
        EXPECT_EQ(r.shape(), os);
        EXPECT_TRUE(r.is_contiguous());
        EXPECT_EQ(ints(r), ints(c[name])) << name << " " << dtype_name(d);
      }
    }
  }
  Tensor n = make({NAN}, {1}, DType::F32);
  EXPECT_EQ(ints(n.eq(n)), std::vector<int64_t>{0});
  EXPECT_EQ(ints(n.ne(n)), std::vector<int64_t>{1});
  EXPECT_EQ(ints(n.le(n)), std::vector<int64_t>{0});
}

TEST(Cmp, ScalarForms) {
  Tensor t = make({-1, 0, 1.5, 2, NAN}, {5}, DType::F32);
  EXPECT_EQ(ints(t.gt(Scalar(0.0))), (std::vector<int64_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(ints(t.le(Scalar(1.5))), (std::vector<int64_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(ints(t.eq(Scalar(2))), (std::vector<int64_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(ints(t.ne(Scalar(2))), (std::vector<int64_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(ints(t.lt(Scalar(0))), (std::vector<int64_t>{1, 0, 0, 0, 0}));
  EXPECT_EQ(ints(t.ge(Scalar(-1))), (std::vector<int64_t>{1, 1, 1, 1, 0}));
  // i64 scalars stay exact: 2^53 + 1 is not a double
  const int64_t big = (int64_t(1) << 53) + 1;
  Tensor i = Tensor::from_vector(std::vector<int64_t>{big - 1, big, big + 1}, {3});
  EXPECT_EQ(ints(i.eq(Scalar(big))), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(ints(i.gt(Scalar(big))), (std::vector<int64_t>{0, 0, 1}));
}

TEST(Where, BroadcastMatchesNumpyForEveryCondAndValueDType) {
  const auto& w = fixture()["where"];
  Shape cs = w["cond_shape"].get<Shape>(), ts = w["t_shape"].get<Shape>(), fs = w["f_shape"].get<Shape>();
  std::vector<double> y = doubles_from_json(w["y"]);
  for (DType cd : kIntDTypes) {
    Tensor cond = make_int(w["cond"], cs, cd);
    for (DType d : kFloatDTypes) {
      Tensor t = make(doubles_from_json(w["t"]), ts, d), f = make(doubles_from_json(w["f"]), fs, d);
      Tensor r = cond.where_cond(t, f);
      EXPECT_EQ(r.shape(), w["y_shape"].get<Shape>());
      EXPECT_EQ(r.dtype(), d);
      // values pass through, so the rounding to d is the only difference from numpy's f64
      EXPECT_TRUE(all_close(r, y, rtol_for(d), atol_for(d))) << dtype_name(cd) << " " << dtype_name(d);
      EXPECT_TRUE(all_close(as_offset(cond).where_cond(as_offset(t), f), y, rtol_for(d), atol_for(d)));
    }
  }
}

TEST(Where, IntegerValuesAndHandCases) {
  Tensor cond = Tensor::from_vector(std::vector<uint32_t>{0, 7, 0, 1}, {4});
  Tensor t = Tensor::from_vector(std::vector<int64_t>{INT64_MAX, 2, 3, 4}, {4});
  Tensor f = Tensor::from_vector(std::vector<int64_t>{-1, -2, INT64_MIN, -4}, {4});
  EXPECT_EQ(ints(cond.where_cond(t, f)), (std::vector<int64_t>{-1, 2, INT64_MIN, 4}));
  // i64 condition with negative values counts as true; transposed condition
  Tensor c2 = Tensor::from_vector(std::vector<int64_t>{-5, 0, 0, 3}, {2, 2}).t();  // [[-5,0],[0,3]]
  Tensor r = c2.where_cond(make({1}, {1}, DType::U8), make({0}, {1}, DType::U8));
  EXPECT_EQ(ints(r), (std::vector<int64_t>{1, 0, 0, 1}));
  for (DType d : {DType::U8, DType::U32, DType::I16, DType::I32}) {
    Tensor c = make({1, 0, 2}, {3}, d);
    EXPECT_EQ(ints(c.where_cond(make({5}, {1}, DType::I16), make({6, 7, 8}, {3}, DType::I16))),
              (std::vector<int64_t>{5, 7, 5}));
  }
}

TEST(ScalarArith, ConvertedToTheTensorDType) {
  Tensor f = make({1, 2, 3}, {3}, DType::F32);
  EXPECT_TRUE(all_close(f + Scalar(0.5), {1.5, 2.5, 3.5}));
  EXPECT_TRUE(all_close(f - Scalar(1), {0, 1, 2}));
  EXPECT_TRUE(all_close(f * Scalar(2.5), {2.5, 5, 7.5}));
  EXPECT_TRUE(all_close(f / Scalar(4), {0.25, 0.5, 0.75}));
  EXPECT_TRUE(all_close(f.maximum(Scalar(2)), {2, 2, 3}));
  EXPECT_TRUE(all_close(f.minimum(Scalar(2)), {1, 2, 2}));
  // bf16: the scalar is rounded to bf16 first: 1.001 -> 1.0
  EXPECT_TRUE(all_close(make({2}, {1}, DType::BF16) * Scalar(1.001), {2}, 0, 0));
  // i64 stays exact past 2^53
  const int64_t big = (int64_t(1) << 60) + 1;
  Tensor i = Tensor::from_vector(std::vector<int64_t>{1, -1}, {2});
  EXPECT_EQ(ints(i + Scalar(big)), (std::vector<int64_t>{big + 1, big - 1}));
  EXPECT_EQ(ints(i * Scalar(big)), (std::vector<int64_t>{big, -big}));
  // integers: wrap, truncate, divide by zero gives zero; a float scalar truncates (Rust `as`)
  EXPECT_EQ(ints(make({10, 250}, {2}, DType::U8) + Scalar(300)), (std::vector<int64_t>{54, 38}));
  EXPECT_EQ(ints(make({-7, 7}, {2}, DType::I32) / Scalar(2)), (std::vector<int64_t>{-3, 3}));
  EXPECT_EQ(ints(make({-7, 7}, {2}, DType::I16) / Scalar(0)), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(ints(make({-7, 7}, {2}, DType::I32) * Scalar(2.9)), (std::vector<int64_t>{-14, 14}));
  // strided input
  EXPECT_TRUE(all_close(make({1, 2, 3, 4}, {2, 2}, DType::F64).t() + Scalar(1), {2, 4, 3, 5}));
}

TEST(ScalarArith, Clamp) {
  EXPECT_TRUE(all_close(make({-5, 0.5, 5, NAN}, {4}, DType::F32).clamp(Scalar(-1), Scalar(1)), {-1, 0.5, 1, NAN}, 0, 0));
  EXPECT_EQ(ints(make({-5, 3, 50}, {3}, DType::I32).clamp(Scalar(0), Scalar(10))), (std::vector<int64_t>{0, 3, 10}));
  EXPECT_EQ(ints(make({0, 100, 255}, {3}, DType::U8).clamp(Scalar(10), Scalar(200))),
            (std::vector<int64_t>{10, 100, 200}));
}

TEST(Errors, MismatchedDTypesShapesAndConditions) {
  Tensor a = Tensor::ones({2, 3}, DType::F32), b = Tensor::ones({2, 3}, DType::F64);
  try {
    a + b;
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DType);
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("to_dtype"), std::string::npos) << m;
  }
  try {
    a * Tensor::ones({4}, DType::F32);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Shape);
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a.eq(Tensor::ones({3, 2}, DType::F32)), Error);
  EXPECT_THROW(a.lt(b), Error);
  EXPECT_THROW(a.maximum(Tensor()), Error);
  // where_cond: float condition, t/f dtypes differ, shapes do not broadcast
  Tensor c = Tensor::ones({2, 3}, DType::U8);
  try {
    a.where_cond(a, a);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DType);
  }
  EXPECT_THROW(c.where_cond(a, b), Error);
  EXPECT_THROW(c.where_cond(a, Tensor::ones({4}, DType::F32)), Error);
  EXPECT_NO_THROW(c.where_cond(a, Tensor::ones({3}, DType::F32)));
}

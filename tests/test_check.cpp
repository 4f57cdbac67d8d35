// Tests of the parity harness itself: comparisons, guards, input layouts, case verdicts.
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "check/check.hpp"
#include "check/ops_doc.hpp"
#include "ops/op_kinds.hpp"
#include "test_util.hpp"

using namespace wick;
using namespace wick::check;

TEST(CheckCompare, NmseByHand) {
  EXPECT_EQ(nmse({1, 2, 3}, {1, 2, 3}), 0.0);
  EXPECT_DOUBLE_EQ(nmse({1, 2}, {1, 3}), 1.0 / 10.0);  // (2-3)^2 / (1 + 9)
  EXPECT_DOUBLE_EQ(nmse({0, 4}, {2, 0}), 20.0 / 4.0);
  // Non-finite positions are left to the NaN/Inf rules.
  EXPECT_DOUBLE_EQ(nmse({NAN, 1, INFINITY}, {NAN, 2, INFINITY}), 1.0 / 4.0);
  // All-zero reference: any difference is an enormous error, not a division by zero.
  EXPECT_GT(nmse({1e-3}, {0}), 1e100);
  EXPECT_EQ(nmse({0}, {0}), 0.0);
}

TEST(CheckCompare, Bounds) {
  EXPECT_EQ(nmse_bound(DType::F64), 1e-24);
  EXPECT_EQ(nmse_bound(DType::F32), 1e-12);
  EXPECT_EQ(nmse_bound(DType::F16), 1e-6);
  EXPECT_EQ(nmse_bound(DType::BF16), 1e-4);
  EXPECT_EQ(nmse_bound(DType::F8E4M3), 1e-2);
  for (DType d : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) EXPECT_EQ(nmse_bound(d), 0);
}

TEST(CheckCompare, FlagsNaNMismatch) {
  Verdict v = compare_values(DType::F32, {1, NAN, 3}, {1, 2, 3});
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("NaN mismatch at element 1"), std::string::npos) << v.reason;
  v = compare_values(DType::F32, {1, 2, 3}, {1, 2, NAN});
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("element 2"), std::string::npos) << v.reason;
  EXPECT_TRUE(compare_values(DType::F32, {NAN, 2}, {NAN, 2}).ok);
}

TEST(CheckCompare, FlagsInfMismatch) {
  EXPECT_FALSE(compare_values(DType::F16, {INFINITY}, {-INFINITY}).ok);
  EXPECT_FALSE(compare_values(DType::F16, {INFINITY}, {65504}).ok);
  EXPECT_FALSE(compare_values(DType::F16, {1}, {INFINITY}).ok);
  EXPECT_TRUE(compare_values(DType::F16, {-INFINITY, 1}, {-INFINITY, 1}).ok);
}

TEST(CheckCompare, FlagsWrongValue) {
  // f32: a 1e-7 relative error passes (nmse 1e-14), a 1e-5 one does not (1e-10 > 1e-12).
  std::vector<double> want(100, 1.0), close(100, 1.0), wrong(100, 1.0);
  close[7] = 1.0 + 1e-6;
  wrong[7] = 1.0 + 1e-4;
  EXPECT_TRUE(compare_values(DType::F32, close, want).ok);
  Verdict v = compare_values(DType::F32, wrong, want);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("nmse"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("element 7"), std::string::npos) << v.reason;
  // The same error is within bf16's bound.
  EXPECT_TRUE(compare_values(DType::BF16, wrong, want).ok);
  // Integers are exact: one unit off fails.
  v = compare_values(DType::I32, {1, 2, 4}, {1, 2, 3});
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("1 of 3"), std::string::npos) << v.reason;
  EXPECT_TRUE(compare_values(DType::U8, {0, 255}, {0, 255}).ok);
  EXPECT_FALSE(compare_values(DType::F32, {1, 2}, {1, 2, 3}).ok);
}

TEST(CheckCompare, TensorsShapeDtypeAndValues) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(compare(a, a.copy()).ok);
  Verdict v = compare(a, a.reshape({3, 2}));
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("shape"), std::string::npos);
  v = compare(a, a.to_dtype(DType::F64));
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("dtype"), std::string::npos);
  Tensor b = Tensor::from_vector(std::vector<float>{1, 2, NAN, 4, 5, 6}, {2, 3});
  EXPECT_FALSE(compare(b, a).ok);
  // A transposed view compares by logical values, not storage order.
  Tensor at = test::as_transposed(a);
  EXPECT_TRUE(compare(at, a).ok);
  EXPECT_FALSE(compare(a.t().contiguous(), a.reshape({3, 2})).ok);
}

TEST(CheckCompare, HostValuesDecodeHalfTypes) {
  // f16 0x3c00 = 1, 0xc000 = -2, 0x7c00 = inf, 0x7e00 = NaN; bf16 0x3f80 = 1; f8e4m3 0x38 = 1, 0x7f = NaN.
  std::vector<uint16_t> h = {0x3c00, 0xc000, 0x7c00, 0x7e00};
  auto v = host_values(Tensor::from_data(h.data(), {4}, DType::F16));
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], -2.0);
  EXPECT_EQ(v[2], INFINITY);
  EXPECT_TRUE(std::isnan(v[3]));
  std::vector<uint16_t> b = {0x3f80, 0xc040};
  v = host_values(Tensor::from_data(b.data(), {2}, DType::BF16));
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], -3.0);
  std::vector<uint8_t> f8 = {0x38, 0x7f, 0xb8};
  v = host_values(Tensor::from_data(f8.data(), {3}, DType::F8E4M3));
  EXPECT_EQ(v[0], 1.0);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], -1.0);
  std::vector<int64_t> i = {-5, 1ll << 40};
  v = host_values(Tensor::from_vector(i, {2}));
  EXPECT_EQ(v[0], -5.0);
  EXPECT_EQ(v[1], double(1ll << 40));
}

TEST(CheckGuard, ViewElements) {
  // (2, 3) view with row stride 5 and offset 7.
  Layout l({2, 3}, {5, 1}, 7);
  EXPECT_EQ(view_elements(l), (std::vector<size_t>{7, 8, 9, 12, 13, 14}));
  Layout t({2, 2}, {1, 3}, 1);  // transposed
  EXPECT_EQ(view_elements(t), (std::vector<size_t>{1, 4, 2, 5}));
  EXPECT_TRUE(view_elements(Layout({0, 3}, {3, 1}, 4)).empty());
}

static Guard make_guard() {
  Tensor big = Tensor::arange(0, 20, 1, DType::F32).reshape({4, 5});
  Guard g{big, big.narrow(0, 1, 2).narrow(1, 1, 3), {}};
  g.before.resize(20 * 4);
  big.copy_to_host(g.before.data());
  return g;
}

TEST(CheckGuard, DetectsWriteOutsideView) {
  Guard g = make_guard();
  EXPECT_TRUE(check_guard(g).ok);
  // Pretend the buffer held something else at element 10 (row 2, col 0: outside the view).
  float other = -1;
  std::memcpy(g.before.data() + 10 * 4, &other, 4);
  Verdict v = check_guard(g);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("guard"), std::string::npos);
  EXPECT_NE(v.reason.find("element 10"), std::string::npos) << v.reason;
}

TEST(CheckGuard, IgnoresWritesInsideView) {
  Guard g = make_guard();
  float other = -1;
  std::memcpy(g.before.data() + 7 * 4, &other, 4);  // row 1, col 2: inside
  EXPECT_TRUE(check_guard(g).ok);
}

TEST(CheckGuard, DetectsARealOverwrite) {
  // An in-place scatter through the whole buffer instead of the view is caught.
  Inputs in(Device::cpu(), DType::F32, LayoutKind::Contiguous, false);
  Tensor dst = in.guarded({3, 4}, 1);
  ASSERT_EQ(in.guards().size(), 1u);
  EXPECT_TRUE(check_guard(in.guards()[0]).ok);
  Tensor big = in.guards()[0].big;  // (6, 9)
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{0}, {1, 1});
  big.scatter_set(ids, Tensor::full({1, 1}, 5.0, DType::F32), 1);  // element 0, a sentinel
  EXPECT_FALSE(check_guard(in.guards()[0]).ok);
}

TEST(CheckInputs, SameValuesInEveryLayout) {
  for (DType d : {DType::F32, DType::BF16, DType::I16, DType::U8, DType::F8E4M3})
    for (LayoutKind k : kAllLayouts) {
      Inputs var(Device::cpu(), d, k, false), ref(Device::cpu(), d, k, true);
      Shape s = {var.n(6), 5};
      Tensor a = var.x(s, 3), b = ref.x(s, 3);
      EXPECT_EQ(a.shape(), s);
      EXPECT_TRUE(ref.x(s, 3).is_contiguous());
      EXPECT_TRUE(compare(a, b).ok) << layout_name(k) << " " << dtype_name(d);
      Tensor v = var.x({7}, 4), w = ref.x({7}, 4);
      EXPECT_TRUE(compare(v, w).ok) << layout_name(k);
      if (k == LayoutKind::Transposed) {
        EXPECT_FALSE(a.is_contiguous());
        EXPECT_EQ(v.layout().strides[0], 2);
      }
      if (k == LayoutKind::Offset) {
        EXPECT_GT(a.layout().offset, 0u);
        EXPECT_FALSE(a.is_contiguous());
      }
      if (k == LayoutKind::Broadcast) EXPECT_EQ(a.layout().strides[0], 0);
      if (k == LayoutKind::Empty) EXPECT_EQ(a.numel(), 0u);
    }
}

TEST(CheckInputs, IntegerValuesAreSmall) {
  Inputs in(Device::cpu(), DType::I32, LayoutKind::Contiguous, false);
  for (double x : host_values(in.x({50}, 1))) {
    EXPECT_GE(x, -9);
    EXPECT_LE(x, 9);
  }
  for (double x : host_values(in.x({50}, 2, Values::Positive))) {
    EXPECT_GE(x, 1);
    EXPECT_LE(x, 9);
  }
  Inputs u(Device::cpu(), DType::U8, LayoutKind::Contiguous, false);
  for (double x : host_values(u.x({50}, 1))) EXPECT_LE(x, 9);
}

TEST(CheckInputs, UniqueIdsPerFiber) {
  for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Broadcast, LayoutKind::Transposed}) {
    Inputs in(Device::cpu(), DType::F32, k, false);
    Tensor ids = in.ids({4, 6}, 9, 8, DType::I64, 1);
    auto v = host_values(ids);
    for (size_t r = 0; r < 4; ++r) {
      std::set<double> row(v.begin() + r * 6, v.begin() + r * 6 + 6);
      EXPECT_EQ(row.size(), 6u);
      for (double x : row) EXPECT_LT(x, 8);
    }
  }
}

static Case fake_case(CaseFn fn) { return {"fake", "", DType::F32, LayoutKind::Offset, std::move(fn)}; }

TEST(CheckRun, VerdictsOfCases) {
  Case good = fake_case([](Inputs& in) -> std::vector<Tensor> { return {in.x({3, 4}, 1).copy()}; });
  EXPECT_TRUE(run_case(good, Device::cpu()).ok);
  // A result that depends on the layout is a mismatch.
  Case layout_dependent = fake_case([](Inputs& in) -> std::vector<Tensor> {
    return {in.reference() ? in.x({3, 4}, 1) : in.x({3, 4}, 2)};
  });
  EXPECT_FALSE(run_case(layout_dependent, Device::cpu()).ok);
  Case nan_case = fake_case([](Inputs& in) -> std::vector<Tensor> {
    std::vector<float> v = {1, 2, 3};
    if (!in.reference()) v[1] = NAN;
    return {Tensor::from_vector(v, {3})};
  });
  EXPECT_NE(run_case(nan_case, Device::cpu()).reason.find("NaN"), std::string::npos);
  // An op that reports Unsupported is missing: a failure, not a skip.
  Case missing = fake_case([](Inputs&) -> std::vector<Tensor> {
    throw Error(ErrorKind::Unsupported, "exp: not implemented");
  });
  Verdict v = run_case(missing, Device::cpu());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("unsupported"), std::string::npos) << v.reason;
  Case shape_change = fake_case([](Inputs& in) -> std::vector<Tensor> {
    return {in.x({3, in.reference() ? size_t(4) : size_t(5)}, 1)};
  });
  EXPECT_NE(run_case(shape_change, Device::cpu()).reason.find("shape"), std::string::npos);
  // Writing outside the destination view is a guard failure.
  Case overwrite = fake_case([](Inputs& in) -> std::vector<Tensor> {
    Tensor dst = in.guarded({3, 4}, 1);
    if (!in.reference()) {
      Tensor big = in.guards()[0].big;
      big.scatter_set(Tensor::from_vector(std::vector<int64_t>{8}, {1, 1}), Tensor::full({1, 1}, 5.0, DType::F32), 1);
    }
    return {dst};
  });
  v = run_case(overwrite, Device::cpu());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("guard"), std::string::npos) << v.reason;
}

TEST(CheckCases, CoverTheTensorApi) {
  std::set<std::string> ops;
  std::set<std::string> casts;
  for (const Case& c : all_cases()) {
    ops.insert(c.op);
    if (c.op == "to_dtype" && c.layout == LayoutKind::Contiguous && c.variant.rfind("to=", 0) == 0)
      casts.insert(std::string(dtype_name(c.dtype)) + c.variant);
  }
  EXPECT_EQ(casts.size(), size_t(kNumDTypes * kNumDTypes));
  // Every op of the table has its parity cases (cases_elementwise.cpp loops over the table).
  for (const UnaryOpInfo& u : kUnaryOps) EXPECT_TRUE(ops.count(u.name)) << "no parity case for " << u.name;
  for (const BinaryOpInfo& b : kBinaryOps) EXPECT_TRUE(ops.count(b.name)) << "no parity case for " << b.name;
  for (const CmpOpInfo& c : kCmpOps) EXPECT_TRUE(ops.count(c.name)) << "no parity case for " << c.name;
  for (const ReduceOpInfo& r : kReduceOps) EXPECT_TRUE(ops.count(r.name)) << "no parity case for " << r.name;
  // docs/ops.md and the parity cases agree both ways: every case a row names exists, and every
  // op with parity cases is in a row of docs/ops.md (tools/check/ops_doc.cpp).
  std::set<std::string> documented;
  std::vector<OpRow> rows = backend_op_rows(), comp = composite_op_rows();
  rows.insert(rows.end(), comp.begin(), comp.end());
  for (const OpRow& r : rows)
    for (const std::string& op : r.cases) {
      documented.insert(op);
      EXPECT_TRUE(ops.count(op)) << "docs/ops.md row '" << r.ops << "' names '" << op << "', which has no parity case";
    }
  for (const std::string& op : ops)
    EXPECT_TRUE(documented.count(op)) << "parity case op '" << op << "' is in no row of tools/check/ops_doc.cpp";
  // A few by hand, so that an empty table cannot pass.
  for (const char* op : {"exp", "gelu_erf", "sign", "add", "minimum", "ge", "argmax", "matmul", "attention"})
    EXPECT_TRUE(documented.count(op)) << op;
  EXPECT_GE(ops.size(), 90u);
}

TEST(OpsDoc, RowsFollowTheTable) {
  const std::string md = ops_markdown();
  // Every table op appears in the generated text, with its dtype class in the same row.
  auto row_of = [&](const std::string& op) {
    for (size_t at = md.find("| element-wise | "); at != std::string::npos; at = md.find("| element-wise | ", at + 1)) {
      std::string line = md.substr(at, md.find('\n', at) - at);
      std::string ops = line.substr(17, line.find(" | ", 17) - 17);
      for (size_t p = 0; p <= ops.size();) {
        size_t e = ops.find(", ", p);
        if (ops.substr(p, (e == std::string::npos ? ops.size() : e) - p) == op) return line;
        if (e == std::string::npos) break;
        p = e + 2;
      }
    }
    return std::string();
  };
  EXPECT_NE(row_of("exp").find("| float |"), std::string::npos) << row_of("exp");
  EXPECT_NE(row_of("neg").find("| all |"), std::string::npos) << row_of("neg");
  for (const UnaryOpInfo& u : kUnaryOps) {
    std::string line = row_of(u.name);
    ASSERT_FALSE(line.empty()) << u.name << " is in no element-wise row";
    EXPECT_NE(line.find(u.dtypes == DTypeClass::All ? "| all |" : "| float |"), std::string::npos) << line;
  }
  EXPECT_NE(md.find("**float** = bf16 f16 f32 f64 f8e4m3;"), std::string::npos);
  EXPECT_NE(md.find("to_dtype: all 100 casts"), std::string::npos);
}

// docs/ops.md is generated; CI fails here when someone changed the table but not the file.
TEST(OpsDoc, CommittedFileIsUpToDate) {
  const std::string path = std::string(WICK_FIXTURES) + "/../../docs/ops.md";
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_TRUE(ss.str() == ops_markdown())
      << "docs/ops.md is stale: regenerate it with `build/wick ops --markdown > docs/ops.md`";
}

// Tests of the parity harness itself: comparisons, guards, input layouts, case verdicts.
#include <cmath>
#include <cstring>
#include <set>

#include "check/check.hpp"
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
  EXPECT_EQ(casts.size(), 100u);
  for (const char* op :
       {"to_dtype", "copy", "contiguous", "affine", "powf", "elu", "exp", "log", "sin", "cos", "tanh", "neg", "recip",
        "sqr", "sqrt", "abs", "gelu", "gelu_erf", "erf", "relu", "silu", "sigmoid", "ceil", "floor", "round", "sign",
        "add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "where_cond", "clamp",
        "pow", "sum", "min", "max", "argmin", "argmax", "mean", "var", "log_sum_exp", "cumsum", "arg_sort",
        "index_select", "gather", "scatter", "scatter_add", "scatter_set", "scatter_add_set", "index_add",
        "embedding", "matmul", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "avg_pool2d", "max_pool2d",
        "upsample_nearest1d", "upsample_nearest2d", "upsample_bilinear2d", "cat", "stack", "flip", "pad", "tril",
        "triu", "repeat", "slice_assign", "softmax_last_dim", "log_softmax_last_dim", "rms_norm", "layer_norm",
        "rope_i", "rope", "rope_thd", "silu_mul", "swiglu", "attention"})
    EXPECT_TRUE(ops.count(op)) << "no parity case for " << op;
}

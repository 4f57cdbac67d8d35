// Reductions, cumsum, arg_sort and top_k. Expected values come from tests/fixtures/reduce.json
// (written by gen_reduce.py with NumPy) or from hand arithmetic in the test.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::as_offset;
using wick::test::as_transposed;
using wick::test::doubles_from_json;
using wick::test::tensor_from_json;
using nlohmann::json;

namespace {

const json& fixture() {
  static json j = wick::test::load_json_fixture("reduce.json");
  return j;
}

// The same logical tensor in several layouts: contiguous, transposed storage, offset view,
// and (rank 3) a permuted storage order.
std::vector<std::pair<std::string, Tensor>> layouts(const Tensor& t) {
  std::vector<std::pair<std::string, Tensor>> v{{"contiguous", t}, {"offset", as_offset(t)}};
  if (t.rank() >= 2) v.push_back({"transposed", as_transposed(t)});
  if (t.rank() == 3) v.push_back({"permuted", t.permute({2, 0, 1}).contiguous().permute({1, 2, 0})});
  return v;
}

Tensor input_of(const json& c) {
  const json& in = c.at("input");
  return tensor_from_json(in.is_number() ? fixture().at("inputs").at(in.get<size_t>()) : in);
}

// Exact for integers (64-bit ones compared as integers), rtol_for(dtype) for floats.
::testing::AssertionResult matches(const Tensor& got, const json& want, double atol_scale = 1.0) {
  DType d = dtype_from_name(want.at("dtype").get<std::string>());
  if (got.dtype() != d) return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype());
  if (got.shape() != want.at("shape").get<Shape>())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape());
  if (d == DType::I64) {
    auto g = got.to_vector<int64_t>();
    auto w = want.at("data").get<std::vector<int64_t>>();
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] != w[i]) return ::testing::AssertionFailure() << "at " << i << ": " << g[i] << " vs " << w[i];
    return ::testing::AssertionSuccess();
  }
  double rtol = wick::test::rtol_for(d);
  double atol = d == DType::F32 ? 1e-5 : d == DType::F64 ? 1e-12 : rtol;
  return all_close(got, doubles_from_json(want.at("data")), rtol, atol * atol_scale);
}

std::vector<int64_t> dims_of(const json& c) { return c.at("dims").get<std::vector<int64_t>>(); }

class ByDType : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(AllDTypes, ByDType, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

bool elementwise_available() {
  try {
    Tensor::ones({1}, DType::F32).exp();
    return true;
  } catch (const Error& e) {
    return e.kind() != ErrorKind::Unsupported;
  }
}

}  // namespace

TEST_P(ByDType, ReduceMatchesNumpy) {
  const std::string dt = dtype_name(GetParam());
  int n = 0;
  for (const json& c : fixture().at("reduce")) {
    if (c.at("dtype") != dt) continue;
    for (auto& [lname, t0] : layouts(input_of(c))) {
      Tensor t = c.contains("broadcast_to") ? t0.broadcast_as(c.at("broadcast_to").get<Shape>()) : t0;
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + dt + " " + lname);
      const std::string op = c.at("op");
      const bool keep = c.at("keepdim");
      Tensor got;
      if (op == "sum") got = t.sum(dims_of(c), keep);
      else if (op == "max") got = t.max(dims_of(c), keep);
      else if (op == "min") got = t.min(dims_of(c), keep);
      else if (op == "argmax") got = t.argmax(dims_of(c)[0], keep);
      else if (op == "argmin") got = t.argmin(dims_of(c)[0], keep);
      EXPECT_TRUE(matches(got, c.at("want")));
      ++n;
    }
  }
  EXPECT_GT(n, 100);
}

TEST_P(ByDType, CumsumMatchesNumpy) {
  const std::string dt = dtype_name(GetParam());
  int n = 0;
  for (const json& c : fixture().at("cumsum")) {
    if (c.at("dtype") != dt) continue;
    for (auto& [lname, t0] : layouts(input_of(c))) {
      Tensor t = c.contains("broadcast_to") ? t0.broadcast_as(c.at("broadcast_to").get<Shape>()) : t0;
      SCOPED_TRACE(dt + " dim " + std::to_string(c.at("dim").get<int>()) + " " + lname);
      EXPECT_TRUE(matches(t.cumsum(c.at("dim").get<int64_t>()), c.at("want"), 4.0));
      ++n;
    }
  }
  EXPECT_GT(n, 10);
}

TEST_P(ByDType, ArgSortStableMatchesReference) {
  const std::string dt = dtype_name(GetParam());
  int n = 0;
  for (const json& c : fixture().at("sort")) {
    if (c.at("dtype") != dt) continue;
    const bool asc = c.at("ascending");
    for (auto& [lname, t] : layouts(input_of(c))) {
      SCOPED_TRACE(dt + (asc ? " ascending " : " descending ") + lname);
      EXPECT_TRUE(matches(t.arg_sort_last_dim(asc), c.at("want_idx")));
      auto [vals, idx] = t.sort_last_dim(asc);
      EXPECT_TRUE(matches(idx, c.at("want_idx")));
      EXPECT_TRUE(matches(vals, c.at("want_vals")));
      ++n;
    }
  }
  EXPECT_GT(n, 4);
}

TEST_P(ByDType, TopKMatchesNumpy) {
  const std::string dt = dtype_name(GetParam());
  int n = 0;
  for (const json& c : fixture().at("top_k")) {
    if (c.at("dtype") != dt) continue;
    const size_t k = c.at("k");
    for (auto& [lname, t] : layouts(input_of(c))) {
      SCOPED_TRACE(dt + " k=" + std::to_string(k) + " " + lname);
      auto [vals, idx] = t.top_k_last_dim(k);
      EXPECT_TRUE(matches(idx, c.at("want_idx")));
      EXPECT_TRUE(matches(vals, c.at("want_vals")));
      ++n;
    }
  }
  EXPECT_GT(n, 4);
}

TEST_P(ByDType, MeanVarLogSumExpNormMatchNumpy) {
  const DType d = GetParam();
  if (!dtype_is_float(d)) {
    Tensor t = Tensor::ones({2, 3}, d);
    EXPECT_THROW(t.mean({0}), Error);
    EXPECT_THROW(t.var({0}), Error);
    EXPECT_THROW(t.log_sum_exp({0}), Error);
    EXPECT_THROW(t.norm(), Error);
    return;
  }
  if (!elementwise_available()) GTEST_SKIP() << "element-wise ops are not implemented yet";
  const std::string dt = dtype_name(d);
  int n = 0;
  for (const json& c : fixture().at("stats")) {
    if (c.at("dtype") != dt) continue;
    const std::string op = c.at("op");
    for (auto& [lname, t] : layouts(input_of(c))) {
      SCOPED_TRACE(op + " " + dt + " " + lname + " dims " + c.at("dims").dump());
      const bool keep = c.at("keepdim");
      Tensor got;
      if (op == "mean") got = t.mean(dims_of(c), keep);
      else if (op == "var") got = t.var(dims_of(c), keep, c.at("unbiased").get<bool>());
      else if (op == "log_sum_exp") got = t.log_sum_exp(dims_of(c), keep);
      else got = t.norm();
      EXPECT_TRUE(matches(got, c.at("want"), 4.0));
      ++n;
    }
  }
  EXPECT_GT(n, 10);
}

// ---- hand-computed cases

TEST(Reduce, IntegerSumsWrapInTheirType) {
  EXPECT_EQ(Tensor::from_vector<uint8_t>({200, 100}, {2}).sum_all().item<uint8_t>(), 44);  // 300 mod 256
  EXPECT_EQ(Tensor::from_vector<int16_t>({32767, 2}, {2}).sum_all().item<int16_t>(), -32767);
  EXPECT_EQ(Tensor::from_vector<int32_t>({INT32_MAX, 1}, {2}).sum_all().item<int32_t>(), INT32_MIN);
  EXPECT_EQ(Tensor::from_vector<int64_t>({INT64_MAX, 1}, {2}).sum_all().item<int64_t>(), INT64_MIN);
  EXPECT_EQ(Tensor::from_vector<uint32_t>({4294967295u, 2u}, {2}).sum_all().item<uint32_t>(), 1u);
  EXPECT_EQ(Tensor::from_vector<uint8_t>({250, 10, 3}, {3}).cumsum(0).to_vector<uint8_t>(),
            (std::vector<uint8_t>{250, 4, 7}));
}

TEST(Reduce, HalfSumsAccumulateInF32) {
  // 4096 ones + 1: an f16 running sum would stall at 2048 (ulp 2 there); f32 gets 4097 -> 4096 in f16.
  Tensor t = Tensor::ones({4097}, DType::F16);
  EXPECT_EQ(t.sum_all().to_scalar_double(), 4096.0);
  Tensor b = Tensor::ones({3000}, DType::BF16);  // a bf16 running sum stalls at 256
  EXPECT_EQ(b.sum_all().to_scalar_double(), 3008.0);  // 3000 rounded to bf16 (ulp 16)
  EXPECT_EQ(Tensor::ones({3000}, DType::F16).cumsum(0).narrow(0, 2999, 1).to_scalar_double(), 3000.0);
}

TEST(Reduce, EmptyTensors) {
  Tensor e = Tensor::zeros({0, 3}, DType::F32);
  Tensor s0 = e.sum({0});
  EXPECT_EQ(s0.shape(), (Shape{3}));
  EXPECT_TRUE(all_close(s0, {0, 0, 0}));
  EXPECT_EQ(e.sum({1}).shape(), (Shape{0}));
  EXPECT_EQ(e.max({1}).shape(), (Shape{0}));  // nothing to reduce per (absent) row: fine
  EXPECT_EQ(e.sum_all().to_scalar_double(), 0.0);
  EXPECT_EQ(Tensor::zeros({0}, DType::I32).sum_all().item<int32_t>(), 0);
  EXPECT_THROW(e.max({0}), Error);
  EXPECT_THROW(e.min({0}), Error);
  EXPECT_THROW(e.argmax(0), Error);
  EXPECT_THROW(e.argmin(0), Error);
  try {
    e.max({0});
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Shape);
    EXPECT_NE(std::string(err.what()).find("max"), std::string::npos);
  }
  EXPECT_EQ(e.cumsum(0).shape(), (Shape{0, 3}));
  EXPECT_EQ(Tensor::zeros({3, 0}, DType::F32).arg_sort_last_dim().shape(), (Shape{3, 0}));
  EXPECT_EQ(Tensor::zeros({3, 0}, DType::F32).sort_last_dim().first.shape(), (Shape{3, 0}));
}

TEST(Reduce, ShapesKeepdimAndDtypes) {
  Tensor t = Tensor::arange(0, 24, 1, DType::F32).reshape({2, 3, 4});
  EXPECT_EQ(t.sum({1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(t.sum({1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(t.sum({0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(t.max({-1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(t.argmax(1).dtype(), DType::U32);
  EXPECT_EQ(t.argmin(1, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(t.sum_all().shape(), (Shape{}));
  EXPECT_EQ(t.sum_all().to_scalar_double(), 276.0);  // 23 * 24 / 2
  std::vector<double> iota(24);
  std::iota(iota.begin(), iota.end(), 0.0);
  EXPECT_TRUE(all_close(t.sum({}), iota));  // no dims: nothing reduced (Candle)
  EXPECT_EQ(t.sum({}).shape(), (Shape{2, 3, 4}));
}

TEST(Reduce, ScalarTensors) {
  Tensor s = Tensor::full({}, 7, DType::I32);
  EXPECT_EQ(s.sum_all().item<int32_t>(), 7);
  EXPECT_EQ(s.max({}).item<int32_t>(), 7);
  EXPECT_EQ(s.cumsum(0).item<int32_t>(), 7);
  EXPECT_EQ(s.arg_sort_last_dim().item<uint32_t>(), 0u);
}

TEST(Reduce, BadArgumentsThrow) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32);
  EXPECT_THROW(t.sum({2}), Error);
  EXPECT_THROW(t.sum({0, 0}), Error);
  EXPECT_THROW(t.sum({0, -2}), Error);  // the same dim twice
  EXPECT_THROW(t.max({-3}), Error);
  EXPECT_THROW(t.argmax(5), Error);
  EXPECT_THROW(t.cumsum(2), Error);
  EXPECT_THROW(Tensor().sum_all(), Error);
  EXPECT_THROW(Tensor().arg_sort_last_dim(), Error);
  try {
    t.sum({3});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Shape);
  }
}

TEST(Reduce, LargeContiguousSums) {
  // arange(0, n) sums to n(n-1)/2; big enough for the parallel split path.
  const size_t n = 300000;
  Tensor a = Tensor::arange(0, double(n), 1, DType::F32);
  const double want = double(n) * double(n - 1) / 2;
  EXPECT_NEAR(a.sum_all().to_scalar_double(), want, want * 1e-6);
  EXPECT_NEAR(a.reshape({1, n}).sum({1}).to_scalar_double(), want, want * 1e-6);
  EXPECT_NEAR(a.reshape({n, 1}).sum({0}).to_scalar_double(), want, want * 1e-6);
  EXPECT_EQ(a.argmax(0).item<uint32_t>(), n - 1);
  EXPECT_EQ(a.argmin(0).item<uint32_t>(), 0u);
  EXPECT_EQ(a.max({0}).to_scalar_double(), double(n - 1));
  EXPECT_EQ(a.to_dtype(DType::I64).sum_all().item<int64_t>(), int64_t(want));
  // Dim-0 sums of a tall matrix (row-accumulate path) and last-dim sums.
  Tensor ones = Tensor::ones({4096, 96}, DType::F32);
  EXPECT_TRUE(all_close(ones.sum({0}), std::vector<double>(96, 4096.0)));
  EXPECT_TRUE(all_close(ones.t().sum({1}), std::vector<double>(96, 4096.0)));
  EXPECT_TRUE(all_close(ones.sum({1}), std::vector<double>(4096, 96.0)));
}

TEST(Reduce, F32SumIsAccurate) {
  // Compared with a plain f64 loop over the same values (independent of the kernel).
  const size_t n = size_t(1) << 21;
  Tensor r = Tensor::randn({n}, DType::F32, Device::cpu(), 11, 1.0, 1.0);
  auto v = r.to_vector<float>();
  double want = 0, abs_sum = 0;
  for (float x : v) want += x, abs_sum += std::fabs(x);
  EXPECT_NEAR(r.sum_all().to_scalar_double(), want, abs_sum * 1e-7);
  // Same data, reduced along dim 0 of a (n/64, 64) view: the cascade keeps column sums close.
  Tensor m = r.reshape({n / 64, 64});
  auto cols = m.sum({0}).to_vector<float>();
  for (size_t c = 0; c < 64; ++c) {
    double w = 0, a = 0;
    for (size_t i = 0; i < n / 64; ++i) w += v[i * 64 + c], a += std::fabs(v[i * 64 + c]);
    EXPECT_NEAR(cols[c], w, a * 2e-6) << c;
  }
}

TEST(Reduce, NaNPropagatesAndArgPicksFirstNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(1000, 1.0f);
  v[10] = 5.0f;
  v[500] = nan;
  v[700] = nan;
  Tensor t = Tensor::from_vector(v, {1000});
  EXPECT_TRUE(std::isnan(t.max({0}).item<float>()));
  EXPECT_TRUE(std::isnan(t.min({0}).item<float>()));
  EXPECT_EQ(t.argmax(0).item<uint32_t>(), 500u);
  EXPECT_EQ(t.argmin(0).item<uint32_t>(), 500u);
  EXPECT_TRUE(std::isnan(t.sum_all().item<float>()));
  // Ties: the first index wins.
  Tensor ties = Tensor::from_vector<float>({1, 3, 3, 0, 0, 3}, {6});
  EXPECT_EQ(ties.argmax(0).item<uint32_t>(), 1u);
  EXPECT_EQ(ties.argmin(0).item<uint32_t>(), 3u);
}

TEST(Sort, LongRowsStableWithTies) {
  // Rows of 5000 keys in {0..9}: checks the order and stability by definition.
  const size_t n = 5000;
  std::vector<int32_t> v(3 * n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 7919) % 10);
  Tensor t = Tensor::from_vector(v, {3, n});
  for (bool asc : {true, false}) {
    auto idx = t.arg_sort_last_dim(asc).to_vector<uint32_t>();
    for (size_t r = 0; r < 3; ++r) {
      std::vector<bool> seen(n, false);
      for (size_t j = 0; j < n; ++j) {
        uint32_t k = idx[r * n + j];
        ASSERT_LT(k, n);
        ASSERT_FALSE(seen[k]);
        seen[k] = true;
        if (j == 0) continue;
        uint32_t p = idx[r * n + j - 1];
        int32_t a = v[r * n + p], b = v[r * n + k];
        ASSERT_TRUE(asc ? a <= b : a >= b);
        if (a == b) ASSERT_LT(p, k);  // stable
      }
    }
  }
}

TEST(Sort, NaNOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor t = Tensor::from_vector<float>({2, nan, -1, nan, 2, -INFINITY}, {6});
  EXPECT_EQ(t.arg_sort_last_dim(true).to_vector<uint32_t>(), (std::vector<uint32_t>{5, 2, 0, 4, 1, 3}));
  EXPECT_EQ(t.arg_sort_last_dim(false).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 3, 0, 4, 2, 5}));
  auto [vals, idx] = t.sort_last_dim(true);
  auto vv = vals.to_vector<float>();
  EXPECT_EQ(vv[0], -INFINITY);
  EXPECT_EQ(vv[3], 2.0f);
  EXPECT_TRUE(std::isnan(vv[5]));
  // -0.0 equals 0.0: a stable sort keeps their order both ways.
  Tensor z = Tensor::from_vector<float>({0.0f, -0.0f, 0.0f, -0.0f}, {4});
  EXPECT_EQ(z.arg_sort_last_dim(true).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(z.arg_sort_last_dim(false).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1, 2, 3}));
  std::vector<float> zl(100);
  for (size_t i = 0; i < zl.size(); ++i) zl[i] = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : -1.0f);
  auto zi = Tensor::from_vector(zl, {100}).arg_sort_last_dim(true).to_vector<uint32_t>();  // radix path
  for (size_t j = 0; j < 33; ++j) EXPECT_EQ(zi[j], 3 * j + 2);
  for (size_t j = 33; j < 100; ++j) EXPECT_EQ(zi[j], j - 33 + (j - 33) / 2);  // 0,1,3,4,6,... in order
}

// ---- top_k: the first k of arg_sort descending

namespace {

std::vector<uint32_t> top_k_idx(const Tensor& t, size_t k) { return t.top_k_last_dim(k).second.to_vector<uint32_t>(); }

}  // namespace

TEST(TopK, TiesTakeTheLowerIndexFirst) {
  Tensor t = Tensor::from_vector<float>({1, 3, 2, 3, 0, 3, 2}, {7});
  EXPECT_EQ(top_k_idx(t, 1), (std::vector<uint32_t>{1}));
  EXPECT_EQ(top_k_idx(t, 2), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(top_k_idx(t, 5), (std::vector<uint32_t>{1, 3, 5, 2, 6}));
  auto [vals, idx] = t.top_k_last_dim(4);
  EXPECT_EQ(vals.to_vector<float>(), (std::vector<float>{3, 3, 3, 2}));
  EXPECT_EQ(vals.shape(), (Shape{4}));
  EXPECT_EQ(idx.dtype(), DType::U32);
}

TEST(TopK, NaNComesFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor t = Tensor::from_vector<float>({2, nan, -1, nan, INFINITY, -INFINITY}, {6});
  EXPECT_EQ(top_k_idx(t, 3), (std::vector<uint32_t>{1, 3, 4}));
  auto v = t.top_k_last_dim(4).first.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], INFINITY);
  EXPECT_EQ(v[3], 2.0f);
}

TEST(TopK, NegativeZeroTiesZero) {
  Tensor t = Tensor::from_vector<float>({-1.0f, -0.0f, 0.0f, -0.0f, -2.0f}, {5});
  EXPECT_EQ(top_k_idx(t, 3), (std::vector<uint32_t>{1, 2, 3}));
  auto v = t.top_k_last_dim(3).first.to_vector<float>();
  EXPECT_TRUE(std::signbit(v[0]));  // the values are the input's own, sign included
  EXPECT_FALSE(std::signbit(v[1]));
}

TEST(TopK, KEqualsNIsArgSortDescending) {
  // Hand order of the descending stable sort: 5 (2x, by index), 4, 1 (2x), 0, -3.
  Tensor t = Tensor::from_vector<int32_t>({1, 5, -3, 5, 0, 4, 1}, {7});
  const std::vector<uint32_t> want{1, 3, 5, 0, 6, 4, 2};
  EXPECT_EQ(top_k_idx(t, 7), want);
  EXPECT_EQ(t.arg_sort_last_dim(false).to_vector<uint32_t>(), want);
  EXPECT_EQ(t.top_k_last_dim(7).first.to_vector<int32_t>(), (std::vector<int32_t>{5, 5, 4, 1, 1, 0, -3}));
}

TEST(TopK, KOneIsArgmax) {
  Tensor t = Tensor::randn({9, 40}, DType::F32, Device::cpu(), 3).affine(3, 0).round();  // ties, no NaN
  auto [vals, idx] = t.top_k_last_dim(1);
  EXPECT_EQ(idx.shape(), (Shape{9, 1}));
  EXPECT_EQ(idx.to_vector<uint32_t>(), t.argmax(-1).to_vector<uint32_t>());
  EXPECT_EQ(vals.to_vector<float>(), t.max({-1}).to_vector<float>());
}

TEST(TopK, StridedInput) {
  // m is (3, 4) stored transposed: rows of t are m's columns.
  Tensor m = Tensor::from_vector<float>({4, 1, 7, 0, 9, 3, 2, 5, 6, 8, 6, 1}, {3, 4});
  Tensor t = m.t();  // (4, 3): {4,9,6}, {1,3,8}, {7,2,6}, {0,5,1}
  ASSERT_FALSE(t.is_contiguous());
  auto [vals, idx] = t.top_k_last_dim(2);
  EXPECT_EQ(idx.shape(), (Shape{4, 2}));
  EXPECT_EQ(idx.to_vector<uint32_t>(), (std::vector<uint32_t>{1, 2, 2, 1, 0, 2, 1, 2}));
  EXPECT_EQ(vals.to_vector<float>(), (std::vector<float>{9, 6, 8, 3, 7, 6, 5, 1}));
  // A column slice with an offset: rows {1,7}, {3,2}, {8,6} of m's columns 1..2.
  auto [v2, i2] = m.narrow(1, 1, 2).top_k_last_dim(1);
  EXPECT_EQ(i2.to_vector<uint32_t>(), (std::vector<uint32_t>{1, 0, 0}));
  EXPECT_EQ(v2.to_vector<float>(), (std::vector<float>{7, 3, 8}));
}

TEST(TopK, HalfAndIntegerDTypes) {
  Tensor f = Tensor::from_vector<float>({0.5f, -1.5f, 2.0f, 0.5f, 3.0f}, {5});
  for (DType d : {DType::F16, DType::BF16}) {
    auto [vals, idx] = f.to_dtype(d).top_k_last_dim(3);
    EXPECT_EQ(vals.dtype(), d);
    EXPECT_EQ(idx.to_vector<uint32_t>(), (std::vector<uint32_t>{4, 2, 0}));
    EXPECT_EQ(vals.to_dtype(DType::F32).to_vector<float>(), (std::vector<float>{3, 2, 0.5f}));
  }
  Tensor i = Tensor::from_vector<int64_t>({INT64_MIN, -1, INT64_MAX, 0, INT64_MAX}, {5});
  auto [iv, ii] = i.top_k_last_dim(4);
  EXPECT_EQ(ii.to_vector<uint32_t>(), (std::vector<uint32_t>{2, 4, 3, 1}));
  EXPECT_EQ(iv.to_vector<int64_t>(), (std::vector<int64_t>{INT64_MAX, INT64_MAX, 0, -1}));
  Tensor u = Tensor::from_vector<uint8_t>({7, 255, 0, 128, 255}, {5});  // unsigned: 255 is the largest
  auto [uv, ui] = u.top_k_last_dim(3);
  EXPECT_EQ(ui.to_vector<uint32_t>(), (std::vector<uint32_t>{1, 4, 3}));
  EXPECT_EQ(uv.to_vector<uint8_t>(), (std::vector<uint8_t>{255, 255, 128}));
}

TEST(TopK, MultiDim) {
  // (2, 3, 4): row r holds (r * 5) % 7 + {0, 3, 1, 3} -> top 2 at indices 1, 3 in every row.
  std::vector<float> v;
  for (int r = 0; r < 6; ++r)
    for (float d : {0.0f, 3.0f, 1.0f, 3.0f}) v.push_back(float((r * 5) % 7) + d);
  Tensor t = Tensor::from_vector(v, {2, 3, 4});
  auto [vals, idx] = t.top_k_last_dim(2);
  EXPECT_EQ(idx.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals.shape(), (Shape{2, 3, 2}));
  auto iv = idx.to_vector<uint32_t>();
  auto vv = vals.to_vector<float>();
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(iv[2 * r], 1u);
    EXPECT_EQ(iv[2 * r + 1], 3u);
    EXPECT_EQ(vv[2 * r], float((r * 5) % 7 + 3));
  }
  // A permuted (non-contiguous) view of the same logical tensor gives the same answer.
  Tensor p = t.permute({2, 0, 1}).contiguous().permute({1, 2, 0});
  EXPECT_EQ(p.top_k_last_dim(2).second.to_vector<uint32_t>(), iv);
  EXPECT_EQ(Tensor::zeros({0, 5}, DType::F32).top_k_last_dim(3).first.shape(), (Shape{0, 3}));
}

TEST(TopK, LongRowsBothPaths) {
  // Rows of 5000 keys in {0..9}: the descending order is every 9 by index, then every 8, ...
  // k = 40 takes the heap path, k = 3000 the nth_element path, k = 5000 the whole row.
  const size_t n = 5000;
  std::vector<int32_t> v(2 * n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 7919) % 10);
  Tensor t = Tensor::from_vector(v, {2, n});
  for (size_t k : {size_t(40), size_t(3000), n}) {
    auto idx = top_k_idx(t, k);
    ASSERT_EQ(idx.size(), 2 * k);
    for (size_t r = 0; r < 2; ++r) {
      std::vector<uint32_t> want;
      for (int32_t key = 9; key >= 0 && want.size() < k; --key)
        for (size_t j = 0; j < n && want.size() < k; ++j)
          if (v[r * n + j] == key) want.push_back(uint32_t(j));
      EXPECT_EQ(std::vector<uint32_t>(idx.begin() + int64_t(r * k), idx.begin() + int64_t((r + 1) * k)), want)
          << "k=" << k << " row " << r;
    }
  }
}

TEST(TopK, BadKThrowsNamingTheOp) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32);
  for (size_t k : {size_t(0), size_t(4)}) {
    try {
      t.top_k_last_dim(k);
      ADD_FAILURE() << "k=" << k << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Argument);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("top_k_last_dim"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[1, 3]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    }
  }
  try {
    Tensor::full({}, 1, DType::F32).top_k_last_dim(1);
    ADD_FAILURE() << "rank 0 did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Argument);
    EXPECT_NE(std::string(e.what()).find("top_k_last_dim"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor().top_k_last_dim(1), Error);
}

TEST(Cumsum, LargeAlongEveryDim) {
  // cumsum of ones along dim d at position k is k + 1.
  Tensor t = Tensor::ones({70, 3, 50}, DType::F32);
  for (int64_t d = 0; d < 3; ++d) {
    auto got = t.cumsum(d).to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) {
      size_t idx[3] = {i / 150, (i / 50) % 3, i % 50};
      ASSERT_EQ(got[i], float(idx[d] + 1)) << d << " " << i;
    }
  }
  const size_t n = 200000;  // f32 integers stay exact below 2^24
  auto c = Tensor::ones({n}, DType::F32).cumsum(0).to_vector<float>();
  EXPECT_EQ(c[n - 1], float(n));
  auto ct = Tensor::ones({2, n}, DType::F32).t().cumsum(0).to_vector<float>();  // strided scan
  EXPECT_EQ(ct[2 * n - 1], float(n));
}

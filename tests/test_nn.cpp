// Fused nn ops on the CPU: softmax/log_softmax, rms/layer norm, rope (3 kinds), silu_mul/swiglu,
// attention. Expected values come from tests/fixtures/nn.json (gen_nn.py: PyTorch or NumPy in
// f64) or from hand arithmetic here. Fixture inputs are exact in each dtype a case lists.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/quant_encode.hpp"
#include "test_util.hpp"
#include "wick/fast.hpp"
#include "wick/quant.hpp"

using namespace wick;
using nlohmann::json;
using wick::test::all_close;
using wick::test::as_offset;
using wick::test::as_transposed;
using wick::test::doubles_from_json;

namespace {

const json& fixture() {
  static json j = wick::test::load_json_fixture("nn.json");
  return j;
}

const DType kFloatDTypes[] = {DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8E4M3};

// {"shape", "data"} -> a CPU tensor of dtype dt (the values are exact in it).
Tensor tensor_of(const json& j, DType dt) {
  return Tensor::from_vector(doubles_from_json(j.at("data")), j.at("shape").get<Shape>()).to_dtype(dt);
}

bool applies(const json& c, DType dt) {
  for (const auto& d : c.at("dtypes"))
    if (d.get<std::string>() == dtype_name(dt)) return true;
  return false;
}

// Outputs are rounded once to dt; atol covers results near 0 (f8e4m3's subnormal step is 2^-9).
double atol_for(DType dt) {
  switch (dt) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-6;
    case DType::F8E4M3: return 2e-3;
    default: return 1e-4;
  }
}

::testing::AssertionResult close(const Tensor& got, DType dt, const Shape& shape, const std::vector<double>& want,
                                 double scale = 1.0) {
  if (got.dtype() != dt) return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype());
  if (got.shape() != shape) return ::testing::AssertionFailure() << "shape " << shape_str(got.shape());
  return all_close(got, want, wick::test::rtol_for(dt) * scale, atol_for(dt) * scale);
}

// The same values in several layouts: contiguous, offset, and transposed storage (rank >= 2).
std::vector<std::pair<std::string, Tensor>> layouts(const Tensor& t) {
  std::vector<std::pair<std::string, Tensor>> v{{"contiguous", t}, {"offset", as_offset(t)}};
  if (t.rank() >= 2) v.push_back({"transposed", as_transposed(t)});
  return v;
}

// A (b, h, t, d) tensor whose storage is (b, t, h, d): strided on the b/h/t dims, unit last dim.
Tensor as_bthd(const Tensor& t) { return t.transpose(1, 2).contiguous().transpose(1, 2); }

class ByFloat : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Floats, ByFloat, ::testing::ValuesIn(kFloatDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class ByAttnFloat : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(AttnFloats, ByAttnFloat,
                         ::testing::Values(DType::BF16, DType::F16, DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace

TEST(NnFixture, HasSourceAndCases) {
  EXPECT_TRUE(fixture().at("source").get<std::string>().rfind("torch", 0) == 0 ||
              fixture().at("source").get<std::string>().rfind("numpy", 0) == 0);
  for (const char* k : {"softmax", "norm", "rope", "silu_mul", "attention"}) EXPECT_GT(fixture().at(k).size(), 3u) << k;
}

TEST_P(ByFloat, SoftmaxMatchesFixture) {
  const DType dt = GetParam();
  int n = 0;
  for (const json& c : fixture().at("softmax")) {
    if (!applies(c, dt)) continue;
    Tensor x0 = tensor_of(c.at("x"), dt);
    for (auto& [lname, x] : layouts(x0)) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + lname);
      EXPECT_TRUE(close(x.softmax_last_dim(), dt, x0.shape(), doubles_from_json(c.at("softmax"))));
      EXPECT_TRUE(close(x.log_softmax_last_dim(), dt, x0.shape(), doubles_from_json(c.at("log_softmax"))));
      ++n;
    }
  }
  EXPECT_GT(n, 5);
}

TEST_P(ByFloat, NormMatchesFixture) {
  const DType dt = GetParam();
  int n = 0;
  for (const json& c : fixture().at("norm")) {
    if (!applies(c, dt)) continue;
    const double eps = c.at("eps").get<double>();
    Tensor x0 = tensor_of(c.at("x"), dt), w = tensor_of(c.at("weight"), dt), b = tensor_of(c.at("bias"), dt);
    for (auto& [lname, x] : layouts(x0)) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + lname);
      const Shape s = x0.shape();
      EXPECT_TRUE(close(x.rms_norm(Tensor(), eps), dt, s, doubles_from_json(c.at("rms"))));
      EXPECT_TRUE(close(x.rms_norm(w, eps), dt, s, doubles_from_json(c.at("rms_w"))));
      EXPECT_TRUE(close(x.layer_norm(Tensor(), Tensor(), eps), dt, s, doubles_from_json(c.at("ln"))));
      EXPECT_TRUE(close(x.layer_norm(w, Tensor(), eps), dt, s, doubles_from_json(c.at("ln_w"))));
      EXPECT_TRUE(close(x.layer_norm(w, b, eps), dt, s, doubles_from_json(c.at("ln_wb"))));
      // weight and bias as offset views (the backend gets their start offsets)
      EXPECT_TRUE(close(x.layer_norm(as_offset(w), as_offset(b), eps), dt, s, doubles_from_json(c.at("ln_wb"))));
      EXPECT_TRUE(close(x.rms_norm(as_offset(w), eps), dt, s, doubles_from_json(c.at("rms_w"))));
      ++n;
    }
  }
  EXPECT_GT(n, 5);
}

TEST_P(ByFloat, RopeMatchesFixture) {
  const DType dt = GetParam();
  int n = 0;
  for (const json& c : fixture().at("rope")) {
    if (!applies(c, dt)) continue;
    const std::string kind = c.at("kind");
    Tensor x0 = tensor_of(c.at("x"), dt), cs = tensor_of(c.at("cos"), dt), sn = tensor_of(c.at("sin"), dt);
    auto run = [&](const Tensor& x, const Tensor& co, const Tensor& si) {
      return kind == "rope_i" ? x.rope_i(co, si) : kind == "rope" ? x.rope(co, si) : x.rope_thd(co, si);
    };
    const std::vector<double> want = doubles_from_json(c.at("out"));
    std::vector<std::pair<std::string, Tensor>> xs = {{"contiguous", x0}, {"offset", as_offset(x0)},
                                                       {"strided", as_bthd(x0)}};
    for (auto& [lname, x] : xs) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + lname);
      EXPECT_TRUE(close(run(x, cs, sn), dt, x0.shape(), want));
      ++n;
    }
    SCOPED_TRACE(c.at("name").get<std::string>() + " cos/sin offset and transposed");
    EXPECT_TRUE(close(run(x0, as_offset(cs), as_offset(sn)), dt, x0.shape(), want));
    EXPECT_TRUE(close(run(x0, as_transposed(cs), as_transposed(sn)), dt, x0.shape(), want));
  }
  EXPECT_GE(n, 18);
}

// rope_kv_append against the rope fixture (PyTorch): heads [0, q_heads) of the expected output
// come back, heads [q_heads, h) land in a k cache at rows [r, r + t) and v in a v cache, every other
// cache row keeps its value; r = start clamped to [0, capacity - t]; caches contiguous or strided.
TEST_P(ByFloat, RopeKvAppendMatchesFixture) {
  const DType dt = GetParam();
  int n = 0;
  for (const json& c : fixture().at("rope")) {
    const std::string kind = c.at("kind");
    if (!applies(c, dt) || kind == "rope_thd") continue;
    const Tensor x = tensor_of(c.at("x"), dt), cs = tensor_of(c.at("cos"), dt), sn = tensor_of(c.at("sin"), dt);
    const std::vector<double> want = doubles_from_json(c.at("out"));
    const size_t b = x.dim(0), h = x.dim(1), t = x.dim(2), d = x.dim(3), cap = t + 4, dv = 6;
    for (size_t qh : {size_t(1), h - 1})
      for (bool strided : {false, true})
        for (int64_t start : {int64_t(0), int64_t(3), int64_t(100)}) {
          SCOPED_TRACE(c.at("name").get<std::string>() + " q_heads " + std::to_string(qh) +
                       (strided ? " strided" : "") + " start " + std::to_string(start));
          const size_t hkv = h - qh, r = size_t(std::min<int64_t>(start, int64_t(cap - t)));
          std::vector<double> vv(b * hkv * t * dv);
          for (size_t i = 0; i < vv.size(); ++i) vv[i] = double(int(i % 9) - 4) * 0.25;
          const Tensor v = Tensor::from_vector(vv, {b, hkv, t, dv}).to_dtype(dt);
          auto cache = [&](size_t w) {
            return strided ? Tensor::full({b, cap, hkv, w}, 5.0, dt).transpose(1, 2)
                           : Tensor::full({b, hkv, cap, w}, 5.0, dt);
          };
          Tensor kc = cache(d), vc = cache(dv);
          const Tensor q =
              fast::rope_kv_append(x, cs, sn, kind == "rope_i", qh, v, kc, vc, Tensor::full({1}, start, DType::I64));
          std::vector<double> wq, wk, wv;
          for (size_t bi = 0; bi < b; ++bi) {
            for (size_t hh = 0; hh < qh; ++hh)
              for (size_t i = 0; i < t * d; ++i) wq.push_back(want[(bi * h + hh) * t * d + i]);
            for (size_t kh = 0; kh < hkv; ++kh)
              for (size_t row = 0; row < cap; ++row) {
                const bool in = row >= r && row < r + t;
                for (size_t e = 0; e < d; ++e)
                  wk.push_back(in ? want[((bi * h + qh + kh) * t + row - r) * d + e] : 5.0);
                for (size_t e = 0; e < dv; ++e) wv.push_back(in ? vv[((bi * hkv + kh) * t + row - r) * dv + e] : 5.0);
              }
          }
          EXPECT_TRUE(close(q, dt, {b, qh, t, d}, wq));
          EXPECT_TRUE(close(kc, dt, {b, hkv, cap, d}, wk));
          EXPECT_TRUE(close(vc, dt, {b, hkv, cap, dv}, wv));
          ++n;
        }
  }
  EXPECT_GE(n, 48);
}

// rope_thd on (b, t, h, d) is rope on the (b, h, t, d) transpose (candle_nn's definition),
// checked against the fixture's rope_thd expectation through that transpose.
TEST_P(ByFloat, RopeThdIsRopeOfTranspose) {
  const DType dt = GetParam();
  for (const json& c : fixture().at("rope")) {
    if (!applies(c, dt) || c.at("kind") != "rope_thd") continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    Tensor x = tensor_of(c.at("x"), dt), cs = tensor_of(c.at("cos"), dt), sn = tensor_of(c.at("sin"), dt);
    Tensor via_rope = x.transpose(1, 2).rope(cs, sn).transpose(1, 2);
    EXPECT_TRUE(close(via_rope, dt, x.shape(), doubles_from_json(c.at("out"))));
  }
}

TEST_P(ByFloat, SiluMulMatchesFixture) {
  const DType dt = GetParam();
  int n = 0;
  for (const json& c : fixture().at("silu_mul")) {
    if (!applies(c, dt)) continue;
    Tensor a0 = tensor_of(c.at("a"), dt), b0 = tensor_of(c.at("b"), dt);
    const std::vector<double> want = doubles_from_json(c.at("out"));
    const Shape s = broadcast_shapes(a0.shape(), b0.shape(), "test");
    for (auto& [la, a] : layouts(a0))
      for (auto& [lb, b] : layouts(b0)) {
        SCOPED_TRACE(c.at("name").get<std::string>() + " " + la + " x " + lb);
        EXPECT_TRUE(close(a.silu_mul(b), dt, s, want));
        ++n;
      }
    // explicitly broadcast views (zero strides) of both operands
    SCOPED_TRACE(c.at("name").get<std::string>() + " broadcast views");
    EXPECT_TRUE(close(a0.broadcast_as(s).silu_mul(b0.broadcast_as(s)), dt, s, want));
    if (a0.shape() == b0.shape()) {
      // swiglu of [gate | up] along the last dim, contiguous and offset
      Tensor gu = Tensor::cat({a0, b0}, -1);
      EXPECT_TRUE(close(gu.swiglu(), dt, s, want));
      EXPECT_TRUE(close(as_offset(gu).swiglu(), dt, s, want));
    }
  }
  EXPECT_GT(n, 10);
}

TEST_P(ByAttnFloat, AttentionMatchesFixture) {
  const DType dt = GetParam();
  int n = 0;
  for (const json& c : fixture().at("attention")) {
    if (!applies(c, dt)) continue;
    Tensor q = tensor_of(c.at("q"), dt), k = tensor_of(c.at("k"), dt), v = tensor_of(c.at("v"), dt);
    const bool causal = c.at("causal").get<bool>();
    std::optional<double> scale;
    if (!c.at("scale").is_null()) scale = c.at("scale").get<double>();
    const std::vector<double> want = doubles_from_json(c.at("out"));
    const Shape s{q.dim(0), q.dim(1), q.dim(2), v.dim(3)};
    struct L {
      const char* name;
      Tensor q, k, v;
    };
    const std::vector<L> ls = {{"contiguous", q, k, v},
                               {"bthd", as_bthd(q), as_bthd(k), as_bthd(v)},
                               {"offset", as_offset(q), as_offset(k), as_offset(v)},
                               {"mixed", as_bthd(q), as_offset(k), as_bthd(v)},
                               // last dim not unit-stride: the core copies it
                               {"transposed", as_transposed(q), as_transposed(k), v}};
    for (const L& l : ls) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + l.name);
      // f32 exps over up to 150 keys: a little more than one rounding
      EXPECT_TRUE(close(attention(l.q, l.k, l.v, causal, scale), dt, s, want, dt == DType::F32 ? 3.0 : 1.0));
      ++n;
    }
  }
  EXPECT_GE(n, 40);
}

// A k/v shared by every batch through a zero stride gives what a materialised copy gives.
TEST_P(ByAttnFloat, AttentionBroadcastBatch) {
  const DType dt = GetParam();
  const json& c = fixture().at("attention").at(0);
  Tensor q = tensor_of(c.at("q"), dt), k = tensor_of(c.at("k"), dt), v = tensor_of(c.at("v"), dt);
  Tensor k1 = k.narrow(0, 0, 1), v1 = v.narrow(0, 0, 1);
  Tensor kb = k1.broadcast_as(k.shape()), vb = v1.broadcast_as(v.shape());
  Tensor got = attention(q, kb, vb, true);
  Tensor want = attention(q, kb.contiguous(), vb.contiguous(), true);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(all_close(got, wick::test::values(want), 0, 0));
}

// ---- hand arithmetic
TEST(NnHand, SoftmaxOfZeroAndLn3) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor x = Tensor::from_vector(std::vector<double>{0.0, std::log(3.0)}, {1, 2}).to_dtype(dt);
    const double tol = dt == DType::F64 ? 1e-15 : dt == DType::F32 ? 1e-6 : 1e-2;
    EXPECT_TRUE(all_close(x.softmax_last_dim(), {0.25, 0.75}, tol, tol)) << dtype_name(dt);
    EXPECT_TRUE(all_close(x.log_softmax_last_dim(), {std::log(0.25), std::log(0.75)}, tol, tol)) << dtype_name(dt);
  }
}

TEST(NnHand, SoftmaxSpecialRows) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = Tensor::from_vector(std::vector<double>{-inf, -inf, 1.0, 1.0, 5.0, -inf}, {3, 2});
  // all -inf -> NaN (as PyTorch: exp(-inf - -inf)); equal entries -> 1/2; -inf -> 0 / -inf
  EXPECT_TRUE(all_close(x.softmax_last_dim(), {NAN, NAN, 0.5, 0.5, 1.0, 0.0}, 1e-15, 1e-15));
  EXPECT_TRUE(all_close(x.log_softmax_last_dim(), {NAN, NAN, std::log(0.5), std::log(0.5), 0.0, -inf}, 1e-15, 1e-15));
  // A single column is always 1 (log 0).
  Tensor one = Tensor::from_vector(std::vector<float>{-3.f, 7.f}, {2, 1});
  EXPECT_TRUE(all_close(one.softmax_last_dim(), {1, 1}, 0, 0));
  EXPECT_TRUE(all_close(one.log_softmax_last_dim(), {0, 0}, 0, 0));
}

TEST(NnHand, Norms) {
  Tensor x = Tensor::from_vector(std::vector<double>{3, 4, 1, 2, 5, 9}, {2, 3}).narrow(1, 0, 2).contiguous();
  // rows [3, 4] and [2, 5]: mean(x^2) = 12.5 and 14.5
  EXPECT_TRUE(all_close(x.rms_norm(Tensor(), 0.0), {3 / std::sqrt(12.5), 4 / std::sqrt(12.5), 2 / std::sqrt(14.5),
                                                    5 / std::sqrt(14.5)}, 1e-15, 1e-15));
  Tensor y = Tensor::from_vector(std::vector<double>{1, 2, 3}, {1, 3});
  const double r = std::sqrt(1.5);  // 1 / sqrt(var = 2/3)
  EXPECT_TRUE(all_close(y.layer_norm(Tensor(), Tensor(), 0.0), {-r, 0, r}, 1e-15, 1e-15));
  Tensor w = Tensor::from_vector(std::vector<double>{2, 3, 4}, {3}), b = Tensor::from_vector(std::vector<double>{1, 1, -1}, {3});
  EXPECT_TRUE(all_close(y.layer_norm(w, b, 0.0), {1 - 2 * r, 1, 4 * r - 1}, 1e-15, 1e-15));
  // eps dominates a constant row: (x - mean) = 0 -> bias
  Tensor c = Tensor::full({2, 4}, 7.0, DType::F32);
  EXPECT_TRUE(all_close(c.layer_norm(Tensor(), Tensor(), 1e-5), std::vector<double>(8, 0.0), 0, 0));
  // rms_norm of a constant row: x / |x|
  EXPECT_TRUE(all_close(c.rms_norm(Tensor(), 0.0), std::vector<double>(8, 1.0), 1e-6, 1e-6));
}

TEST(NnHand, AddRmsNorm) {
  // rows [1, 2] + [2, 2] = [3, 4] and [2, 5] + [0, 0]: mean of squares 12.5 and 14.5, times weight [1, 2]
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 2, 5}, {2, 2});
  Tensor r = Tensor::from_vector(std::vector<double>{2, 2, 0, 0}, {2, 2});
  Tensor w = Tensor::from_vector(std::vector<double>{1, 2}, {2});
  auto [s, y] = x.add_rms_norm(r, w, 0.0);
  EXPECT_TRUE(all_close(s, {3, 4, 2, 5}, 0, 0));
  EXPECT_TRUE(all_close(y, {3 / std::sqrt(12.5), 8 / std::sqrt(12.5), 2 / std::sqrt(14.5), 10 / std::sqrt(14.5)}, 1e-15,
                        1e-15));
  // Its contract: add then rms_norm, bit for bit, in every float dtype, with strided and offset inputs.
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::F8E4M3}) {
    std::vector<float> a(3 * 70), b(3 * 70);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = std::sin(0.37f * float(i)) * 3.0f;
      b[i] = std::cos(0.11f * float(i)) * 0.5f;
    }
    Tensor xa = Tensor::from_vector(a, {3, 70}).to_dtype(dt).narrow(1, 3, 64);
    Tensor rb = Tensor::from_vector(b, {70, 3}).to_dtype(dt).t().narrow(1, 1, 64);  // a transposed view
    Tensor wt = Tensor::from_vector(std::vector<float>(64, 0.75f), {64}).to_dtype(dt);
    auto [s2, y2] = xa.add_rms_norm(rb, wt, 1e-6);
    const Tensor s_ref = xa.add(rb), y_ref = s_ref.rms_norm(wt, 1e-6);
    EXPECT_TRUE(all_close(s2, test::values(s_ref), 0, 0)) << dtype_name(dt);
    EXPECT_TRUE(all_close(y2, test::values(y_ref), 0, 0)) << dtype_name(dt);
    EXPECT_EQ(s2.dtype(), dt);
    EXPECT_EQ(y2.shape(), (Shape{3, 64}));
  }
  // Bad input: another shape, dtype or a missing residual names the op and the shapes.
  Tensor f = Tensor::zeros({2, 4}, DType::F32);
  EXPECT_THROW(f.add_rms_norm(Tensor::zeros({1, 4}, DType::F32), Tensor(), 1e-5), Error);
  EXPECT_THROW(f.add_rms_norm(Tensor::zeros({2, 4}, DType::F16), Tensor(), 1e-5), Error);
  EXPECT_THROW(f.add_rms_norm(Tensor(), Tensor(), 1e-5), Error);
  try {
    f.add_rms_norm(Tensor::zeros({2, 3}, DType::F32), Tensor(), 1e-5);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_rms_norm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

TEST(NnHand, RopeQuarterTurn) {
  // One pair rotated by 90 degrees: (x0, x1) -> (-x1, x0).
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {1, 1, 1, 4});
  Tensor c = Tensor::from_vector(std::vector<float>{0, 1}, {1, 2}), s = Tensor::from_vector(std::vector<float>{1, 0}, {1, 2});
  // interleaved pairs (1,2) by 90 deg and (3,4) by 0
  EXPECT_TRUE(all_close(x.rope_i(c, s), {-2, 1, 3, 4}, 0, 0));
  // halves: pairs (1,3) by 90 deg and (2,4) by 0
  EXPECT_TRUE(all_close(x.rope(c, s), {-3, 2, 1, 4}, 0, 0));
  EXPECT_TRUE(all_close(x.rope_thd(c, s), {-3, 2, 1, 4}, 0, 0));
}

TEST(NnHand, SiluMul) {
  Tensor a = Tensor::from_vector(std::vector<double>{0, 1, -1}, {3}), b = Tensor::from_vector(std::vector<double>{5, 2, 3}, {3});
  const double s1 = 1 / (1 + std::exp(-1.0));
  EXPECT_TRUE(all_close(a.silu_mul(b), {0, 2 * s1, -3 * (1 - s1)}, 1e-15, 1e-15));
  EXPECT_TRUE(all_close(Tensor::cat({a, b}, 0).swiglu(), {0, 2 * s1, -3 * (1 - s1)}, 1e-15, 1e-15));
  // matmul_swiglu: x (1, 2) = [1, 2]; gate rows [1, 0], [0, 1] give g = [1, 2], up rows [1, 1],
  // [2, 0] give u = [3, 2]: y = [silu(1) * 3, silu(2) * 2].
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {1, 2});
  const Tensor w = Tensor::from_vector(std::vector<double>{1, 0, 0, 1, 1, 1, 2, 0}, {4, 2});
  const double s2 = 2 / (1 + std::exp(-2.0));
  EXPECT_TRUE(all_close(fast::matmul_swiglu(x, w.t()), {3 * s1, 2 * s2}, 1e-15, 1e-15));
}

TEST(NnHand, Attention) {
  // One key: the output is its value whatever the scores.
  Tensor q = Tensor::from_vector(std::vector<double>{1, 2}, {1, 1, 1, 2});
  Tensor k = Tensor::from_vector(std::vector<double>{5, -7}, {1, 1, 1, 2});
  Tensor v = Tensor::from_vector(std::vector<double>{3, 4, 5}, {1, 1, 1, 3});
  EXPECT_TRUE(all_close(attention(q, k, v), {3, 4, 5}, 0, 1e-15));
  // Two keys with scores 0 and ln 3 (q.k = ln 3 * sqrt(2) under the default 1/sqrt(2)): weights 1/4, 3/4.
  Tensor k2 = Tensor::from_vector(std::vector<double>{0, 0, std::log(3.0) * std::sqrt(2.0), 0}, {1, 1, 2, 2});
  Tensor q1 = Tensor::from_vector(std::vector<double>{1, 0}, {1, 1, 1, 2});
  Tensor v2 = Tensor::from_vector(std::vector<double>{4, 0, 0, 8}, {1, 1, 2, 2});
  EXPECT_TRUE(all_close(attention(q1, k2, v2), {1, 6}, 1e-14, 1e-14));
  // causal with t_q = t_kv = 2: the first query sees only the first key.
  Tensor q2 = Tensor::from_vector(std::vector<double>{1, 0, 1, 0}, {1, 1, 2, 2});
  EXPECT_TRUE(all_close(attention(q2, k2, v2, true), {4, 0, 1, 6}, 1e-14, 1e-14));
  // explicit scale 0: uniform weights.
  EXPECT_TRUE(all_close(attention(q1, k2, v2, false, 0.0), {2, 4}, 1e-15, 1e-15));
}

// Sizes large enough for the multi-threaded paths: each softmax row sums to 1, each rms_norm row
// has mean square 1, attention with equal values returns that value.
TEST(NnHand, LargeInvariants) {
  Tensor x = Tensor::randn({300, 513}, DType::F32, Device::cpu(), 7).affine(4.0, 0.0);
  auto sums = x.softmax_last_dim().to_dtype(DType::F64).sum(std::vector<int64_t>{1}, false);
  EXPECT_TRUE(all_close(sums, std::vector<double>(300, 1.0), 1e-5, 1e-5));
  Tensor y = x.rms_norm(Tensor(), 0.0).to_dtype(DType::F64);
  EXPECT_TRUE(all_close(y.mul(y).mean(std::vector<int64_t>{1}, false), std::vector<double>(300, 1.0), 1e-5, 1e-5));
  Tensor q = Tensor::randn({2, 8, 100, 16}, DType::F32, Device::cpu(), 8);
  Tensor k = Tensor::randn({2, 2, 300, 16}, DType::F32, Device::cpu(), 9);
  Tensor v = Tensor::full({2, 2, 300, 4}, 1.5, DType::F32);
  EXPECT_TRUE(all_close(attention(q, k, v, true), std::vector<double>(2 * 8 * 100 * 4, 1.5), 1e-6, 1e-6));
}

// ---- empty tensors
TEST(NnEmpty, AllOps) {
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor e = Tensor::zeros({0, 5}, dt), e2 = Tensor::zeros({3, 0}, dt);
    EXPECT_EQ(e.softmax_last_dim().shape(), (Shape{0, 5}));
    EXPECT_EQ(e2.log_softmax_last_dim().shape(), (Shape{3, 0}));
    EXPECT_EQ(e.rms_norm(Tensor::ones({5}, dt), 1e-5).shape(), (Shape{0, 5}));
    EXPECT_EQ(e2.layer_norm(Tensor(), Tensor(), 1e-5).shape(), (Shape{3, 0}));
    Tensor x = Tensor::zeros({2, 3, 0, 4}, dt);
    Tensor cs = Tensor::zeros({0, 2}, dt);
    EXPECT_EQ(x.rope(cs, cs).shape(), x.shape());
    EXPECT_EQ(x.rope_i(cs, cs).shape(), x.shape());
    EXPECT_EQ(Tensor::zeros({2, 0, 3, 4}, dt).rope_thd(cs, cs).shape(), (Shape{2, 0, 3, 4}));
    EXPECT_EQ(e.silu_mul(e).shape(), (Shape{0, 5}));
    EXPECT_EQ(Tensor::zeros({4, 0}, dt).swiglu().shape(), (Shape{4, 0}));
    Tensor q = Tensor::zeros({2, 4, 0, 8}, dt), kv = Tensor::zeros({2, 2, 5, 8}, dt);
    EXPECT_EQ(attention(q, kv, kv).shape(), (Shape{2, 4, 0, 8}));
    Tensor q0 = Tensor::zeros({0, 4, 3, 8}, dt), kv0 = Tensor::zeros({0, 2, 5, 8}, dt);
    EXPECT_EQ(attention(q0, kv0, kv0, true).shape(), (Shape{0, 4, 3, 8}));
  }
}

// ---- errors
TEST(NnErrors, DTypes) {
  Tensor i = Tensor::zeros({2, 4}, DType::I32);
  EXPECT_THROW(i.softmax_last_dim(), Error);
  EXPECT_THROW(i.log_softmax_last_dim(), Error);
  EXPECT_THROW(i.rms_norm(Tensor(), 1e-5), Error);
  EXPECT_THROW(i.layer_norm(Tensor(), Tensor(), 1e-5), Error);
  EXPECT_THROW(i.silu_mul(i), Error);
  EXPECT_THROW(Tensor::zeros({2, 4}, DType::U8).swiglu(), Error);
  Tensor x = Tensor::zeros({1, 1, 2, 4}, DType::U32);
  Tensor cs = Tensor::zeros({2, 2}, DType::U32);
  EXPECT_THROW(x.rope(cs, cs), Error);
  // f8e4m3 attention is not defined: Error(DType)
  Tensor q8 = Tensor::zeros({1, 1, 2, 4}, DType::F8E4M3);
  try {
    attention(q8, q8, q8);
    ADD_FAILURE() << "f8 attention did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DType);
  }
  Tensor qi = Tensor::zeros({1, 1, 2, 4}, DType::I64);
  EXPECT_THROW(attention(qi, qi, qi), Error);
  // mixed dtypes
  Tensor a = Tensor::zeros({2, 4}, DType::F32), b = Tensor::zeros({2, 4}, DType::F16);
  EXPECT_THROW(a.silu_mul(b), Error);
  EXPECT_THROW(a.rms_norm(Tensor::ones({4}, DType::F16), 1e-5), Error);
  EXPECT_THROW(a.layer_norm(Tensor::ones({4}, DType::F32), Tensor::ones({4}, DType::F64), 1e-5), Error);
  Tensor q = Tensor::zeros({1, 2, 3, 4}, DType::F32);
  EXPECT_THROW(attention(q, q.to_dtype(DType::F16), q), Error);
  Tensor xr = Tensor::zeros({1, 1, 2, 4}, DType::F32);
  EXPECT_THROW(xr.rope(Tensor::zeros({2, 2}, DType::F64), Tensor::zeros({2, 2}, DType::F32)), Error);
}

TEST(NnErrors, Shapes) {
  Tensor x = Tensor::zeros({2, 4}, DType::F32);
  auto expect_shape_error = [](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Shape) << what << ": " << e.what();
    }
  };
  expect_shape_error([&] { x.rms_norm(Tensor::ones({5}, DType::F32), 1e-5); }, "weight size");
  expect_shape_error([&] { x.rms_norm(Tensor::ones({1, 4}, DType::F32), 1e-5); }, "weight rank");
  expect_shape_error([&] { x.layer_norm(Tensor(), Tensor::ones({3}, DType::F32), 1e-5); }, "bias size");
  expect_shape_error([&] { Tensor::zeros({}, DType::F32).softmax_last_dim(); }, "scalar softmax");
  expect_shape_error([&] { Tensor::zeros({2, 5}, DType::F32).swiglu(); }, "odd swiglu");
  expect_shape_error([&] { fast::matmul_swiglu(x, Tensor::zeros({4, 3}, DType::F32)); }, "odd matmul_swiglu");
  expect_shape_error([&] { fast::matmul_swiglu(x, Tensor::zeros({5, 4}, DType::F32)); }, "matmul_swiglu inner dims");
  expect_shape_error([&] { x.silu_mul(Tensor::zeros({3, 4}, DType::F32)); }, "silu_mul shapes");
  // rope
  Tensor r = Tensor::zeros({1, 2, 3, 6}, DType::F32), cs = Tensor::zeros({3, 3}, DType::F32);
  expect_shape_error([&] { Tensor::zeros({1, 2, 3, 5}, DType::F32).rope(cs, cs); }, "odd rope dim");
  expect_shape_error([&] { r.rope(Tensor::zeros({3, 2}, DType::F32), Tensor::zeros({3, 2}, DType::F32)); }, "cos cols");
  expect_shape_error([&] { r.rope(Tensor::zeros({4, 3}, DType::F32), Tensor::zeros({4, 3}, DType::F32)); }, "cos rows");
  expect_shape_error([&] { r.rope(cs, Tensor::zeros({1, 3, 3}, DType::F32)); }, "cos != sin shape");
  expect_shape_error([&] { r.rope(Tensor::zeros({2, 3, 3}, DType::F32), Tensor::zeros({2, 3, 3}, DType::F32)); },
                     "per-batch cos with the wrong batch");
  expect_shape_error([&] { r.rope_thd(cs, cs); }, "rope_thd reads dim 1 as t");
  expect_shape_error([&] { Tensor::zeros({2, 3, 6}, DType::F32).rope_i(cs, cs); }, "rope rank");
  // rope_kv_append: qk (1, 3, 2, 8) with 2 q heads, caches of capacity 5
  {
    const Tensor qk = Tensor::zeros({1, 3, 2, 8}, DType::F32), c4 = Tensor::zeros({2, 4}, DType::F32);
    const Tensor v = Tensor::zeros({1, 1, 2, 8}, DType::F32), pos = Tensor::full({1}, 0, DType::I32);
    Tensor kc = Tensor::zeros({1, 1, 5, 8}, DType::F32), vc = Tensor::zeros({1, 1, 5, 8}, DType::F32);
    Tensor small = Tensor::zeros({1, 1, 1, 8}, DType::F32), other = Tensor::zeros({1, 1, 6, 8}, DType::F32);
    Tensor bcast = Tensor::zeros({1, 1, 1, 8}, DType::F32).broadcast_as({1, 1, 5, 8});
    auto call = [&](size_t qh, const Tensor& vv, Tensor& k, Tensor& vcache) {
      return fast::rope_kv_append(qk, c4, c4, false, qh, vv, k, vcache, pos);
    };
    expect_shape_error([&] { call(3, v, kc, vc); }, "no k head");
    expect_shape_error([&] { call(1, v, kc, vc); }, "v heads != k heads");
    expect_shape_error([&] { call(2, Tensor::zeros({1, 1, 3, 8}, DType::F32), kc, vc); }, "v rows != qk rows");
    expect_shape_error([&] { call(2, v, small, small); }, "capacity below the new rows");
    expect_shape_error([&] { call(2, v, kc, other); }, "capacities differ");
    expect_shape_error([&] { call(2, v, bcast, vc); }, "broadcast cache");
    expect_shape_error([&] { fast::rope_kv_append(qk, c4, c4, false, 2, v, kc, vc, Tensor::zeros({2}, DType::I32)); },
                       "two starts");
    EXPECT_THROW(fast::rope_kv_append(qk, c4, c4, false, 2, v, kc, vc, Tensor::zeros({1}, DType::F32)), Error);
    Tensor kh = Tensor::zeros({1, 1, 5, 8}, DType::F16);
    EXPECT_THROW(call(2, v, kh, vc), Error);
    try {
      call(2, v, kc, kc);
      ADD_FAILURE() << "one cache for both k and v was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("rope_kv_append"), std::string::npos) << e.what();
    }
    // qk in the k cache's storage (rows the write does not reach): read before the write, as rope
    // then slice_set would (the expected rows are rope_i's, itself checked against PyTorch above).
    {
      Tensor buf = Tensor::rand({2, 1, 4, 8}, DType::F32, Device::cpu(), 7, -1.0, 1.0);
      Tensor kcache = buf.narrow(0, 0, 1), vcache = Tensor::zeros({1, 1, 4, 8}, DType::F32);
      const Tensor qk2 = buf.narrow(0, 1, 1).narrow(2, 0, 2).reshape({1, 2, 1, 8});
      const Tensor cs1 = Tensor::rand({1, 4}, DType::F32, Device::cpu(), 8);
      const Tensor sn1 = Tensor::rand({1, 4}, DType::F32, Device::cpu(), 9);
      const Tensor want = qk2.copy().rope_i(cs1, sn1);
      const Tensor q2 = fast::rope_kv_append(qk2, cs1, sn1, true, 1, v.narrow(2, 0, 1), kcache, vcache,
                                             Tensor::full({1}, 2, DType::I32));
      EXPECT_EQ(q2.to_vector<float>(), want.narrow(1, 0, 1).to_vector<float>());
      EXPECT_EQ(kcache.narrow(2, 2, 1).to_vector<float>(), want.narrow(1, 1, 1).to_vector<float>());
    }
    // Disjoint halves of one storage are two caches.
    Tensor both = Tensor::zeros({2, 1, 5, 8}, DType::F32);
    Tensor k0 = both.narrow(0, 0, 1), v0 = both.narrow(0, 1, 1);
    EXPECT_NO_THROW(call(2, v, k0, v0));
  }
  // attention
  Tensor q = Tensor::zeros({1, 3, 4, 8}, DType::F32), kv = Tensor::zeros({1, 2, 4, 8}, DType::F32);
  expect_shape_error([&] { attention(q, kv, kv); }, "h_q not a multiple of h_kv");
  Tensor q4 = Tensor::zeros({1, 2, 5, 8}, DType::F32);
  expect_shape_error([&] { attention(q4, kv, kv, true); }, "causal with t_kv < t_q");
  EXPECT_NO_THROW(attention(q4, kv, kv, false));  // not causal: fine
  expect_shape_error([&] { attention(q4, kv, Tensor::zeros({1, 2, 3, 8}, DType::F32)); }, "v seq");
  expect_shape_error([&] { attention(q4, Tensor::zeros({1, 2, 4, 7}, DType::F32), kv); }, "k head dim");
  expect_shape_error([&] { attention(q4, Tensor::zeros({2, 2, 4, 8}, DType::F32), kv); }, "k batch");
  expect_shape_error([&] { attention(q4.squeeze(0), kv, kv); }, "rank 3 q");
}

// A bad eps or scale is an argument error (the shapes are fine), naming the op.
TEST(NnErrors, ArgumentsAreArgumentErrors) {
  Tensor x = Tensor::zeros({2, 4}, DType::F32);
  Tensor q = Tensor::zeros({1, 2, 5, 8}, DType::F32), kv = Tensor::zeros({1, 2, 5, 8}, DType::F32);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto expect_argument_error = [](auto&& f, const char* op, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Argument) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_argument_error([&] { x.rms_norm(Tensor(), -1.0); }, "rms_norm", "negative eps");
  expect_argument_error([&] { x.rms_norm(Tensor(), nan); }, "rms_norm", "NaN eps");
  expect_argument_error([&] { x.layer_norm(Tensor(), Tensor(), -1e-5); }, "layer_norm", "negative eps");
  expect_argument_error([&] { x.layer_norm(Tensor(), Tensor(), nan); }, "layer_norm", "NaN eps");
  expect_argument_error([&] { attention(q, kv, kv, false, inf); }, "attention", "inf scale");
  expect_argument_error([&] { attention(q, kv, kv, false, nan); }, "attention", "NaN scale");
  expect_argument_error([&] { attention(q, kv, kv, true, -inf); }, "attention", "-inf scale");
  EXPECT_NO_THROW(x.rms_norm(Tensor(), 0.0));  // eps = 0 is allowed
}

// ---- softmax / log_softmax over any dim, against f64 arithmetic done here.
namespace {

// softmax (or log_softmax) of the row-major values v of shape s along dim d, in f64.
std::vector<double> softmax_ref(const std::vector<double>& v, const Shape& s, size_t d, bool log) {
  size_t inner = 1, outer = 1;
  for (size_t i = d + 1; i < s.size(); ++i) inner *= s[i];
  for (size_t i = 0; i < d; ++i) outer *= s[i];
  const size_t n = s[d];
  std::vector<double> out(v.size());
  for (size_t o = 0; o < outer; ++o)
    for (size_t in = 0; in < inner; ++in) {
      auto at = [&](size_t k) { return (o * n + k) * inner + in; };
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (size_t k = 0; k < n; ++k) mx = std::max(mx, v[at(k)]);
      for (size_t k = 0; k < n; ++k) sum += std::exp(v[at(k)] - mx);
      for (size_t k = 0; k < n; ++k)
        out[at(k)] = log ? v[at(k)] - mx - std::log(sum) : std::exp(v[at(k)] - mx) / sum;
    }
  return out;
}

}  // namespace

TEST(NnSoftmaxDim, EveryDimEveryFloatDTypeAndLayout) {
  const Shape s{3, 4, 5};
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int(i * 7 % 23) - 11) / 4.0;  // exact in f8e4m3 too
  for (DType dt : kFloatDTypes) {
    Tensor x0 = Tensor::from_vector(v, s).to_dtype(dt);
    const std::vector<double> xv = wick::test::values(x0);  // the values as rounded to dt
    for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
      const size_t d = size_t(dim < 0 ? dim + 3 : dim);
      for (bool log : {false, true}) {
        const std::vector<double> want = softmax_ref(xv, s, d, log);
        for (const auto& [name, x] : layouts(x0)) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + (log ? " log " : " ") + name);
          Tensor got = log ? x.log_softmax(dim) : x.softmax(dim);
          // log_softmax values reach ~-8: f8e4m3 rounds them with a step of 0.5 there
          EXPECT_TRUE(close(got, dt, s, want, log && dt == DType::F8E4M3 ? 4.0 : 1.0));
        }
      }
    }
  }
}

TEST(NnSoftmaxDim, ColumnsSumToOneAndLastDimIsTheFusedOp) {
  Tensor x = Tensor::randn({6, 9}, DType::F32, Device::cpu(), 5);
  std::vector<double> col = wick::test::values(x.softmax(0).sum({0}));
  EXPECT_TRUE(all_close(col, std::vector<double>(9, 1.0), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(x.softmax(-1), wick::test::values(x.softmax_last_dim()), 0, 0));
  EXPECT_TRUE(all_close(x.log_softmax(1), wick::test::values(x.log_softmax_last_dim()), 0, 0));
  // a -inf entry gets probability 0; a column of only -inf is NaN (as softmax_last_dim)
  const double inf = std::numeric_limits<double>::infinity();
  Tensor y = Tensor::from_vector(std::vector<double>{0, -inf, -inf, -inf}, {2, 2});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(all_close(y.softmax(0), {1, nan, 0, nan}, 0, 0));
}

TEST(NnSoftmaxDim, Errors) {
  Tensor x = Tensor::zeros({2, 3}, DType::F32);
  for (int64_t bad : {2, -3}) {
    try {
      x.softmax(bad);
      ADD_FAILURE() << "dim " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Shape);
      EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
    }
    EXPECT_THROW(x.log_softmax(bad), Error);
  }
  try {
    Tensor::zeros({2, 3}, DType::I64).log_softmax(0);
    ADD_FAILURE() << "integer log_softmax accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DType);
    EXPECT_NE(std::string(e.what()).find("log_softmax"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::zeros({}, DType::F32).softmax(0), Error);
  EXPECT_EQ(Tensor::zeros({0, 3}, DType::F32).softmax(0).shape(), (Shape{0, 3}));
}

// ---- attention_kv_len: each batch against attention() on its first L keys (attention itself is
// checked against the PyTorch fixture above), and hand arithmetic.
namespace {

// attention() of each batch on k/v narrowed to lens[b] keys, stacked back along the batch.
Tensor attention_narrowed(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<size_t>& lens,
                          bool causal, std::optional<double> scale = std::nullopt) {
  std::vector<Tensor> outs;
  for (size_t b = 0; b < q.dim(0); ++b) {
    const int64_t bi = int64_t(b);
    outs.push_back(attention(q.narrow(0, bi, 1), k.narrow(0, bi, 1).narrow(2, 0, lens[b]),
                             v.narrow(0, bi, 1).narrow(2, 0, lens[b]), causal, scale));
  }
  return Tensor::cat(outs, 0);
}

}  // namespace

TEST_P(ByAttnFloat, AttentionKvLenIsAttentionOnTheFirstKeys) {
  const DType dt = GetParam();
  int n = 0;
  // b = 2 with different lengths, grouped-query heads (8 on 2), one and three query rows.
  for (size_t tq : {1, 3}) {
    Tensor q = Tensor::randn({2, 8, tq, 16}, DType::F32, Device::cpu(), 60 + tq).to_dtype(dt);
    Tensor k = Tensor::randn({2, 2, 40, 16}, DType::F32, Device::cpu(), 62).to_dtype(dt);
    Tensor v = Tensor::randn({2, 2, 40, 12}, DType::F32, Device::cpu(), 63).to_dtype(dt);
    for (bool causal : {false, true}) {
      for (DType lt : {DType::U32, DType::I32, DType::I64}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " t_q " + std::to_string(tq) + (causal ? " causal " : " ") +
                     dtype_name(lt));
        Tensor lens = Tensor::from_vector(std::vector<int64_t>{7, 33}, {2}).to_dtype(lt);
        // the same arithmetic over fewer keys: equal to the last bit
        EXPECT_TRUE(all_close(attention_kv_len(q, k, v, lens, causal),
                              wick::test::values(attention_narrowed(q, k, v, {7, 33}, causal)), 0, 0));
        ++n;
      }
      // strided q/k/v ((b, t, h, d) storage), a strided kv_len (every other element) and a scale
      Tensor lens2 = Tensor::from_vector(std::vector<int32_t>{40, -1, 5, -1}, {2, 2}).narrow(1, 0, 1).squeeze(1);
      EXPECT_TRUE(all_close(attention_kv_len(as_bthd(q), as_bthd(k), as_offset(v), lens2, causal, 0.3),
                            wick::test::values(attention_narrowed(q, k, v, {40, 5}, causal, 0.3)), 0, 0));
    }
  }
  EXPECT_EQ(n, 12);
}

TEST_P(ByAttnFloat, AttentionKvLenClampsAndSharesOneLength) {
  const DType dt = GetParam();
  Tensor q = Tensor::randn({3, 4, 3, 8}, DType::F32, Device::cpu(), 70).to_dtype(dt);
  Tensor k = Tensor::randn({3, 4, 20, 8}, DType::F32, Device::cpu(), 71).to_dtype(dt);
  Tensor v = Tensor::randn({3, 4, 20, 8}, DType::F32, Device::cpu(), 72).to_dtype(dt);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + (causal ? " causal" : ""));
    // 0 and -5 are raised to 1 key (causal: t_q = 3 keys), 1000 lowered to t_kv = 20.
    const size_t lo = causal ? 3 : 1;
    Tensor lens = Tensor::from_vector(std::vector<int64_t>{0, -5, 1000}, {3});
    EXPECT_TRUE(all_close(attention_kv_len(q, k, v, lens, causal),
                          wick::test::values(attention_narrowed(q, k, v, {lo, lo, 20}, causal)), 0, 0));
    Tensor big = Tensor::from_vector(std::vector<uint32_t>{4294967295u, 2, 19}, {3});
    const size_t two = causal ? 3 : 2;
    EXPECT_TRUE(all_close(attention_kv_len(q, k, v, big, causal),
                          wick::test::values(attention_narrowed(q, k, v, {20, two, 19}, causal)), 0, 0));
    // one length for every batch: shape (1), a scalar, (1, 1)
    for (const Shape& s : {Shape{1}, Shape{}, Shape{1, 1}}) {
      Tensor one = Tensor::full(s, 11, DType::I32);
      EXPECT_TRUE(all_close(attention_kv_len(q, k, v, one, causal),
                            wick::test::values(attention_narrowed(q, k, v, {11, 11, 11}, causal)), 0, 0));
    }
  }
}

TEST(NnHand, AttentionKvLen) {
  // Keys past each batch's length hold NaN: they must not be read. Batch 0 sees one key (the
  // output is its value); batch 1 two keys with scores 0 and ln 3 (weights 1/4, 3/4).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double l3 = std::log(3.0) * std::sqrt(2.0);
  Tensor q = Tensor::from_vector(std::vector<double>{1, 0, 1, 0}, {2, 1, 1, 2});
  Tensor k = Tensor::from_vector(std::vector<double>{5, -7, nan, nan, nan, nan,  //
                                                     0, 0, l3, 0, nan, nan},
                                 {2, 1, 3, 2});
  Tensor v = Tensor::from_vector(std::vector<double>{3, 4, nan, nan, nan, nan,  //
                                                     4, 0, 0, 8, nan, nan},
                                 {2, 1, 3, 2});
  Tensor lens = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  EXPECT_TRUE(all_close(attention_kv_len(q, k, v, lens), {3, 4, 1, 6}, 1e-14, 1e-14));
  EXPECT_TRUE(all_close(attention_kv_len(q, k, v, lens, true), {3, 4, 1, 6}, 1e-14, 1e-14));
  // causal with t_q = 2 and L = 2 in a 3-key cache: the first query sees only the first key.
  Tensor q2 = Tensor::from_vector(std::vector<double>{1, 0, 1, 0}, {1, 1, 2, 2});
  Tensor len2 = Tensor::full({1}, 2, DType::I64);
  EXPECT_TRUE(
      all_close(attention_kv_len(q2, k.narrow(0, 1, 1), v.narrow(0, 1, 1), len2, true), {4, 0, 1, 6}, 1e-14, 1e-14));
}

TEST(NnErrors, AttentionKvLen) {
  Tensor q = Tensor::zeros({2, 4, 1, 8}, DType::F32), kv = Tensor::zeros({2, 2, 6, 8}, DType::F32);
  auto expect_error = [](auto&& f, ErrorKind kind, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("attention_kv_len"), std::string::npos) << what << ": " << e.what();
    }
  };
  const Tensor l2 = Tensor::full({2}, 3, DType::I32);
  for (DType bad : {DType::F32, DType::U8, DType::I16})
    expect_error([&] { attention_kv_len(q, kv, kv, Tensor::full({2}, 3, bad)); }, ErrorKind::DType, dtype_name(bad));
  expect_error([&] { attention_kv_len(q, kv, kv, Tensor::full({3}, 3, DType::I32)); }, ErrorKind::Shape, "(3) for b 2");
  expect_error([&] { attention_kv_len(q, kv, kv, Tensor::full({2, 1}, 3, DType::I32)); }, ErrorKind::Shape, "(2, 1)");
  expect_error([&] { attention_kv_len(q, kv, kv, Tensor::zeros({0}, DType::I32)); }, ErrorKind::Shape, "empty");
  EXPECT_THROW(attention_kv_len(q, kv, kv, Tensor()), Error);
  // attention's own checks, under this op's name
  expect_error([&] { attention_kv_len(q, kv, kv.narrow(2, 0, 5), l2); }, ErrorKind::Shape, "v seq");
  const Tensor q7 = Tensor::zeros({2, 4, 7, 8}, DType::F32);
  expect_error([&] { attention_kv_len(q7, kv, kv, l2, true); }, ErrorKind::Shape, "causal with t_kv < t_q");
  expect_error([&] { attention_kv_len(q, kv, kv, l2, false, std::numeric_limits<double>::infinity()); },
               ErrorKind::Argument, "inf scale");
  EXPECT_EQ(attention_kv_len(Tensor::zeros({2, 4, 0, 8}, DType::F32), kv, kv, l2).shape(), (Shape{2, 4, 0, 8}));
}

// fast::rms_norm_q8_1 / add_rms_norm_q8_1 / silu_mul_q8_1 on the CPU (the core quantizes the
// result): the bytes of the reference quantize_block_q8_1 over the result, and a quantized
// product given them equals the product without. Bad requests name the op and the fix.
TEST(Nn, Q8_1Outputs) {
  std::vector<float> xv(2 * 64), rv(2 * 64), wv(64);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37f * float(i)) * float(1 + i % 5);
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = std::cos(0.11f * float(i));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.5f + 0.01f * float(i);
  auto host_q8_1 = [](const Tensor& t) {
    const std::vector<float> v = t.to_dtype(DType::F32).contiguous().to_vector<float>();
    std::vector<uint8_t> out(v.size() / 32 * 36);
    for (size_t b = 0; b < v.size() / 32; ++b) quant::quantize_block_q8_1(v.data() + 32 * b, out.data() + 36 * b);
    return out;
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor x = Tensor::from_vector(xv, {2, 64}).to_dtype(dt), r = Tensor::from_vector(rv, {2, 64}).to_dtype(dt);
    const Tensor w = Tensor::from_vector(wv, {64}).to_dtype(dt);
    const auto [h, q1] = fast::rms_norm_q8_1(x, w, 1e-5);
    const auto [s, h2, q2] = fast::add_rms_norm_q8_1(x, r, w, 1e-5);
    const auto [g, q3] = fast::silu_mul_q8_1(x, r);
    // The values are the general ops' (the Q8_1 rows are an extra output, not another rounding).
    EXPECT_EQ(h.to_dtype(DType::F32).to_vector<float>(), x.rms_norm(w, 1e-5).to_dtype(DType::F32).to_vector<float>());
    EXPECT_EQ(h2.to_dtype(DType::F32).to_vector<float>(),
              x.add_rms_norm(r, w, 1e-5).second.to_dtype(DType::F32).to_vector<float>());
    EXPECT_EQ(s.to_dtype(DType::F32).to_vector<float>(), x.add(r).to_dtype(DType::F32).to_vector<float>());
    EXPECT_EQ(g.to_dtype(DType::F32).to_vector<float>(), x.silu_mul(r).to_dtype(DType::F32).to_vector<float>());
    EXPECT_EQ(q1.type(), GGMLType::Q8_1);
    EXPECT_EQ(q1.shape(), (Shape{2, 64}));
    EXPECT_EQ(q1.to_bytes(), host_q8_1(h)) << dtype_name(dt);
    EXPECT_EQ(q2.to_bytes(), host_q8_1(h2)) << dtype_name(dt);
    EXPECT_EQ(q3.to_bytes(), host_q8_1(g)) << dtype_name(dt);
    const QTensor wq = QTensor::quantize(Tensor::from_vector(xv, {2, 64}), GGMLType::Q4_0);
    EXPECT_EQ(fast::matmul_t_q8_1(wq, h, q1).to_dtype(DType::F32).to_vector<float>(),
              wq.matmul_t(h).to_dtype(DType::F32).to_vector<float>());
  }
  auto expect_error = [](auto&& f, ErrorKind kind, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("Q8_1"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_error(
      [&] {
        fast::rms_norm_q8_1(Tensor::zeros({2, 48}, DType::F32), Tensor(), 1e-5);
      },
      ErrorKind::Shape, "rms_norm_q8_1 with 48 columns");
  expect_error(
      [&] {
        fast::add_rms_norm_q8_1(Tensor::zeros({2, 48}, DType::F32), Tensor::zeros({2, 48}, DType::F32), Tensor(), 1e-5);
      },
      ErrorKind::Shape, "add_rms_norm_q8_1 with 48 columns");
  expect_error(
      [&] {
        fast::silu_mul_q8_1(Tensor::zeros({2, 64}, DType::F64), Tensor::zeros({2, 64}, DType::F64));
      },
      ErrorKind::DType, "silu_mul_q8_1 of f64");
  const Tensor h = Tensor::ones({2, 64}, DType::F32);
  const QTensor wq = QTensor::quantize(h, GGMLType::Q8_0);
  expect_error([&] { fast::matmul_t_q8_1(wq, h, QTensor::quantize(h.narrow(0, 0, 1), GGMLType::Q8_1)); },
               ErrorKind::Argument, "x_q8_1 of another shape");
  expect_error([&] { fast::matmul_t_q8_1(wq, h, QTensor::quantize(h, GGMLType::Q8_0)); }, ErrorKind::Argument,
               "x_q8_1 of another type");
}

// Losses (include/wick/nn.hpp): nll, cross_entropy, binary_cross_entropy_with_logit, mse, huber.
// Expected values come from tests/fixtures/loss.json (gen_loss.py: PyTorch's
// torch.nn.functional in f64 when available, else independent NumPy formulas) or from hand
// arithmetic here. Fixture inputs are exact in each dtype a case lists.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace wick;
using nlohmann::json;
using wick::test::all_close;
using wick::test::as_offset;
using wick::test::as_transposed;
using wick::test::doubles_from_json;

namespace {

constexpr DType kIdDTypes[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

const json& fixture() {
  static json j = wick::test::load_json_fixture("loss.json");
  return j;
}

Tensor tensor_of(const json& j, DType dt) {
  return Tensor::from_vector(doubles_from_json(j.at("data")), j.at("shape").get<Shape>()).to_dtype(dt);
}

// The sentinel of id dtype `id` (its maximum) as an int64, exact after to_dtype(id).
int64_t sentinel_of(DType id) {
  switch (id) {
    case DType::U8:
      return 255;
    case DType::U32:
      return 4294967295LL;
    case DType::I16:
      return 32767;
    case DType::I32:
      return 2147483647LL;
    default:
      return INT64_MAX;
  }
}

// Target ids of a case in dtype id; -1 in the fixture is the sentinel.
Tensor ids_of(const json& j, DType id) {
  std::vector<int64_t> v;
  for (const auto& x : j) v.push_back(x.get<int64_t>() < 0 ? sentinel_of(id) : x.get<int64_t>());
  return Tensor::from_vector(v, {v.size()}).to_dtype(id);
}

// The same values in several layouts: contiguous, offset, transposed storage (rank >= 2).
std::vector<Tensor> layouts(const Tensor& t) {
  std::vector<Tensor> v{t, as_offset(t)};
  if (t.rank() >= 2) v.push_back(as_transposed(t));
  return v;
}

// One rounding of the result to dt after f32 (f64) arithmetic on exact inputs.
::testing::AssertionResult close_loss(const Tensor& got, DType dt, double want) {
  if (got.dtype() != dt) return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype());
  if (!got.shape().empty()) return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " != []";
  const double rtol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-5 : 2 * wick::test::rtol_for(dt);
  return all_close(got, {want}, rtol, dt == DType::F64 ? 1e-14 : 1e-6);
}

size_t run_fixture(const std::string& only) {
  size_t runs = 0;
  for (const json& c : fixture().at("cases")) {
    const std::string loss = c.at("loss"), name = c.at("name");
    if (loss != only) continue;
    const double want = c.at("want").get<double>();
    for (const auto& dn : c.at("dtypes")) {
      DType dt = DType::F32;
      for (DType d : {DType::BF16, DType::F16, DType::F32, DType::F64})
        if (dtype_name(d) == dn.get<std::string>()) dt = d;
      const Tensor inp0 = tensor_of(c.at("inp"), dt);
      if (loss == "nll" || loss == "cross_entropy") {
        for (DType id : kIdDTypes) {
          const Tensor ids0 = ids_of(c.at("target_ids"), id);
          for (const Tensor& inp : layouts(inp0))
            for (const Tensor& ids : layouts(ids0)) {
              SCOPED_TRACE(name + " " + dtype_name(dt) + " ids " + dtype_name(id));
              EXPECT_TRUE(close_loss(loss == "nll" ? loss::nll(inp, ids) : loss::cross_entropy(inp, ids), dt, want));
              ++runs;
            }
        }
        continue;
      }
      const Tensor tgt0 = tensor_of(c.at("target"), dt);
      for (const Tensor& inp : layouts(inp0))
        for (const Tensor& tgt : layouts(tgt0)) {
          SCOPED_TRACE(name + " " + dtype_name(dt));
          Tensor got = loss == "mse"     ? loss::mse(inp, tgt)
                       : loss == "huber" ? loss::huber(inp, tgt, c.at("delta").get<double>())
                                         : loss::binary_cross_entropy_with_logit(inp, tgt);
          EXPECT_TRUE(close_loss(got, dt, want));
          ++runs;
        }
    }
  }
  return runs;
}

}  // namespace

TEST(LossFixture, Source) { EXPECT_FALSE(fixture().at("source").get<std::string>().empty()); }
// every case runs in several dtypes and layouts: the counts keep a fixture that lost its cases from passing
TEST(LossFixture, Nll) { EXPECT_GE(run_fixture("nll"), 5u * 4u * 5u * 3u); }
TEST(LossFixture, CrossEntropy) { EXPECT_GE(run_fixture("cross_entropy"), 5u * 4u * 5u * 3u); }
TEST(LossFixture, BinaryCrossEntropyWithLogit) {
  EXPECT_GE(run_fixture("binary_cross_entropy_with_logit"), 4u * 3u * 9u);
}
TEST(LossFixture, Mse) { EXPECT_GE(run_fixture("mse"), 3u * 4u * 6u); }
TEST(LossFixture, Huber) { EXPECT_GE(run_fixture("huber"), 9u * 4u * 6u); }

TEST(Loss, HandValues) {
  // nll: -(-2 + -3) / 2
  Tensor logp = Tensor::from_vector(std::vector<float>{-1, -2, -3, -4}, {2, 2});
  Tensor t = Tensor::from_vector(std::vector<uint32_t>{1, 0}, {2});
  EXPECT_TRUE(close_loss(loss::nll(logp, t), DType::F32, 2.5));
  // cross_entropy of equal logits over 2 classes: log 2
  Tensor z = Tensor::zeros({3, 2}, DType::F64);
  EXPECT_TRUE(close_loss(loss::cross_entropy(z, Tensor::from_vector(std::vector<uint8_t>{1, 0, 1}, {3})), DType::F64,
                         std::log(2.0)));
  // mse: (0 + 4 + 9) / 3
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<double>{1, 0, 0}, {3});
  EXPECT_TRUE(close_loss(loss::mse(a, b), DType::F64, 13.0 / 3.0));
  // huber, delta 1: d = 0, 2, 3 -> 0, 1.5, 2.5; delta 3: 0, 2, 4.5 (|d| = delta is linear = quadratic)
  EXPECT_TRUE(close_loss(loss::huber(a, b, 1.0), DType::F64, (0 + 1.5 + 2.5) / 3.0));
  EXPECT_TRUE(close_loss(loss::huber(a, b, 3.0), DType::F64, (0 + 2 + 4.5) / 3.0));
  // bce with logit 0: log 2 whatever the target; logit +-50 against the wrong label: 50
  Tensor x = Tensor::from_vector(std::vector<double>{0, 0, 50, -50}, {4});
  Tensor y = Tensor::from_vector(std::vector<double>{1, 0.25, 0, 1}, {4});
  EXPECT_TRUE(close_loss(loss::binary_cross_entropy_with_logit(x, y), DType::F64, (2 * std::log(2.0) + 100) / 4));
}

TEST(Loss, SentinelTargetCountsInTheBatch) {
  // Candle's nll: the sentinel reads 0 through gather and the sum is still divided by N = 3
  Tensor logp = Tensor::from_vector(std::vector<float>{-1, -2, -3, -4, -5, -6}, {3, 2});
  Tensor t = Tensor::from_vector(std::vector<int64_t>{1, INT64_MAX, 0}, {3});
  EXPECT_TRUE(close_loss(loss::nll(logp, t), DType::F32, (2.0 + 5.0) / 3.0));
}

TEST(Loss, EmptyBatchIsNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(all_close(loss::nll(Tensor::zeros({0, 3}, DType::F32), Tensor::zeros({0}, DType::U32)), {nan}));
  EXPECT_TRUE(all_close(loss::mse(Tensor::zeros({0}, DType::F32), Tensor::zeros({0}, DType::F32)), {nan}));
}

namespace {

std::string error_of(const std::function<void()>& f, ErrorKind kind, const char* op) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << op << ": no error";
  return "";
}

}  // namespace

TEST(LossErrors, ShapesDTypesIdsAndArguments) {
  Tensor x = Tensor::zeros({2, 3}, DType::F32), ids = Tensor::zeros({2}, DType::U32);
  // shapes
  error_of([&] { loss::mse(x, Tensor::zeros({3, 2}, DType::F32)); }, ErrorKind::Shape, "mse");
  error_of([&] { loss::huber(x, Tensor::zeros({2, 1}, DType::F32), 1.0); }, ErrorKind::Shape, "huber");
  error_of([&] { loss::binary_cross_entropy_with_logit(x, Tensor::zeros({3}, DType::F32)); }, ErrorKind::Shape,
           "binary_cross_entropy_with_logit");
  error_of([&] { loss::nll(x, Tensor::zeros({3}, DType::U32)); }, ErrorKind::Shape, "nll");  // batch 2 vs 3
  error_of([&] { loss::nll(x, Tensor::zeros({2, 1}, DType::U32)); }, ErrorKind::Shape, "nll");
  error_of([&] { loss::cross_entropy(Tensor::zeros({2, 3, 1}, DType::F32), ids); }, ErrorKind::Shape, "cross_entropy");
  error_of([&] { loss::cross_entropy(Tensor::zeros({3}, DType::F32), ids); }, ErrorKind::Shape, "cross_entropy");
  // dtypes
  error_of([&] { loss::nll(x, Tensor::zeros({2}, DType::F32)); }, ErrorKind::DType, "nll");
  error_of([&] { loss::cross_entropy(x, Tensor::zeros({2}, DType::BF16)); }, ErrorKind::DType, "cross_entropy");
  error_of([&] { loss::nll(Tensor::zeros({2, 3}, DType::I32), ids); }, ErrorKind::DType, "nll");
  error_of([&] { loss::mse(x, x.to_dtype(DType::F64)); }, ErrorKind::DType, "mse");
  error_of([&] { loss::mse(Tensor::zeros({2}, DType::I64), Tensor::zeros({2}, DType::I64)); }, ErrorKind::DType, "mse");
  // ids out of range name the loss, not the gather inside it
  for (DType id : kIdDTypes) {
    Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 3}, {2}).to_dtype(id);
    std::string m = error_of([&] { loss::nll(x, bad); }, ErrorKind::Index, "nll");
    EXPECT_EQ(m.find("gather"), std::string::npos) << m;
    error_of([&] { loss::cross_entropy(x, bad); }, ErrorKind::Index, "cross_entropy");
  }
  error_of([&] { loss::nll(x, Tensor::from_vector(std::vector<int32_t>{0, -1}, {2})); }, ErrorKind::Index, "nll");
  // huber's delta
  for (double d : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    error_of([&] { loss::huber(x, x, d); }, ErrorKind::Argument, "huber");
  EXPECT_THROW(loss::mse(Tensor(), x), Error);
}

// matmul / dot / mv against NumPy and exact-integer fixtures (tests/fixtures/gen_matmul.py),
// in several layouts, plus hand-checked cases and errors.
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using nlohmann::json;

namespace {

const json& fixture() {
  static const json j = wick::test::load_json_fixture("matmul.json");
  return j;
}

const json& find_case(const std::string& name) {
  for (const auto& c : fixture().at("cases"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("no fixture case " + name);
}

bool is_int(DType d) { return !dtype_is_float(d); }

Tensor run(const std::string& kind, const Tensor& a, const Tensor& b) {
  if (kind == "dot") return a.dot(b);
  if (kind == "mv") return a.mv(b);
  return a.matmul(b);
}

void expect_matches(const json& c, const Tensor& got) {
  const json& w = c.at("want");
  const DType d = dtype_from_name(w.at("dtype").get<std::string>());
  ASSERT_EQ(got.dtype(), d);
  ASSERT_EQ(got.shape(), w.at("shape").get<Shape>());
  EXPECT_TRUE(got.is_contiguous());
  if (is_int(d)) {
    std::vector<int64_t> want = w.at("data").get<std::vector<int64_t>>();
    std::vector<int64_t> g = got.to_dtype(DType::I64).to_vector<int64_t>();
    EXPECT_EQ(g, want);
  } else {
    EXPECT_TRUE(all_close(got, wick::test::doubles_from_json(w.at("data")), c.at("rtol").get<double>(),
                          c.at("atol").get<double>()));
  }
}

// The same logical operands stored in other layouts.
enum class Variant { Contig, LhsT, RhsT, BothT, LhsOff, RhsOff, OffT };
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::Contig: return "contig";
    case Variant::LhsT: return "lhs_t";
    case Variant::RhsT: return "rhs_t";
    case Variant::BothT: return "both_t";
    case Variant::LhsOff: return "lhs_off";
    case Variant::RhsOff: return "rhs_off";
    case Variant::OffT: return "off_t";
  }
  return "?";
}

struct Param {
  std::string first;
  Variant second;
  friend void PrintTo(const Param& p, std::ostream* os) { *os << p.first << "/" << variant_name(p.second); }
};

std::vector<Param> params() {
  std::vector<Param> out;
  for (const auto& c : fixture().at("cases")) {
    const std::string name = c.at("name");
    out.push_back({name, Variant::Contig});
    const size_t ra = c.at("a").at("shape").size(), rb = c.at("b").at("shape").size();
    if (shape_numel(c.at("a").at("shape").get<Shape>()) == 0 || shape_numel(c.at("b").at("shape").get<Shape>()) == 0)
      continue;
    if (ra >= 2) out.push_back({name, Variant::LhsT});
    if (rb >= 2) out.push_back({name, Variant::RhsT});
    if (ra >= 2 && rb >= 2) out.push_back({name, Variant::BothT});
    out.push_back({name, Variant::LhsOff});
    out.push_back({name, Variant::RhsOff});
    if (ra >= 2 && rb >= 2) out.push_back({name, Variant::OffT});
  }
  return out;
}

class MatmulFixture : public ::testing::TestWithParam<Param> {};

TEST_P(MatmulFixture, MatchesReference) {
  const auto& [name, v] = GetParam();
  const json& c = find_case(name);
  Tensor a = wick::test::tensor_from_json(c.at("a")), b = wick::test::tensor_from_json(c.at("b"));
  using wick::test::as_offset;
  using wick::test::as_transposed;
  switch (v) {
    case Variant::Contig: break;
    case Variant::LhsT: a = as_transposed(a); break;
    case Variant::RhsT: b = as_transposed(b); break;
    case Variant::BothT: a = as_transposed(a), b = as_transposed(b); break;
    case Variant::LhsOff: a = as_offset(a); break;
    case Variant::RhsOff: b = as_offset(b); break;
    case Variant::OffT: a = as_transposed(as_offset(a)), b = as_offset(as_transposed(b)); break;
  }
  expect_matches(c, run(c.at("kind"), a, b));
}

INSTANTIATE_TEST_SUITE_P(Cases, MatmulFixture, ::testing::ValuesIn(params()), [](const auto& info) {
  return info.param.first + "_" + variant_name(info.param.second);
});

Tensor fa(const std::string& name) { return wick::test::tensor_from_json(find_case(name).at("a")); }
Tensor fb(const std::string& name) { return wick::test::tensor_from_json(find_case(name).at("b")); }

}  // namespace

TEST(Matmul, HandArithmeticEveryDType) {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]
  for (DType d : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::BF16, DType::F16, DType::F32,
                  DType::F64}) {
    Tensor a = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).to_dtype(d);
    Tensor b = Tensor::from_vector<double>({5, 6, 7, 8}, {2, 2}).to_dtype(d);
    Tensor c = a.matmul(b);
    EXPECT_EQ(c.dtype(), d);
    EXPECT_TRUE(all_close(c, {19, 22, 43, 50}, 0, 0)) << dtype_name(d);
  }
  // f8e4m3 has spacing 2 in [16, 32) and 4 in [32, 64): 19 -> 20 (tie to even), 22, 43 -> 44, 50 -> 48.
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).to_dtype(DType::F8E4M3);
  Tensor b = Tensor::from_vector<double>({5, 6, 7, 8}, {2, 2}).to_dtype(DType::F8E4M3);
  EXPECT_TRUE(all_close(a.matmul(b), {20, 22, 44, 48}, 0, 0));
}

TEST(Matmul, IntegerWrapByHand) {
  // u8: 200*200 + 100*100 + 255*255 = 115025 = 449*256 + 81
  Tensor a = Tensor::from_vector<uint8_t>({200, 100, 255}, {1, 3});
  Tensor b = Tensor::from_vector<uint8_t>({200, 100, 255}, {3, 1});
  EXPECT_EQ(a.matmul(b).to_vector<uint8_t>(), std::vector<uint8_t>{81});
  // i16: 300*300 = 90000 = 65536 + 24464
  Tensor c = Tensor::from_vector<int32_t>({300}, {1, 1}).to_dtype(DType::I16);
  EXPECT_EQ(c.matmul(c).to_dtype(DType::I32).to_vector<int32_t>(), std::vector<int32_t>{24464});
  // i64: INT64_MAX * 2 wraps to -2
  Tensor e = Tensor::from_vector<int64_t>({INT64_MAX}, {1, 1});
  Tensor f = Tensor::from_vector<int64_t>({2}, {1, 1});
  EXPECT_EQ(e.matmul(f).to_vector<int64_t>(), std::vector<int64_t>{-2});
}

TEST(Matmul, BatchDimsThatCannotMerge) {
  // (2, 3, 4, 5) stored as (3, 2, 4, 5) permuted: the batch strides do not chain.
  const json& c = find_case("batch4d_f32");
  Tensor a = fa("batch4d_f32").permute({1, 0, 2, 3}).contiguous().permute({1, 0, 2, 3});
  Tensor b = fb("batch4d_f32");
  ASSERT_FALSE(a.is_contiguous());
  expect_matches(c, a.matmul(b));
  expect_matches(c, a.matmul(wick::test::as_transposed(b)));
  // both operands with unmergeable batch dims
  Tensor b2 = b.permute({1, 0, 2, 3}).contiguous().permute({1, 0, 2, 3});
  expect_matches(c, a.matmul(b2));
}

TEST(Matmul, InnerStridesBothAboveOne) {
  for (const char* name : {"small_f32", "small_i32", "small_bf16"}) {
    const json& c = find_case(name);
    Tensor a = fa(name), b = fb(name);
    // every other element of a larger last dim: inner strides (8, 2)
    Tensor a2 = Tensor::stack({a, Tensor::zeros(a.shape(), a.dtype())}, -1).narrow(-1, 0, 1).squeeze(-1);
    ASSERT_EQ(a2.layout().strides.back(), 2);
    // and the odd elements, so the view also starts at an offset
    Tensor b2 = Tensor::stack({Tensor::zeros(b.shape(), b.dtype()), b}, -1).narrow(-1, 1, 1).squeeze(-1);
    expect_matches(c, a2.matmul(b2));
    expect_matches(c, a2.matmul(b));
  }
}

TEST(Matmul, InnerZeroStrideBroadcast) {
  const json& c = find_case("same_rows_f32");
  Tensor a = fa("same_rows_f32");
  Tensor a_b = a.narrow(0, 0, 1).broadcast_as(a.shape());  // strides (0, 1)
  ASSERT_EQ(a_b.layout().strides[0], 0);
  expect_matches(c, a_b.matmul(fb("same_rows_f32")));
}

TEST(Matmul, BroadcastBatchSharesStorage) {
  // lhs batch 1 vs rhs batch 4 (and lhs expanded explicitly with a zero stride): same result.
  const json& c = find_case("bcast_1_vs_b_f32");
  Tensor a = fa("bcast_1_vs_b_f32"), b = fb("bcast_1_vs_b_f32");
  Tensor a4 = a.broadcast_as({4, 3, 4});
  ASSERT_EQ(a4.layout().strides[0], 0);
  expect_matches(c, a4.matmul(b));
  expect_matches(c, a.matmul(b));
}

TEST(Matmul, TransposedViewOfSelf) {
  // x x^T with both operands sharing one storage; checked by hand: rows (1,2,3), (4,5,6).
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(x.matmul(x.t()), {14, 32, 32, 77}, 0, 0));
  EXPECT_TRUE(all_close(x.t().matmul(x), {17, 22, 27, 22, 29, 36, 27, 36, 45}, 0, 0));
  Tensor xi = x.to_dtype(DType::I16);
  EXPECT_TRUE(all_close(xi.t().matmul(xi), {17, 22, 27, 22, 29, 36, 27, 36, 45}, 0, 0));
}

TEST(Matmul, EmptyShapes) {
  Tensor z = Tensor::ones({2, 3, 0}, DType::F16).matmul(Tensor::ones({2, 0, 4}, DType::F16));
  EXPECT_EQ(z.shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(all_close(z, std::vector<double>(24, 0.0), 0, 0));
  Tensor zi = Tensor::ones({3, 0}, DType::U8).matmul(Tensor::ones({0, 2}, DType::U8));
  EXPECT_EQ(zi.to_vector<uint8_t>(), std::vector<uint8_t>(6, 0));
  EXPECT_EQ(Tensor::ones({0, 4}, DType::I64).matmul(Tensor::ones({4, 5}, DType::I64)).shape(), (Shape{0, 5}));
  EXPECT_EQ(Tensor::ones({2, 0, 3, 4}, DType::F32).matmul(Tensor::ones({4, 5}, DType::F32)).shape(),
            (Shape{2, 0, 3, 5}));
  EXPECT_EQ(Tensor::ones({0}, DType::F32).dot(Tensor::ones({0}, DType::F32)).item<float>(), 0.0f);
  EXPECT_EQ(Tensor::ones({0}, DType::F32).dot(Tensor::ones({0}, DType::F32)).shape(), Shape{});
}

TEST(Matmul, DotAndMvShapes) {
  Tensor v = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor d = v.dot(v);
  EXPECT_EQ(d.shape(), Shape{});
  EXPECT_EQ(d.item<float>(), 14.0f);
  Tensor m = Tensor::from_vector<float>({1, 0, 0, 0, 1, 1}, {2, 3});
  Tensor r = m.mv(v);
  EXPECT_EQ(r.shape(), Shape{2});
  EXPECT_TRUE(all_close(r, {1, 5}, 0, 0));
  EXPECT_TRUE(all_close(m.t().mv(Tensor::from_vector<float>({1, 2}, {2})), {1, 2, 2}, 0, 0));
}

namespace {
// Runs f, expecting wick::Error of `kind` whose message contains every one of `parts`.
template <class F> void expect_error(F&& f, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " / " << p;
  }
}
}  // namespace

TEST(Matmul, Errors) {
  Tensor a = Tensor::ones({2, 3}, DType::F32), b = Tensor::ones({4, 5}, DType::F32);
  expect_error([&] { a.matmul(b); }, ErrorKind::Shape, {"matmul", "[2, 3]", "[4, 5]"});
  expect_error([&] { a.matmul(Tensor::ones({3, 5}, DType::F64)); }, ErrorKind::DType, {"matmul", "f32", "f64"});
  expect_error([&] { a.matmul(Tensor::ones({3}, DType::F32)); }, ErrorKind::Shape, {"matmul", "[3]", "mv"});
  expect_error([&] { Tensor::ones({3}, DType::F32).matmul(a); }, ErrorKind::Shape, {"dot"});
  expect_error([&] { Tensor::ones({2, 2, 3}, DType::F32).matmul(Tensor::ones({3, 3, 4}, DType::F32)); },
               ErrorKind::Shape, {"matmul", "[2, 2, 3]", "[3, 3, 4]", "broadcast"});
  expect_error([&] { Tensor::ones({3}, DType::F32).dot(Tensor::ones({4}, DType::F32)); }, ErrorKind::Shape,
               {"dot", "[3]", "[4]"});
  expect_error([&] { a.dot(a); }, ErrorKind::Shape, {"dot", "[2, 3]"});
  expect_error([&] { a.mv(Tensor::ones({2}, DType::F32)); }, ErrorKind::Shape, {"mv", "[2, 3]", "[2]"});
  expect_error([&] { a.mv(a); }, ErrorKind::Shape, {"mv"});
  expect_error([&] { Tensor::ones({3}, DType::F32).mv(Tensor::ones({3}, DType::F32)); }, ErrorKind::Shape, {"mv"});
  EXPECT_THROW(Tensor().matmul(a), wick::Error);
  EXPECT_THROW(a.matmul(Tensor()), wick::Error);
  EXPECT_THROW(Tensor::ones({2, 3}, DType::U8).matmul(Tensor::ones({3, 2}, DType::I16)), wick::Error);
}

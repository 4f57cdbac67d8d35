// Element-wise composites from Candle's Tensor API (src/core/tensor_composite.cpp): round_to.
// Expected values are hand arithmetic.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;

namespace {

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("round_to"), std::string::npos) << e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::Internal;
}

}  // namespace

TEST(RoundTo, HandValuesF64AndF32) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // 0.125 * 100 = 12.5 exactly: half away from zero gives 13; -0.125 gives -13
  const std::vector<double> x{3.14159, -2.71828, 0.125, -0.125, 1234.5678, -250.0, inf, nan};
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor t = Tensor::from_vector(x, {x.size()}).to_dtype(dt);
    const double rtol = dt == DType::F64 ? 1e-15 : 1e-6;
    EXPECT_TRUE(all_close(t.round_to(2), {3.14, -2.72, 0.13, -0.13, 1234.57, -250, inf, nan}, rtol, 0));
    EXPECT_TRUE(all_close(t.round_to(0), {3, -3, 0, -0, 1235, -250, inf, nan}, 0, 0));
    // negative decimals: to tens and hundreds; -250 / 100 = -2.5 rounds away from zero to -3
    EXPECT_TRUE(all_close(t.round_to(-1), {0, -0, 0, -0, 1230, -250, inf, nan}, rtol, 0));
    EXPECT_TRUE(all_close(t.round_to(-2), {0, -0, 0, -0, 1200, -300, inf, nan}, rtol, 0));
    EXPECT_EQ(t.round_to(2).dtype(), dt);
    EXPECT_EQ(t.round_to(2).shape(), (Shape{x.size()}));
  }
}

TEST(RoundTo, HalfTypesComputeInF32AndRoundOnce) {
  // 1.375 and -2.625 are exact in bf16/f16; * 10 = 13.75 -> 14 -> 1.4 (rounded to the type)
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = Tensor::from_vector(std::vector<double>{1.375, -2.625, 96.0}, {3}).to_dtype(dt);
    Tensor want = Tensor::from_vector(std::vector<double>{1.4, -2.6, 96.0}, {3}).to_dtype(dt);
    EXPECT_TRUE(all_close(t.round_to(1), wick::test::values(want), 0, 0));
    EXPECT_TRUE(all_close(t.round_to(-1), {0, -0, 100}, 0, 0));
  }
}

TEST(RoundTo, IntegersAndLimits) {
  Tensor i = Tensor::from_vector(std::vector<int64_t>{5, -7, INT64_MAX}, {3});
  EXPECT_EQ(i.round_to(0).to_vector<int64_t>(), (std::vector<int64_t>{5, -7, INT64_MAX}));
  EXPECT_EQ(i.round_to(3).to_vector<int64_t>(), (std::vector<int64_t>{5, -7, INT64_MAX}));
  EXPECT_EQ(Tensor::full({2}, 200, DType::U8).round_to(2).to_vector<uint8_t>(), (std::vector<uint8_t>{200, 200}));
  EXPECT_EQ(kind_of([&] { i.round_to(-1); }), ErrorKind::DType);
  // 10^39 overflows f32, 10^309 overflows f64
  Tensor f = Tensor::ones({2}, DType::F32);
  EXPECT_EQ(kind_of([&] { f.round_to(39); }), ErrorKind::Argument);
  EXPECT_EQ(kind_of([&] { f.round_to(-39); }), ErrorKind::Argument);
  EXPECT_EQ(kind_of([&] { Tensor::ones({2}, DType::BF16).round_to(40); }), ErrorKind::Argument);
  EXPECT_NO_THROW(f.round_to(38));
  EXPECT_TRUE(all_close(f.to_dtype(DType::F64).round_to(39), {1, 1}, 1e-15, 0));
  EXPECT_EQ(kind_of([&] { f.to_dtype(DType::F64).round_to(309); }), ErrorKind::Argument);
  EXPECT_THROW(Tensor().round_to(1), Error);
  EXPECT_EQ(Tensor::zeros({0, 3}, DType::F32).round_to(2).shape(), (Shape{0, 3}));
}

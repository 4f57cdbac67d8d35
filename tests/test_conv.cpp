// Convolutions, pooling and resampling against tests/fixtures/conv.json (written by
// gen_conv.py with plain numpy loops) and hand arithmetic.
#include <cmath>
#include <optional>

#include "test_util.hpp"

using namespace wick;
using namespace wick::test;

namespace {

const nlohmann::json& fx(const char* family) {
  static const nlohmann::json j = load_json_fixture("conv.json");
  return j.at(family);
}

const DType kFloats[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::F8E4M3};
const DType kInts[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

double atol_for(DType d) {
  switch (d) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-5;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1e-2;
    case DType::F8E4M3: return 2e-2;
    default: return 0;
  }
}

Tensor f64_tensor(const nlohmann::json& j) {
  return Tensor::from_vector(doubles_from_json(j.at("data")), j.at("shape").get<Shape>());
}
Shape shape_of(const nlohmann::json& j) { return j.at("shape").get<Shape>(); }

// Integer tensor holding round(v * mul + add) of a fixture's values, wrapped into d.
Tensor int_tensor(const nlohmann::json& j, DType d, double mul, double add = 0) {
  std::vector<int64_t> v;
  for (double x : doubles_from_json(j.at("data"))) v.push_back(int64_t(std::llround(x * mul + add)));
  return Tensor::from_vector(v, shape_of(j)).to_dtype(d);
}

// v wrapped into integer dtype d (C++'s modular conversions), as a double.
double wrap_to(DType d, int64_t v) {
  switch (d) {
    case DType::U8: return double(uint8_t(v));
    case DType::U32: return double(uint32_t(v));
    case DType::I16: return double(int16_t(v));
    case DType::I32: return double(int32_t(v));
    default: return double(v);
  }
}
std::vector<double> int_want(const nlohmann::json& j, DType d, double mul, double add = 0) {
  std::vector<double> out;
  for (double x : doubles_from_json(j.at("data"))) out.push_back(wrap_to(d, int64_t(std::llround(x * mul + add))));
  return out;
}

// The same values in other layouts: transposed last dims, offset, and a batch-innermost storage.
std::vector<std::pair<const char*, Tensor>> layouts(const Tensor& t) {
  std::vector<std::pair<const char*, Tensor>> v = {{"contiguous", t}, {"transposed", as_transposed(t)},
                                                   {"offset", as_offset(t)}};
  if (t.rank() == 4) v.push_back({"channels_last", t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2})});
  if (t.rank() == 3) v.push_back({"batch_inner", t.permute({1, 2, 0}).contiguous().permute({2, 0, 1})});
  return v;
}

Conv1dParams p1(const nlohmann::json& c) {
  Conv1dParams p;
  p.padding = c.at("padding");
  p.stride = c.at("stride");
  p.dilation = c.at("dilation");
  p.groups = c.at("groups");
  p.output_padding = c.value("output_padding", 0);
  return p;
}
Conv2dParams p2(const nlohmann::json& c) {
  Conv2dParams p;
  p.padding_h = c.at("padding")[0];
  p.padding_w = c.at("padding")[1];
  p.stride_h = c.at("stride")[0];
  p.stride_w = c.at("stride")[1];
  p.dilation_h = c.at("dilation")[0];
  p.dilation_w = c.at("dilation")[1];
  p.groups = c.at("groups");
  if (c.contains("output_padding")) {
    p.output_padding_h = c.at("output_padding")[0];
    p.output_padding_w = c.at("output_padding")[1];
  }
  return p;
}

using ConvFn = Tensor (*)(const Tensor&, const Tensor&, const nlohmann::json&);
Tensor run_conv1d(const Tensor& x, const Tensor& w, const nlohmann::json& c) { return x.conv1d(w, p1(c)); }
Tensor run_convt1d(const Tensor& x, const Tensor& w, const nlohmann::json& c) { return x.conv_transpose1d(w, p1(c)); }
Tensor run_conv2d(const Tensor& x, const Tensor& w, const nlohmann::json& c) { return x.conv2d(w, p2(c)); }
Tensor run_convt2d(const Tensor& x, const Tensor& w, const nlohmann::json& c) { return x.conv_transpose2d(w, p2(c)); }

// Every fixture case in every float dtype and layout of input and kernel.
void check_conv_floats(const char* family, ConvFn fn) {
  int i = 0;
  for (const auto& c : fx(family)) {
    const Tensor x = f64_tensor(c.at("x")), w = f64_tensor(c.at("w"));
    const auto want = doubles_from_json(c.at("out").at("data"));
    for (DType d : kFloats) {
      const Tensor xd = x.to_dtype(d), wd = w.to_dtype(d);
      for (const auto& [name, xl] : layouts(xd)) {
        SCOPED_TRACE(std::string(family) + " case " + std::to_string(i) + " " + dtype_name(d) + " input " + name);
        Tensor y = fn(xl, wd, c);
        EXPECT_EQ(y.shape(), shape_of(c.at("out")));
        EXPECT_EQ(y.dtype(), d);
        EXPECT_TRUE(all_close(y, want, rtol_for(d), atol_for(d)));
      }
      for (const auto& [name, wl] : layouts(wd)) {
        SCOPED_TRACE(std::string(family) + " case " + std::to_string(i) + " " + dtype_name(d) + " kernel " + name);
        EXPECT_TRUE(all_close(fn(xd, wl, c), want, rtol_for(d), atol_for(d)));
      }
    }
    ++i;
  }
}

// Integers: inputs scaled by 8 are exact integers, the result is 64 * out wrapped into the
// type (wrapping arithmetic is exact modulo 2^bits, so negative values work for u8/u32 too).
void check_conv_ints(const char* family, ConvFn fn) {
  int i = 0;
  for (const auto& c : fx(family)) {
    for (DType d : kInts) {
      SCOPED_TRACE(std::string(family) + " case " + std::to_string(i) + " " + dtype_name(d));
      const Tensor x = int_tensor(c.at("x"), d, 8), w = int_tensor(c.at("w"), d, 8);
      const auto want = int_want(c.at("out"), d, 64);
      Tensor y = fn(x, w, c);
      EXPECT_EQ(y.dtype(), d);
      EXPECT_TRUE(all_close(y, want, 0, 0));
      EXPECT_TRUE(all_close(fn(as_transposed(x), as_offset(w), c), want, 0, 0));
    }
    ++i;
  }
}

}  // namespace

TEST(Conv1d, FixtureFloats) { check_conv_floats("conv1d", run_conv1d); }
TEST(Conv1d, FixtureInts) { check_conv_ints("conv1d", run_conv1d); }
TEST(Conv2d, FixtureFloats) { check_conv_floats("conv2d", run_conv2d); }
TEST(Conv2d, FixtureInts) { check_conv_ints("conv2d", run_conv2d); }
TEST(ConvTranspose1d, FixtureFloats) { check_conv_floats("conv_transpose1d", run_convt1d); }
TEST(ConvTranspose1d, FixtureInts) { check_conv_ints("conv_transpose1d", run_convt1d); }
TEST(ConvTranspose2d, FixtureFloats) { check_conv_floats("conv_transpose2d", run_convt2d); }
TEST(ConvTranspose2d, FixtureInts) { check_conv_ints("conv_transpose2d", run_convt2d); }

TEST(Conv1d, HandValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 4});
  Tensor w = Tensor::from_vector<float>({1, 0, -1}, {1, 1, 3});
  EXPECT_TRUE(all_close(x.conv1d(w), {-2, -2}));
  Conv1dParams p;
  p.padding = 1;
  EXPECT_TRUE(all_close(x.conv1d(w, p), {-2, -2, -2, 3}));  // [0,1,2,3,4,0]
  p.stride = 2;
  EXPECT_TRUE(all_close(x.conv1d(w, p), {-2, -2}));
  // transposed with stride 2: x[i] * w scattered at 2i - 1 + k
  Tensor xt = Tensor::from_vector<float>({1, 10}, {1, 1, 2});
  Tensor wt = Tensor::from_vector<float>({1, 2, 3}, {1, 1, 3});
  Conv1dParams pt;
  pt.stride = 2;
  EXPECT_TRUE(all_close(xt.conv_transpose1d(wt, pt), {1, 2, 13, 20, 30}));
  pt.padding = 1;
  pt.output_padding = 1;
  EXPECT_TRUE(all_close(xt.conv_transpose1d(wt, pt), {2, 13, 20, 30}));
}

TEST(Conv, IntegerWraps) {
  Tensor x = Tensor::from_vector<uint8_t>({200, 100}, {1, 2, 1});
  Tensor w = Tensor::from_vector<uint8_t>({2, 1}, {1, 2, 1});
  EXPECT_EQ(x.conv1d(w).to_vector<uint8_t>(), std::vector<uint8_t>{244});  // 500 mod 256
  Tensor xi = Tensor::from_vector<int32_t>({1 << 30, 1 << 30}, {1, 1, 1, 2});
  Tensor wi = Tensor::from_vector<int32_t>({2, 2}, {1, 1, 1, 2});
  EXPECT_EQ(xi.conv2d(wi).to_vector<int32_t>(), std::vector<int32_t>{0});  // 2^32 wraps to 0
  Tensor xl = Tensor::from_vector<int64_t>({INT64_MAX, 1}, {1, 2, 1});
  Tensor wl = Tensor::from_vector<int64_t>({1, 1}, {1, 2, 1});
  EXPECT_EQ(xl.conv1d(wl).to_vector<int64_t>(), std::vector<int64_t>{INT64_MIN});
}

TEST(Conv, BroadcastOperands) {
  const auto& c = fx("conv2d")[0];
  const Tensor x = f64_tensor(c.at("x")), w = f64_tensor(c.at("w"));
  const auto full = doubles_from_json(c.at("out").at("data"));
  const Shape os = shape_of(c.at("out"));  // (2, 4, 3, 4)
  const size_t per_batch = os[1] * os[2] * os[3], per_chan = os[2] * os[3];
  for (DType d : {DType::F32, DType::F64}) {
    // batch broadcast (stride 0): every batch item equals batch 0's result
    Tensor xb = x.to_dtype(d).narrow(0, 0, 1).broadcast_as({3, x.dim(1), x.dim(2), x.dim(3)});
    std::vector<double> want;
    for (int b = 0; b < 3; ++b) want.insert(want.end(), full.begin(), full.begin() + long(per_batch));
    EXPECT_TRUE(all_close(xb.conv2d(w.to_dtype(d)), want, rtol_for(d), atol_for(d)));
    // kernel broadcast over c_out: every channel equals channel 0's result
    Tensor wb = w.to_dtype(d).narrow(0, 0, 1).broadcast_as(w.shape());
    want.clear();
    for (size_t b = 0; b < os[0]; ++b)
      for (size_t ch = 0; ch < os[1]; ++ch)
        want.insert(want.end(), full.begin() + long(b * per_batch), full.begin() + long(b * per_batch + per_chan));
    EXPECT_TRUE(all_close(x.to_dtype(d).conv2d(wb), want, rtol_for(d), atol_for(d)));
  }
}

TEST(Conv, EmptyShapes) {
  Tensor x0 = Tensor::zeros({0, 3, 7}, DType::F32);
  Tensor w = Tensor::ones({4, 3, 3}, DType::F32);
  EXPECT_EQ(x0.conv1d(w).shape(), (Shape{0, 4, 5}));
  Tensor w0 = Tensor::ones({0, 3, 3}, DType::F32);
  EXPECT_EQ(Tensor::ones({2, 3, 7}, DType::F32).conv1d(w0).shape(), (Shape{2, 0, 5}));
  EXPECT_EQ(Tensor::zeros({0, 3, 4, 4}, DType::F16).conv2d(Tensor::ones({2, 3, 3, 3}, DType::F16)).shape(),
            (Shape{0, 2, 2, 2}));
  EXPECT_EQ(Tensor::zeros({0, 3, 4, 4}, DType::F32).conv_transpose2d(Tensor::ones({3, 2, 3, 3}, DType::F32)).shape(),
            (Shape{0, 2, 6, 6}));
  // no input channels: every output is an empty sum
  Tensor xc = Tensor::ones({1, 0, 5}, DType::F32);
  EXPECT_TRUE(all_close(xc.conv1d(Tensor::ones({2, 0, 3}, DType::F32)), {0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Tensor::zeros({0, 2, 4, 4}, DType::F32).max_pool2d(2, 2, 2, 2).shape(), (Shape{0, 2, 2, 2}));
  EXPECT_EQ(Tensor::zeros({0, 2, 4, 4}, DType::F32).upsample_bilinear2d(3, 3, false).shape(), (Shape{0, 2, 3, 3}));
  EXPECT_EQ(Tensor::zeros({2, 0, 4}, DType::U8).upsample_nearest1d(9).shape(), (Shape{2, 0, 9}));
}

TEST(Conv, Errors) {
  auto x = Tensor::ones({2, 4, 8}, DType::F32);
  auto w = Tensor::ones({6, 2, 3}, DType::F32);
  auto expect_kind = [](auto f, ErrorKind k) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), k) << e.what();
    }
  };
  Conv1dParams g2;
  g2.groups = 2;
  EXPECT_NO_THROW(x.conv1d(w, g2));
  expect_kind([&] { x.conv1d(w); }, ErrorKind::Shape);                                         // c_in/groups mismatch
  expect_kind([&] { x.conv1d(w.to_dtype(DType::F64), g2); }, ErrorKind::DType);
  expect_kind([&] { x.conv1d(Tensor::ones({6, 2, 3, 1}, DType::F32), g2); }, ErrorKind::Shape);  // rank
  expect_kind([&] { x.reshape({8, 8}).conv1d(w, g2); }, ErrorKind::Shape);
  Conv1dParams g3;
  g3.groups = 3;
  expect_kind([&] { x.conv1d(Tensor::ones({6, 1, 3}, DType::F32), g3); }, ErrorKind::Shape);  // 4 % 3
  Conv1dParams g4;
  g4.groups = 4;
  expect_kind([&] { x.conv1d(Tensor::ones({6, 1, 3}, DType::F32), g4); }, ErrorKind::Shape);  // c_out 6 % 4
  Conv1dParams g0;
  g0.groups = 0;
  expect_kind([&] { x.conv1d(w, g0); }, ErrorKind::Argument);
  Conv1dParams s0 = g2;
  s0.stride = 0;
  expect_kind([&] { x.conv1d(w, s0); }, ErrorKind::Argument);
  Conv1dParams d0 = g2;
  d0.dilation = 0;
  expect_kind([&] { x.conv1d(w, d0); }, ErrorKind::Argument);
  Conv1dParams op = g2;
  op.output_padding = 1;
  expect_kind([&] { x.conv1d(w, op); }, ErrorKind::Argument);
  expect_kind([&] { x.conv1d(Tensor::ones({6, 2, 9}, DType::F32), g2); }, ErrorKind::Shape);  // kernel > input
  Conv1dParams dil = g2;
  dil.dilation = 4;  // span 9 > 8
  expect_kind([&] { x.conv1d(w, dil); }, ErrorKind::Shape);
  dil.padding = 1;  // padded input 10 >= 9
  EXPECT_EQ(x.conv1d(w, dil).shape(), (Shape{2, 6, 2}));
  expect_kind([&] { x.conv1d(Tensor::ones({6, 2, 0}, DType::F32), g2); }, ErrorKind::Shape);
  expect_kind([&] { x.conv1d(Tensor()); }, ErrorKind::Argument);

  // transposed: kernel (c_in, c_out/groups, k), output_padding < stride or < dilation
  auto wt = Tensor::ones({4, 3, 3}, DType::F32);
  Conv1dParams t;
  t.stride = 2;
  t.output_padding = 1;
  EXPECT_EQ(x.conv_transpose1d(wt, t).shape(), (Shape{2, 3, 18}));
  t.output_padding = 2;
  expect_kind([&] { x.conv_transpose1d(wt, t); }, ErrorKind::Argument);
  t.dilation = 3;  // 2 < dilation: allowed; (8-1)*2 + 3*(3-1) + 2 + 1 = 23
  EXPECT_EQ(x.conv_transpose1d(wt, t).shape(), (Shape{2, 3, 23}));
  expect_kind([&] { x.conv_transpose1d(Tensor::ones({3, 3, 3}, DType::F32)); }, ErrorKind::Shape);
  Conv1dParams big;
  big.padding = 10;  // (8-1) + 2 + 1 - 20 < 1
  expect_kind([&] { x.conv_transpose1d(wt, big); }, ErrorKind::Shape);
  expect_kind([&] { Tensor::ones({2, 4, 0}, DType::F32).conv_transpose1d(wt); }, ErrorKind::Shape);

  auto x2 = Tensor::ones({1, 3, 5, 5}, DType::F32);
  expect_kind([&] { x2.conv2d(Tensor::ones({2, 3, 6, 3}, DType::F32)); }, ErrorKind::Shape);
  expect_kind([&] { x2.conv2d(Tensor::ones({2, 2, 3, 3}, DType::F32)); }, ErrorKind::Shape);
  Conv2dParams p2s;
  p2s.stride_w = 0;
  expect_kind([&] { x2.conv2d(Tensor::ones({2, 3, 3, 3}, DType::F32), p2s); }, ErrorKind::Argument);
  Conv2dParams p2o;
  p2o.stride_h = 2;
  p2o.output_padding_h = 1;
  p2o.output_padding_w = 1;  // stride_w = dilation_w = 1
  expect_kind([&] { x2.conv_transpose2d(Tensor::ones({3, 2, 3, 3}, DType::F32), p2o); }, ErrorKind::Argument);
  p2o.output_padding_w = 0;
  EXPECT_EQ(x2.conv_transpose2d(Tensor::ones({3, 2, 3, 3}, DType::F32), p2o).shape(), (Shape{1, 2, 12, 7}));
}

TEST(Pool, AvgFixture) {
  int i = 0;
  for (const auto& c : fx("avg_pool2d")) {
    const Tensor x = f64_tensor(c.at("x"));
    const auto want = doubles_from_json(c.at("out").at("data"));
    for (DType d : kFloats)
      for (const auto& [name, xl] : layouts(x.to_dtype(d))) {
        SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d) + " " + name);
        Tensor y = xl.avg_pool2d(c.at("kh"), c.at("kw"), c.at("sh"), c.at("sw"));
        EXPECT_EQ(y.shape(), shape_of(c.at("out")));
        EXPECT_TRUE(all_close(y, want, rtol_for(d), atol_for(d)));
      }
    ++i;
  }
}

TEST(Pool, MaxFixture) {
  int i = 0;
  for (const auto& c : fx("max_pool2d")) {
    const Tensor x = f64_tensor(c.at("x"));
    const auto want = doubles_from_json(c.at("out").at("data"));
    for (DType d : kFloats)
      for (const auto& [name, xl] : layouts(x.to_dtype(d))) {
        SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d) + " " + name);
        Tensor y = xl.max_pool2d(c.at("kh"), c.at("kw"), c.at("sh"), c.at("sw"));
        EXPECT_EQ(y.shape(), shape_of(c.at("out")));
        EXPECT_TRUE(all_close(y, want, 0, 0));  // max returns an input element exactly
      }
    if (!c.contains("nan")) {
      // integers: 8x + 16 is a non-negative integer and keeps the order
      for (DType d : kInts) {
        SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d));
        const Tensor xi = int_tensor(c.at("x"), d, 8, 16);
        EXPECT_TRUE(all_close(as_transposed(xi).max_pool2d(c.at("kh"), c.at("kw"), c.at("sh"), c.at("sw")),
                              int_want(c.at("out"), d, 8, 16), 0, 0));
      }
    }
    ++i;
  }
}

TEST(Pool, HandValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 1, 3, 4});
  EXPECT_TRUE(all_close(x.avg_pool2d(2, 2, 2, 2), {3.5, 5.5}));  // last row dropped (floor)
  EXPECT_TRUE(all_close(x.max_pool2d(2, 2, 1, 1), {6, 7, 8, 10, 11, 12}));
  Tensor n = Tensor::from_vector<float>({NAN, 1, 5, 2}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(n.max_pool2d(2, 2, 1, 1).item<float>()));
  Tensor n2 = Tensor::from_vector<float>({1, 5, 2, NAN}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(n2.max_pool2d(2, 2, 1, 1).item<float>()));
  Tensor neg = Tensor::from_vector<int16_t>({-5, -3, -9, -4}, {1, 1, 2, 2});
  EXPECT_EQ(neg.max_pool2d(2, 2, 2, 2).item<int16_t>(), -3);
}

TEST(Pool, Errors) {
  auto x = Tensor::ones({1, 2, 3, 4}, DType::F32);
  EXPECT_THROW(x.avg_pool2d(4, 2, 1, 1), Error);
  EXPECT_THROW(x.max_pool2d(2, 5, 1, 1), Error);
  EXPECT_THROW(x.max_pool2d(0, 2, 1, 1), Error);
  EXPECT_THROW(x.max_pool2d(2, 2, 1, 0), Error);
  EXPECT_THROW(x.reshape({2, 3, 4}).max_pool2d(2, 2, 1, 1), Error);
  EXPECT_THROW(x.to_dtype(DType::I32).avg_pool2d(2, 2, 1, 1), Error);
  EXPECT_NO_THROW(x.to_dtype(DType::I32).max_pool2d(2, 2, 1, 1));
}

TEST(Upsample, Nearest1dFixture) {
  int i = 0;
  for (const auto& c : fx("upsample_nearest1d")) {
    const Tensor x = f64_tensor(c.at("x"));
    const auto want = doubles_from_json(c.at("out").at("data"));
    for (DType d : kFloats)
      for (const auto& [name, xl] : layouts(x.to_dtype(d))) {
        SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d) + " " + name);
        Tensor y = xl.upsample_nearest1d(c.at("out_l"));
        EXPECT_EQ(y.shape(), shape_of(c.at("out")));
        EXPECT_TRUE(all_close(y, want, 0, 0));
      }
    for (DType d : kInts) {
      SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d));
      EXPECT_TRUE(all_close(as_offset(int_tensor(c.at("x"), d, 8)).upsample_nearest1d(c.at("out_l")),
                            int_want(c.at("out"), d, 8), 0, 0));
    }
    ++i;
  }
}

TEST(Upsample, Nearest2dFixture) {
  int i = 0;
  for (const auto& c : fx("upsample_nearest2d")) {
    const Tensor x = f64_tensor(c.at("x"));
    const auto want = doubles_from_json(c.at("out").at("data"));
    for (DType d : kFloats)
      for (const auto& [name, xl] : layouts(x.to_dtype(d))) {
        SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d) + " " + name);
        Tensor y = xl.upsample_nearest2d(c.at("out_h"), c.at("out_w"));
        EXPECT_EQ(y.shape(), shape_of(c.at("out")));
        EXPECT_TRUE(all_close(y, want, 0, 0));
      }
    for (DType d : kInts) {
      SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d));
      EXPECT_TRUE(all_close(as_transposed(int_tensor(c.at("x"), d, 8)).upsample_nearest2d(c.at("out_h"), c.at("out_w")),
                            int_want(c.at("out"), d, 8), 0, 0));
    }
    ++i;
  }
}

TEST(Upsample, BilinearFixture) {
  int i = 0;
  for (const auto& c : fx("upsample_bilinear2d")) {
    const Tensor x = f64_tensor(c.at("x"));
    const auto want = doubles_from_json(c.at("out").at("data"));
    std::optional<double> sh, sw;
    if (!c.at("scale_h").is_null()) sh = c.at("scale_h").get<double>();
    if (!c.at("scale_w").is_null()) sw = c.at("scale_w").get<double>();
    for (DType d : kFloats)
      for (const auto& [name, xl] : layouts(x.to_dtype(d))) {
        SCOPED_TRACE("case " + std::to_string(i) + " " + dtype_name(d) + " " + name);
        Tensor y = xl.upsample_bilinear2d(c.at("out_h"), c.at("out_w"), c.at("align_corners"), sh, sw);
        EXPECT_EQ(y.shape(), shape_of(c.at("out")));
        // f32 interpolates in f32: a few ulps of the inputs' magnitude (<= 2)
        EXPECT_TRUE(all_close(y, want, rtol_for(d), d == DType::F32 ? 2e-6 : atol_for(d)));
      }
    ++i;
  }
}

// PyTorch's documented results for [[1, 2], [3, 4]] upsampled to 4x4.
TEST(Upsample, BilinearHandValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(all_close(x.upsample_bilinear2d(4, 4, false),
                        {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0}));
  const double a = 1.0 / 3, b = 2.0 / 3;
  EXPECT_TRUE(all_close(x.upsample_bilinear2d(4, 4, true),
                        {1, 1 + a, 1 + b, 2, 1 + b, 1 + b + a, 1 + b + b, 2 + b, 1 + 4 * a, 1 + 4 * a + a,
                         1 + 4 * a + b, 2 + 4 * a, 3, 3 + a, 3 + b, 4}, 1e-6, 1e-6));
  // scale 2 gives in/out = 1/2 too: same as without
  EXPECT_TRUE(all_close(x.upsample_bilinear2d(4, 4, false, 2.0, 2.0), values(x.upsample_bilinear2d(4, 4, false))));
}

TEST(Upsample, Errors) {
  auto x = Tensor::ones({1, 2, 3, 4}, DType::F32);
  EXPECT_THROW(x.upsample_nearest2d(0, 4), Error);
  EXPECT_THROW(x.upsample_nearest1d(4), Error);  // rank 4 given
  EXPECT_THROW(x.reshape({2, 3, 4}).upsample_nearest1d(0), Error);
  EXPECT_THROW(Tensor::ones({1, 2, 0}, DType::F32).upsample_nearest1d(3), Error);
  EXPECT_THROW(x.to_dtype(DType::U8).upsample_bilinear2d(4, 4, false), Error);
  EXPECT_THROW(x.upsample_bilinear2d(4, 4, false, -1.0, 2.0), Error);
  EXPECT_THROW(x.upsample_bilinear2d(4, 4, false, 2.0, NAN), Error);
  EXPECT_THROW(x.upsample_bilinear2d(0, 4, true), Error);
  EXPECT_NO_THROW(x.to_dtype(DType::U8).upsample_nearest2d(5, 5));
}

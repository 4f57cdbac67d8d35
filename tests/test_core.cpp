// dtype conversions, layouts and views, constructors, random numbers.
#include <cmath>
#include <cstring>

#include "ops/numeric.hpp"
#include "ops/random.hpp"
#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;

// Reference values below are IEEE facts computed by hand (bit patterns of binary16,
// bfloat16 and OCP E4M3FN), independent of the conversion code.
TEST(DTypeConvert, F16KnownBits) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7bff);        // below the halfway point to 65536
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);        // halfway: ties to even -> inf
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even -> 0
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even stays
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(f32_to_f16_bits(INFINITY), 0x7c00);
  EXPECT_TRUE((f32_to_f16_bits(NAN) & 0x7fff) > 0x7c00);
  EXPECT_EQ(f16_bits_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0xfc00), -INFINITY);
}

TEST(DTypeConvert, F16RoundTripAllBits) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = f16_bits_to_f32(uint16_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_bits(f), b) << b;
  }
}

TEST(DTypeConvert, Bf16KnownBits) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(3.140625f), 0x4049);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, odd -> up
  EXPECT_EQ(f32_to_bf16_bits(3.4028235e38f), 0x7f80);                    // rounds to inf
  EXPECT_EQ(bf16_bits_to_f32(0xc0a0), -5.0f);
}

TEST(DTypeConvert, F8E4M3KnownBits) {
  EXPECT_EQ(f32_to_f8e4m3_bits(1.0f), 0x38);
  EXPECT_EQ(f32_to_f8e4m3_bits(448.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3_bits(460.0f), 0x7e);   // rounds down to 448
  EXPECT_EQ(f32_to_f8e4m3_bits(464.0f), 0x7e);   // tie between 448 (even) and 480 -> 448
  EXPECT_EQ(f32_to_f8e4m3_bits(470.0f), 0x7f);   // rounds to 480: not representable -> NaN
  EXPECT_EQ(f32_to_f8e4m3_bits(-1000.0f), 0xff);  // PyTorch: NaN, sign kept
  EXPECT_EQ(f32_to_f8e4m3_bits(INFINITY), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3_bits(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(f32_to_f8e4m3_bits(std::ldexp(1.0f, -10)), 0x00);  // tie -> even 0
  EXPECT_EQ(f32_to_f8e4m3_bits(std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(f32_to_f8e4m3_bits(0.3f), 0x2a);                   // 0.3 -> 0.3125 = 1.25 * 2^-2
  EXPECT_EQ(f8e4m3_bits_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_bits_to_f32(0x07), 7.0f / 512.0f);
  EXPECT_TRUE(std::isnan(f8e4m3_bits_to_f32(0xff)));
  for (uint32_t b = 0; b < 0x100; ++b) {
    float f = f8e4m3_bits_to_f32(uint8_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f8e4m3_bits(f), b) << b;
  }
}

TEST(DTypeConvert, CastsFollowRustAs) {
  EXPECT_EQ(cast<uint8_t>(300.7f), 255);
  EXPECT_EQ(cast<uint8_t>(-3.5), 0);
  EXPECT_EQ(cast<int16_t>(-40000.0), -32768);
  EXPECT_EQ(cast<int32_t>(NAN), 0);
  EXPECT_EQ(cast<int64_t>(-2.9), -2);
  EXPECT_EQ(cast<uint32_t>(4294967296.0), 4294967295u);
  EXPECT_EQ(cast<int64_t>(1e30), INT64_MAX);
  EXPECT_EQ(cast<uint8_t>(int64_t(257)), 1);  // integer -> integer wraps
  EXPECT_EQ(cast<int16_t>(uint32_t(40000)), int16_t(40000 - 65536));
  // f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is just above the tie, so it rounds up;
  // going through f32 first would land on the tie and round to even (down).
  EXPECT_EQ(cast<f16>(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)).bits, 0x3c01);
}

TEST(Random, PhiloxKnownAnswer) {
  // Random123's published known-answer vector for philox4x32-10, counter 0, key 0.
  Philox4 r = philox4x32_10(0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(Random, UniformAndNormalStatistics) {
  Tensor u = Tensor::rand({100000}, DType::F64, Device::cpu(), 42);
  auto v = u.to_vector<double>();
  double mean = 0, lo = 1, hi = 0;
  for (double x : v) mean += x, lo = std::min(lo, x), hi = std::max(hi, x);
  mean /= double(v.size());
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  auto n = Tensor::randn({100000}, DType::F32, Device::cpu(), 42, 2.0, 3.0).to_vector<float>();
  double m = 0, s = 0;
  for (float x : n) m += x;
  m /= double(n.size());
  for (float x : n) s += (x - m) * (x - m);
  s = std::sqrt(s / double(n.size()));
  EXPECT_NEAR(m, 2.0, 0.03);
  EXPECT_NEAR(s, 3.0, 0.03);
  // same seed, same numbers; a different seed differs
  EXPECT_EQ(Tensor::rand({8}, DType::F32, Device::cpu(), 7).to_vector<float>(),
            Tensor::rand({8}, DType::F32, Device::cpu(), 7).to_vector<float>());
  EXPECT_NE(Tensor::rand({8}, DType::F32, Device::cpu(), 7).to_vector<float>(),
            Tensor::rand({8}, DType::F32, Device::cpu(), 8).to_vector<float>());
  EXPECT_THROW(Tensor::rand({2}, DType::I32, Device::cpu(), 1), Error);
}

TEST(Layout, ContiguityAndReshapeViews) {
  Layout l = Layout::contiguous({2, 3, 4});
  EXPECT_TRUE(l.is_contiguous());
  EXPECT_EQ(l.strides, (std::vector<int64_t>{12, 4, 1}));
  Layout t = l.transpose(0, 2);
  EXPECT_FALSE(t.is_contiguous());
  Layout out;
  EXPECT_FALSE(t.try_reshape({24}, &out));
  // narrowing the last dim keeps rows separate: merging (3, 2) -> 6 is not a view
  Layout n = l.narrow(2, 1, 2);
  EXPECT_FALSE(n.try_reshape({2, 6}, &out));
  EXPECT_TRUE(n.try_reshape({2, 3, 2, 1}, &out));
  EXPECT_EQ(out.strides[2], 1);
  // narrowing the first dim keeps the rest contiguous
  Layout m = l.narrow(0, 1, 1);
  EXPECT_TRUE(m.try_reshape({3, 4}, &out));
  EXPECT_EQ(out.offset, 12u);
  // splitting a strided dim is a view
  Layout s = Layout::contiguous({6, 4}).transpose(0, 1);  // (4, 6) strides (1, 4)
  EXPECT_TRUE(s.try_reshape({4, 2, 3}, &out));
  EXPECT_EQ(out.strides, (std::vector<int64_t>{1, 12, 4}));
  EXPECT_THROW(l.narrow(1, 2, 2), Error);
  EXPECT_THROW(l.broadcast_as({2, 5, 4}), Error);
  EXPECT_EQ(l.broadcast_as({7, 2, 3, 4}).strides, (std::vector<int64_t>{0, 12, 4, 1}));
}

TEST(Tensor, ViewsShareStorageAndReadCorrectly) {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[size_t(i)] = float(i);
  Tensor a = Tensor::from_vector(v, {2, 3, 4});
  Tensor b = a.transpose(0, 2);  // (4, 3, 2): b[i][j][k] = a[k][j][i] = 12k + 4j + i
  EXPECT_EQ(b.storage(), a.storage());
  auto bv = b.to_vector<float>();
  EXPECT_EQ(bv[0], 0.0f);
  EXPECT_EQ(bv[1], 12.0f);
  EXPECT_EQ(bv[2], 4.0f);
  EXPECT_EQ(bv[6], 1.0f);
  EXPECT_EQ(a.narrow(2, 1, 2).narrow(1, 1, 1).to_vector<float>(), (std::vector<float>{5, 6, 17, 18}));
  EXPECT_EQ(a.index({{1, 2}, {0, 1}}).to_vector<float>(), (std::vector<float>{12, 13, 14, 15}));
  EXPECT_EQ(a.get(1).get(2).to_vector<float>(), (std::vector<float>{20, 21, 22, 23}));
  EXPECT_EQ(a.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(a.permute({-1, 0, 1}).to_vector<float>()[1], 4.0f);
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(a.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3, 4}));
  auto ch = a.chunk(3, 2);
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[1].shape(), (Shape{2, 3, 2}));
  Tensor r = b.reshape({4, 6});  // not a view: copies
  EXPECT_NE(r.storage(), a.storage());
  EXPECT_EQ(r.to_vector<float>()[1], 12.0f);
  Tensor br = Tensor::from_vector(std::vector<float>{1, 2}, {2, 1}).broadcast_as({3, 2, 4});
  EXPECT_EQ(br.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1,
                                                       2, 2, 2, 2}));
  EXPECT_THROW(a.to_vector<double>(), Error);
  EXPECT_THROW(a.reshape({5, 5}), Error);
  EXPECT_THROW(a.transpose(0, 3), Error);
  EXPECT_THROW(a.get(2), Error);
}

TEST(Tensor, Constructors) {
  EXPECT_EQ(Tensor::arange(0, 5, 1, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::arange(1, 2, 0.25, DType::F32).to_vector<float>(), (std::vector<float>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(Tensor::arange(5, 0, -2, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(Tensor::eye(3, DType::U8).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Tensor::full({2}, int64_t(1) << 60, DType::I64).to_vector<int64_t>()[1], int64_t(1) << 60);
  EXPECT_EQ(Tensor::ones({3}, DType::BF16).to_vector<bf16>()[2].bits, 0x3f80);
  EXPECT_EQ(Tensor::zeros({0, 3}, DType::F32).numel(), 0u);
  Tensor a = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector(std::vector<int32_t>{5, 6}, {2, 1});
  EXPECT_EQ(Tensor::cat({a, b}, 1).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(Tensor::cat({a, a.t()}, 0).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 1, 3, 2, 4}));
  EXPECT_EQ(Tensor::stack({a, a}, 2).shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(Tensor::stack({a, a}, 2).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_THROW(Tensor::cat({a, b}, 0), Error);
  EXPECT_THROW(Tensor::cat({a, a.to_dtype(DType::F32)}, 0), Error);
  EXPECT_THROW(Tensor::arange(0, 1, 0, DType::F32), Error);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Error);
}

TEST(Tensor, CastsAllPairsOnStridedInput) {
  // values exactly representable in every dtype, so every cast is exact
  std::vector<double> v = {0, 1, 2, 3, 7, 8, 12, 16, 28, 30, 64, 96};
  Tensor base = Tensor::from_vector(v, {3, 4}, Device::cpu());
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      Tensor src = base.to_dtype(from).t();  // strided
      Tensor got = src.to_dtype(to);
      std::vector<double> want;
      for (size_t j = 0; j < 4; ++j)
        for (size_t i = 0; i < 3; ++i) want.push_back(v[i * 4 + j]);
      EXPECT_TRUE(all_close(got, want, 0, 0)) << dtype_name(from) << " -> " << dtype_name(to);
    }
}

TEST(Device, NamesAndErrors) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::cpu().name(), "cpu");
  EXPECT_THROW(Device::parse("tpu:0"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
  EXPECT_EQ(Device::best().is_cpu() || Device::best().is_gpu(), true);
}

// wick::Graph on the CPU records nothing: replay() runs the body again (tests/gpu/test_gpu_graph.cpp
// has the GPU side).
TEST(GraphCpu, ReplayRunsTheBodyAgain) {
  const Device d = Device::cpu();
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}, {2}, d), y;
  int runs = 0;
  Graph g = Graph::capture(d, [&] {
    ++runs;
    y = x.mul(10.0);
  });
  EXPECT_FALSE(g.recorded());
  EXPECT_EQ(runs, 0);
  g.replay();
  x.copy_from(Tensor::from_vector(std::vector<float>{3, 4}, {2}, d));
  g.replay();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{30, 40}));
  EXPECT_THROW(Graph().replay(), Error);
}

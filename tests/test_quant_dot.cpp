// The integer block dot products of src/ops/quant_dot.hpp (what the GPU matrix-vector kernels
// run), on the CPU through dot4_i8's portable fallback. Expected values: the blocks decoded by
// dequantize_block (bit-identical to gguf-py, test_quant) times the Q8_1 activations decoded
// (q * d), summed in f64. The integer path must agree to float rounding: its sums of q_w * q_x
// are exact and each chunk is scaled by a few f32 products, so the bound is a small multiple of
// 2^-24 times the sum of the magnitudes involved (|w_j x_j|, and each sub-block's offset
// |m| * |x_j| <= max|w| * |x_j| for the types with mins; quant_test_blocks.hpp keeps it so).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/quant_dot.hpp"
#include "ops/quant_encode.hpp"
#include "quant_test_blocks.hpp"

using namespace wick;
using namespace wick::quant;

namespace {

constexpr GGMLType kTypes[] = {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,   GGMLType::Q5_1,   GGMLType::Q8_0,
                               GGMLType::Q8_1, GGMLType::Q2_K, GGMLType::Q3_K,   GGMLType::Q4_K,   GGMLType::Q5_K,
                               GGMLType::Q6_K, GGMLType::Q8_K, GGMLType::IQ4_NL, GGMLType::IQ4_XS, GGMLType::MXFP4};

TEST(QuantDot, Dot4MatchesHandValues) {
  // bytes (1, -2, 3, -128) . (5, 6, -7, -1) = 5 - 12 - 21 + 128 = 100
  const int a = int(0x8003FE01u), b = int(0xFFF90605u);
  EXPECT_EQ(dot4_i8(a, b, 0), 100);
  EXPECT_EQ(dot4_i8(a, b, -100), 0);
  EXPECT_EQ(dot4_i8(int(0x80808080u), int(0x80808080u), 7), 4 * 16384 + 7);
  EXPECT_EQ(dot4_i8(dot::kOnes, int(0x7F7F7F7Fu), 0), 4 * 127);
}

TEST(QuantDot, TablesAndBitSpreadingMatchTheDecoder) {
  uint32_t nl[4], mx[4];
  dot::iq4nl_table(nl);
  dot::mxfp4_table(mx);
  for (int n = 0; n < 16; ++n) {
    // all four bytes the same nibble, then one nibble in a different byte each
    const int q = n * 0x01010101;
    // the byte repeated four times, computed unsigned (a byte >= 128 times 0x01010101 passes INT_MAX)
    EXPECT_EQ(uint32_t(dot::lut16(q, nl)), uint32_t(uint8_t(int8_t(quant::detail::iq4nl_value(n)))) * 0x01010101u) << n;
    EXPECT_EQ(uint32_t(dot::lut16(q, mx)), uint32_t(uint8_t(int8_t(quant::detail::mxfp4_value(n)))) * 0x01010101u) << n;
    for (int byte = 0; byte < 4; ++byte) {
      const int got = dot::lut16(n << (8 * byte), nl);
      EXPECT_EQ(int8_t(uint32_t(got) >> (8 * byte)), int8_t(quant::detail::iq4nl_value(n))) << n << " byte " << byte;
      EXPECT_EQ(int8_t(uint32_t(got) >> (8 * ((byte + 1) & 3))), int8_t(quant::detail::iq4nl_value(0)));
    }
  }
  EXPECT_EQ(dot::spread4(0xFu), 0x10101010);
  EXPECT_EQ(dot::spread4(0x5u), 0x00100010);
  EXPECT_EQ(dot::spread4(0x8u), 0x10000000);
}

// Every type, 3 activation rows at once (the rows share one weight unpacking), 3 weight blocks.
TEST(QuantDot, EveryTypeMatchesDequantizeTimesQ8_1) {
  constexpr int M = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GGMLType t : kTypes) {
    dot::dispatch_dot(t, [&](auto tr) {
      using Tr = decltype(tr);
      const int nb = 3, k = nb * Tr::QK, xb = k / 32;
      const std::vector<uint8_t> w = test::random_qblocks(t, nb, 100 + unsigned(t));
      std::vector<float> wf(k);
      for (int i = 0; i < nb; ++i) ASSERT_TRUE(dequantize_block(t, w.data() + i * Tr::BB, wf.data() + i * Tr::QK));
      double wmax = 0;
      for (float v : wf) wmax = std::fmax(wmax, std::fabs(v));
      // activations: each row's blocks at a different scale, one block all zero
      std::vector<uint8_t> xq(size_t(M) * xb * dot::kQ8_1Bytes);
      std::vector<double> xd(size_t(M) * k);
      for (int r = 0; r < M; ++r)
        for (int b = 0; b < xb; ++b) {
          float x[32];
          const float s = (r == 1 && b == 1) ? 0.0f : std::ldexp(1.0f, (b % 5) - 2 - r);
          for (float& v : x) v = s * normal(rng);
          uint8_t* blk = xq.data() + (size_t(r) * xb + b) * dot::kQ8_1Bytes;
          quantize_block_q8_1(x, blk);
          const float d = quant::detail::ld_f16(blk);
          for (int j = 0; j < 32; ++j) xd[size_t(r) * k + b * 32 + j] = double(int8_t(blk[4 + j])) * d;
        }
      float acc[M] = {};
      for (int i = 0; i < nb; ++i)
        for (int c = 0; c < Tr::C; ++c)
          Tr::template run<M>(
              w.data() + i * Tr::BB, c,
              dot::XRows{xq.data() + size_t(i) * (Tr::QK / 32) * dot::kQ8_1Bytes, size_t(xb) * dot::kQ8_1Bytes}, acc);
      for (int r = 0; r < M; ++r) {
        double ref = 0, mag = 0;
        for (int j = 0; j < k; ++j) {
          const double x = xd[size_t(r) * k + j];
          ref += double(wf[j]) * x;
          mag += std::fabs(x) * (std::fabs(wf[j]) + wmax);
        }
        EXPECT_NEAR(acc[r], ref, 1e-6 * mag) << ggml_type_name(t) << " row " << r;
        EXPECT_NE(ref, 0.0) << ggml_type_name(t);  // the data exercise the path
      }
    });
  }
}

// The pair path (the staged GPU kernel): two Q4_0 / Q8_0 blocks read as whole words, x as the XPair
// set_xpair_half builds from Q8_1 blocks (int8 words, f16 scale widened, exact sum of q). Same
// reference (from the Q8_1 bytes) and bound.
template <GGMLType T>
void check_pairs() {
  using P = dot::PairDot<T>;
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<uint8_t> w = test::random_qblocks(T, 2, 300 + unsigned(trial));
    ASSERT_EQ(w.size(), size_t(4 * P::kWords));
    float wf[64];
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(dequantize_block(T, w.data() + i * w.size() / 2, wf + 32 * i));
    uint32_t words[P::kWords];
    std::memcpy(words, w.data(), sizeof words);
    dot::XPair xp{};
    double xd[64];
    for (int b = 0; b < 2; ++b) {
      float x[32];
      const float s = (trial % 7 == 3 && b == 1) ? 0.0f : std::ldexp(1.0f, trial % 9 - 4 + b);
      for (float& v : x) v = s * normal(rng);
      uint8_t blk[dot::kQ8_1Bytes];
      quantize_block_q8_1(x, blk);
      dot::set_xpair_half(xp, b, blk);
      const float d = quant::detail::ld_f16(blk);
      for (int j = 0; j < 32; ++j) xd[32 * b + j] = double(int8_t(blk[4 + j])) * d;
    }
    double wmax = 0, ref = 0, mag = 0;
    for (float v : wf) wmax = std::fmax(wmax, std::fabs(v));
    for (int j = 0; j < 64; ++j) {
      ref += double(wf[j]) * xd[j];
      mag += std::fabs(xd[j]) * (std::fabs(wf[j]) + wmax);
    }
    EXPECT_NEAR(P::run(words, xp), ref, 1e-6 * mag) << ggml_type_name(T) << " trial " << trial;
    if (trial % 7 != 3) EXPECT_NE(ref, 0.0);
  }
}

TEST(QuantDot, BlockPairsMatchDequantizeTimesQ8_1) {
  check_pairs<GGMLType::Q4_0>();
  check_pairs<GGMLType::Q8_0>();
}

}  // namespace

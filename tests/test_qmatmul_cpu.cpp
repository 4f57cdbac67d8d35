// CPU quantized matmul y = x @ W^T (src/backend/cpu/qmatmul.cpp, qdot*.cpp) for every supported
// type at every kernel level this CPU has (scalar, AVX2, AVX-512 VNNI), against W dequantized
// (bit-identical to gguf-py, test_quant) times x in f64 on the host.
//
// The bound. Up to 8 rows, x is quantized per block B (32 elements for Q8_0 activations, 256 for
// Q8_K) to x^_j = d' q_j, and the kernel's integer sums are exact, so
//   |y - y_ref| <= sum_B e_B * sum_{j in B} |w_j|  +  f32 rounding,
// with e_B the largest |x_j - x^_j| of the block:
//   Q8_0: d = amax / 127, q = roundf(x / d), d' = f16(d): |x - d' q| <= |x - d q| + |q| |d - d'|
//         <= d / 2 + 127 |d - f16(d)| (+ 127 * 2^-24 d for the rounding of x * (1 / d));
//   Q8_K: d' = 1 / (-127 / max) in f32, q = nearest(x * -127 / max): e <= d / 2 (1 + 2^-20).
// The rounding term: each block's int32 sum is scaled and added in f32 (at most a few ulp of the
// sum of |terms|, and a term is at most sum |x^_j w_j| ~ sum |x_j w_j|), and W dequantized rounds
// each w_j once (d * q in f32, 1 ulp): 1e-5 * sum |x_j w_j| covers both for k <= 1024 with a
// margin of 10 or more. More than 8 rows take the same kernels (8 rows at a time) or, at the AVX-512
// level for Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS, the panel kernels (16 weight rows
// a vector, the same exact block sums, so the same bound; WICK_QMATMUL_PATH=rows keeps the row kernels); the optional
// dequantize + f32 sgemm path (WICK_QMATMUL_PATH=sgemm) has no activation error, only the
// rounding term, so the same bound holds for it. f16/bf16 results add their own rounding: 2^-11 /
// 2^-8 of |y| (plus that share of the bound).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/qdot.hpp"
#include "backend/options.hpp"
#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"
#include "test_util.hpp"
#include "wick/quant.hpp"

using namespace wick;

namespace {

const GGMLType kTypes[] = {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,   GGMLType::Q5_1,   GGMLType::Q8_0,
                           GGMLType::Q8_1, GGMLType::Q2_K, GGMLType::Q3_K,   GGMLType::Q4_K,   GGMLType::Q5_K,
                           GGMLType::Q6_K, GGMLType::Q8_K, GGMLType::IQ4_NL, GGMLType::IQ4_XS, GGMLType::MXFP4};

uint16_t f16_bits(float f) {
  _Float16 h = static_cast<_Float16>(f);  // the compiler's own RNE conversion, not wick's
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}

// Random blocks of type t for a (n, k) matrix: every quant bit random, scales set to sane values
// (f16 d in [2^-8, 2^-6), signed mins where the type has them), so values stay O(0.1..1).
std::vector<uint8_t> random_blocks(GGMLType t, size_t n, size_t k, uint32_t seed) {
  const size_t be = ggml_block_size(t), bb = ggml_type_size(t), nblk = n * k / be;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> u(1.0f, 4.0f), s(-1.0f, 1.0f);
  std::vector<uint8_t> out(nblk * bb);
  for (auto& b : out) b = uint8_t(byte(rng));
  for (size_t i = 0; i < nblk; ++i) {
    uint8_t* b = out.data() + i * bb;
    const float d = u(rng) / 256;
    switch (t) {
      case GGMLType::Q4_1:
      case GGMLType::Q5_1:
      case GGMLType::Q8_1:
        put16(b, f16_bits(d));
        put16(b + 2, f16_bits(8 * d * s(rng)));  // Q8_1: s, which no decoder reads
        break;
      case GGMLType::Q2_K:
        put16(b + 80, f16_bits(d));
        put16(b + 82, f16_bits(d / 4));
        break;
      case GGMLType::Q3_K:
        put16(b + 108, f16_bits(d / 8));
        break;
      case GGMLType::Q4_K:
      case GGMLType::Q5_K:
        put16(b, f16_bits(d / 8));
        put16(b + 2, f16_bits(d / 8));
        break;
      case GGMLType::Q6_K:
        put16(b + 208, f16_bits(d / 16));
        break;
      case GGMLType::Q8_K: {
        const float dk = d / 16;
        std::memcpy(b, &dk, 4);
        break;
      }
      case GGMLType::IQ4_XS:
        put16(b, f16_bits(d / 16));
        break;
      case GGMLType::MXFP4:
        b[0] = uint8_t(120 + byte(rng) % 6);  // 2^-8 .. 2^-3 (halved e8m0)
        break;
      default:  // Q4_0 Q5_0 Q8_0 IQ4_NL: f16 d first
        put16(b, f16_bits(t == GGMLType::IQ4_NL || t == GGMLType::Q8_0 ? d / 16 : d));
    }
  }
  return out;
}

// The largest error of x's activation quantization in the block of x_j, as the header derives.
double act_err(GGMLType w_type, const float* xb, size_t len) {
  double amax = 0;
  for (size_t j = 0; j < len; ++j) amax = std::max(amax, double(std::fabs(xb[j])));
  const float d = float(amax) / 127.0f;
  if (ggml_block_size(w_type) == 256) return double(d) / 2 * (1 + 1e-6);
  uint16_t hb = f16_bits(d);
  _Float16 h;
  std::memcpy(&h, &hb, 2);
  return double(d) / 2 + 127 * std::fabs(double(d) - double(float(h))) + 127 * 0x1p-24 * double(d);
}

struct Result {
  double worst = 0;      // largest |err| / bound
  double tightness = 0;  // largest bound / sum |x w| (the bound must say something)
};

// y (m, n) from wick against f64 of x (m, k, as f32 values) and W (n, k) dequantized.
Result check(GGMLType t, const std::vector<float>& x, const std::vector<float>& w, const std::vector<double>& y,
             size_t m, size_t n, size_t k, DType out_dtype, const std::string& what) {
  const size_t ab = ggml_block_size(t) == 256 ? 256 : 32;
  Result res;
  for (size_t i = 0; i < m; ++i) {
    std::vector<double> e(k / ab);
    for (size_t b = 0; b < k / ab; ++b) e[b] = act_err(t, x.data() + i * k + b * ab, ab);
    for (size_t r = 0; r < n; ++r) {
      double ref = 0, abs_xw = 0, q_err = 0;
      for (size_t j = 0; j < k; ++j) {
        const double xw = double(x[i * k + j]) * double(w[r * k + j]);
        ref += xw;
        abs_xw += std::fabs(xw);
        q_err += e[j / ab] * std::fabs(double(w[r * k + j]));
      }
      double bound = q_err + 1e-5 * abs_xw;
      if (out_dtype == DType::F16) bound += 0x1p-11 * (std::fabs(ref) + bound);
      if (out_dtype == DType::BF16) bound += 0x1p-8 * (std::fabs(ref) + bound);
      const double err = std::fabs(y[i * n + r] - ref);
      if (!(err <= bound)) {
        ADD_FAILURE() << what << ": y[" << i << "," << r << "] = " << y[i * n + r] << ", want " << ref << " (err "
                      << err << " > bound " << bound << ")";
        return res;
      }
      res.worst = std::max(res.worst, err / bound);
      if (abs_xw > 0) res.tightness = std::max(res.tightness, bound / abs_xw);
    }
  }
  return res;
}

struct Case {
  size_t m, n, k;
};

// k per type: 32-blocks an odd number of blocks (7: the AVX-512 kernels' 4-, 2- and 1-block
// steps all run), 256-blocks 3 super-blocks.
size_t k_for(GGMLType t) { return ggml_block_size(t) == 256 ? 768 : 224; }

class QMatmulCpu : public ::testing::TestWithParam<GGMLType> {
 protected:
  void TearDown() override { cpu::qdot::set_isa(cpu::qdot::best_isa()); }

  // Every kernel level the CPU has.
  static std::vector<cpu::qdot::Isa> levels() {
    std::vector<cpu::qdot::Isa> v;
    for (int i = 0; i <= int(cpu::qdot::best_isa()); ++i) v.push_back(cpu::qdot::Isa(i));
    return v;
  }
};

TEST_P(QMatmulCpu, EveryBatchAndLevelWithinTheActivationBound) {
  const GGMLType t = GetParam();
  const size_t k = k_for(t), n = 37;  // n: not a multiple of any chunk or vector width
  const std::vector<uint8_t> bytes = random_blocks(t, n, k, 1234 + uint32_t(t));
  const QTensor W = QTensor::from_bytes(t, {n, k}, bytes.data(), bytes.size());
  const std::vector<float> w = W.dequantize().to_vector<float>();
  for (size_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 512}) {
    const Tensor x = Tensor::randn({m, k}, DType::F32, Device::cpu(), 77 + m);
    const std::vector<float> xv = x.to_vector<float>();
    std::vector<std::vector<double>> per_level;
    for (cpu::qdot::Isa isa : levels()) {
      cpu::qdot::set_isa(isa);
      const std::string what =
          std::string(ggml_type_name(t)) + " m=" + std::to_string(m) + " " + cpu::qdot::isa_name(isa);
      const Tensor y = W.matmul_t(x);
      ASSERT_EQ(y.shape(), (Shape{m, n})) << what;
      ASSERT_EQ(y.dtype(), DType::F32) << what;
      const std::vector<double> yv = test::values(y);
      const Result r = check(t, xv, w, yv, m, n, k, DType::F32, what);
      // The bound is a few percent of sum |x w| at most: a kernel that dropped a block or a
      // scale would exceed it.
      EXPECT_LT(r.tightness, 0.08) << what;
      per_level.push_back(yv);
    }
    // The other paths for more than 8 rows: W dequantized, f32 sgemm (no activation error); and
    // the row kernels where the AVX-512 level has a panel kernel (WICK_QMATMUL_PATH=rows).
    if (m > 8) {
      const backend::Options saved = backend::options();
      backend::Options o = saved;
      o.qmatmul_path = backend::QMatmulPath::Sgemm;
      backend::set_options(o);
      const Tensor y = W.matmul_t(x);
      check(t, xv, w, test::values(y), m, n, k, DType::F32,
            std::string(ggml_type_name(t)) + " m=" + std::to_string(m) + " sgemm");
      o.qmatmul_path = backend::QMatmulPath::Rows;
      backend::set_options(o);
      const Tensor yr = W.matmul_t(x);
      backend::set_options(saved);
      const Result rr = check(t, xv, w, test::values(yr), m, n, k, DType::F32,
                              std::string(ggml_type_name(t)) + " m=" + std::to_string(m) + " rows");
      EXPECT_LT(rr.tightness, 0.08) << ggml_type_name(t) << " m=" << m << " rows";
    }
    // The levels sum the same integers: they may differ only by f32 rounding.
    for (size_t l = 1; l < per_level.size(); ++l)
      for (size_t i = 0; i < per_level[0].size(); ++i)
        ASSERT_NEAR(per_level[l][i], per_level[0][i], 1e-4 * (1 + std::fabs(per_level[0][i])))
            << ggml_type_name(t) << " m=" << m << " level " << l << " element " << i;
  }
}

TEST_P(QMatmulCpu, StridedHalfAndBatchedX) {
  const GGMLType t = GetParam();
  const size_t k = k_for(t), n = 19;
  const std::vector<uint8_t> bytes = random_blocks(t, n, k, 99 + uint32_t(t));
  const QTensor W = QTensor::from_bytes(t, {n, k}, bytes.data(), bytes.size());
  const std::vector<float> w = W.dequantize().to_vector<float>();
  for (cpu::qdot::Isa isa : levels()) {
    cpu::qdot::set_isa(isa);
    const std::string lv = cpu::qdot::isa_name(isa);
    for (size_t m : {3, 12}) {
      // A narrow view: rows k + 64 apart, starting 32 elements in.
      const Tensor big = Tensor::randn({m, k + 64}, DType::F32, Device::cpu(), 5 + m);
      const Tensor xn = big.narrow(1, 32, k);
      check(t, xn.to_vector<float>(), w, test::values(W.matmul_t(xn)), m, n, k, DType::F32,
            std::string(ggml_type_name(t)) + " narrow m=" + std::to_string(m) + " " + lv);
      // A transposed view (last stride m): the core copies it.
      const Tensor xt = Tensor::randn({k, m}, DType::F32, Device::cpu(), 9 + m).t();
      check(t, xt.to_vector<float>(), w, test::values(W.matmul_t(xt)), m, n, k, DType::F32,
            std::string(ggml_type_name(t)) + " transposed m=" + std::to_string(m) + " " + lv);
      // f16 and bf16 x: y in the same dtype.
      for (DType dt : {DType::F16, DType::BF16}) {
        const Tensor xh = Tensor::randn({m, k}, DType::F32, Device::cpu(), 11 + m).to_dtype(dt);
        const Tensor y = W.matmul_t(xh);
        ASSERT_EQ(y.dtype(), dt);
        check(t, xh.to_dtype(DType::F32).to_vector<float>(), w, test::values(y), m, n, k, dt,
              std::string(ggml_type_name(t)) + " " + dtype_name(dt) + " m=" + std::to_string(m) + " " + lv);
      }
    }
    // Batch dims: (2, 3, k) -> (2, 3, n), the same as the (6, k) rows.
    const Tensor xb = Tensor::randn({2, 3, k}, DType::F32, Device::cpu(), 21);
    const Tensor yb = W.matmul_t(xb);
    ASSERT_EQ(yb.shape(), (Shape{2, 3, n}));
    check(t, xb.to_vector<float>(), w, test::values(yb), 6, n, k, DType::F32,
          std::string(ggml_type_name(t)) + " batched " + lv);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QMatmulCpu, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GGMLType>& i) {
                           return std::string(ggml_type_name(i.param));
                         });

// Hand-worked: one Q8_0 block of weights (d = 1, q = j - 16) times x = 1..32 (x's own block:
// amax 32, d = 32 / 127, every x_j a multiple of d only approximately). Exact y = sum (j - 16)(j + 1)
// over j = 0..31 = sum j^2 - 15 sum j - 16 * 32 = 10416 - 7440 - 512 = 2464; the activation error
// is at most sum |w_j| * e = 256 * (16 / 127 + 127 * |d - f16(d)|), here about 36.2.
TEST(QMatmulCpuHand, Q8_0OneBlock) {
  std::vector<uint8_t> blk(34);
  put16(blk.data(), 0x3C00);  // f16 1.0
  for (int j = 0; j < 32; ++j) blk[2 + j] = uint8_t(int8_t(j - 16));
  const QTensor W = QTensor::from_bytes(GGMLType::Q8_0, {1, 32}, blk.data(), blk.size());
  std::vector<float> xv(32);
  for (int j = 0; j < 32; ++j) xv[j] = float(j + 1);
  for (int i = 0; i <= int(cpu::qdot::best_isa()); ++i) {
    cpu::qdot::set_isa(cpu::qdot::Isa(i));
    const float y = W.matmul_t(Tensor::from_vector(xv, {1, 32})).to_vector<float>()[0];
    EXPECT_NEAR(y, 2464.0, 36.5) << cpu::qdot::isa_name(cpu::qdot::Isa(i));
  }
  cpu::qdot::set_isa(cpu::qdot::best_isa());
}

// Zero rows of x quantize to d = 0: y is exactly 0, never NaN (1 / d is not taken).
TEST(QMatmulCpuHand, ZeroActivationsGiveZero) {
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0}) {
    const size_t k = k_for(t);
    const std::vector<uint8_t> bytes = random_blocks(t, 5, k, 3);
    const QTensor W = QTensor::from_bytes(t, {5, k}, bytes.data(), bytes.size());
    for (int i = 0; i <= int(cpu::qdot::best_isa()); ++i) {
      cpu::qdot::set_isa(cpu::qdot::Isa(i));
      for (float v : W.matmul_t(Tensor::zeros({2, k}, DType::F32)).to_vector<float>())
        EXPECT_EQ(v, 0.0f) << ggml_type_name(t);
    }
  }
  cpu::qdot::set_isa(cpu::qdot::best_isa());
}

// The activation encoder at every level gives the bytes of quant::quantize_block_q8_0 (the
// AVX-512 one is vectorised): random blocks of every scale, roundf's ties (amax 127: d = 1, so
// x * id = x), the largest float below 1/2, zeros, tiny and huge blocks, NaN and infinities (the
// last ones go to the scalar encoder); and qn is q regrouped per 4 blocks.
TEST(QMatmulCpuHand, ActivationEncoderMatchesTheSharedOne) {
  const size_t nb = 23;  // 5 groups of 4 and a tail
  std::vector<float> x(nb * 32);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t b = 0; b < nb; ++b) {
    const float scale = std::ldexp(1.0f, int(b % 9) * 6 - 24);  // 2^-24 .. 2^24
    for (size_t j = 0; j < 32; ++j) x[b * 32 + j] = u(rng) * scale;
  }
  const float ties[] = {127.0f, 0.5f, -0.5f, 1.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, -0.49999997f, 3.5f, 64.5f};
  for (size_t j = 0; j < 32; ++j) x[1 * 32 + j] = ties[j % 11] * (j < 11 ? 1.0f : -1.0f);
  for (size_t j = 0; j < 32; ++j) x[2 * 32 + j] = 0.0f;
  x[3 * 32 + 5] = 1e-35f;  // a tiny block: max |x| below 2^-100
  for (size_t j = 0; j < 32; ++j) x[4 * 32 + j] = j % 2 ? 3e-33f : -1e-34f;
  x[5 * 32 + 7] = std::nanf("");
  x[6 * 32 + 1] = INFINITY;
  x[7 * 32 + 2] = -INFINITY;
  x[8 * 32 + 3] = 3e30f;  // huge: the f16 scale overflows
  std::vector<std::vector<uint8_t>> bytes;
  for (int i = 0; i <= int(cpu::qdot::best_isa()); ++i) {
    std::vector<int8_t> q(nb * 32), qn(nb * 32, 0);
    std::vector<float> d(nb), sd(nb);
    std::vector<int32_t> s(nb);
    cpu::qdot::quantize_row_q8_0(x.data(), nb, q.data(), d.data(), s.data(), sd.data(), qn.data(), cpu::qdot::Isa(i));
    for (size_t b = 0; b < nb; ++b) {
      uint8_t ref[34];
      quant::quantize_block_q8_0(x.data() + b * 32, ref);
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) sum += int8_t(ref[2 + j]);
      const std::string what = std::string(cpu::qdot::isa_name(cpu::qdot::Isa(i))) + " block " + std::to_string(b);
      ASSERT_EQ(std::memcmp(q.data() + b * 32, ref + 2, 32), 0) << what;
      const float dr = quant::detail::ld_f16(ref);
      ASSERT_EQ(std::memcmp(&d[b], &dr, 4), 0) << what << ": d " << d[b] << " vs " << dr;
      ASSERT_EQ(s[b], sum) << what;
      const float sdr = float(sum) * dr;
      ASSERT_EQ(std::memcmp(&sd[b], &sdr, 4), 0) << what;
    }
    for (size_t g = 0; g + 4 <= nb; g += 4)
      for (size_t i4 = 0; i4 < 4; ++i4)
        for (size_t j = 0; j < 16; ++j) {
          ASSERT_EQ(qn[g * 32 + 16 * i4 + j], q[(g + i4) * 32 + j]);
          ASSERT_EQ(qn[g * 32 + 64 + 16 * i4 + j], q[(g + i4) * 32 + 16 + j]);
        }
  }
}

}  // namespace

// The Q8_K encoder at every level gives the bytes of quant::quantize_block_q8_K (the AVX-512 one is
// vectorised): random blocks of every scale; ties of the nearest-even rounding (max -127: iscale 1,
// so the products are the values); the largest magnitude as both +a and -a (the first one sets the
// sign); values past 127 after scaling (clipped); zeros, tiny and huge blocks, NaN and infinities
// (the scalar encoder's).
TEST(QMatmulCpuHand, Q8KEncoderMatchesTheSharedOne) {
  const size_t nb = 12;
  std::vector<float> x(nb * 256);
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t b = 0; b < nb; ++b) {
    const float scale = std::ldexp(1.0f, int(b % 7) * 8 - 24);  // 2^-24 .. 2^24
    for (size_t j = 0; j < 256; ++j) x[b * 256 + j] = u(rng) * scale;
  }
  const float ties[] = {0.5f, -0.5f, 1.5f, -2.5f, 126.5f, -126.5f, 3.5f, 64.5f, -7.5f, 2.5f};
  for (size_t j = 0; j < 256; ++j) x[1 * 256 + j] = ties[j % 10];
  x[1 * 256 + 100] = -127.0f;  // the largest magnitude: iscale = 1
  for (size_t j = 0; j < 256; ++j) x[2 * 256 + j] = 0.25f * float(int(j % 9) - 4);
  x[2 * 256 + 40] = 3.0f;  // +3 first, -3 later: max = +3, so iscale < 0
  x[2 * 256 + 41] = -3.0f;
  for (size_t j = 0; j < 256; ++j) x[3 * 256 + j] = 0.0f;
  x[4 * 256 + 9] = 1e-35f;                                   // max |x| below 2^-100: scalar
  for (size_t j = 0; j < 256; ++j) x[5 * 256 + j] *= 1e32f;  // above 2^100: scalar
  x[6 * 256 + 7] = std::nanf("");
  x[7 * 256 + 1] = INFINITY;
  x[8 * 256 + 2] = -INFINITY;
  for (int i = 0; i <= int(cpu::qdot::best_isa()); ++i) {
    std::vector<int8_t> q(nb * 256);
    std::vector<float> d(nb);
    std::vector<int16_t> bs(nb * 16);
    cpu::qdot::quantize_row_q8_K(x.data(), nb, q.data(), d.data(), bs.data(), cpu::qdot::Isa(i));
    for (size_t b = 0; b < nb; ++b) {
      uint8_t ref[292];
      quant::quantize_block_q8_K(x.data() + b * 256, ref);
      const std::string what = std::string(cpu::qdot::isa_name(cpu::qdot::Isa(i))) + " block " + std::to_string(b);
      ASSERT_EQ(std::memcmp(q.data() + b * 256, ref + 4, 256), 0) << what;
      ASSERT_EQ(std::memcmp(&d[b], ref, 4), 0) << what;
      ASSERT_EQ(std::memcmp(bs.data() + b * 16, ref + 260, 32), 0) << what;
    }
  }
}

// GPU quantized matrix-vector product (src/backend/gpu/kernels/qmatmul.cu): y = x @ W^T for 1 to 8
// rows of x (9 crosses into the prefill path of kernels/quant.cu). Weights: random blocks of every
// type (quant_test_blocks.hpp). Expected values from the CPU, independently of the kernels: the
// weights decoded by the CPU's dequantize (bit-identical to gguf-py, test_quant) times x in f64.
//
// The bound. The kernel quantizes each 32-element block b of x to Q8_1: d = amax/127 in f32,
// q_j = round(x_j / d) (|q_j - x_j/d| <= 1/2 + 2^-22 * 127, the reciprocal's rounding), and the
// block stores D = f16(d) (|D - d| <= 2^-11 d). So x'_j = q_j D has
//   |x'_j - x_j| <= |q_j d - x_j| + |q_j| |D - d| <= 0.50003 d + (|x_j|/d + 1/2) 2^-11 d
//                <= 0.5003 d + 2^-11 |x_j|,
// and |sum_j (x'_j - x_j) w_j| <= sum_b 0.5003 d_b sum_{j in b} |w_j| + 2^-11 sum_j |x_j w_j|.
// The integer sums are exact; the f32 scaling and summation add a few 2^-24 of the magnitudes
// involved, bounded by 1e-5 sum_j |x_j| (|w_j| + max|w|) (the offsets of the types with mins are at
// most max|w|, see quant_test_blocks.hpp). f16/bf16 results add their rounding of y: 2^-11 / 2^-8
// of |y|. A second, tighter check uses x' itself (the host's quantize_block_q8_1): then only the
// float terms remain, which pins the device quantizer to the host's bytes.
// Built only with -DWICK_GPU=cuda|rocm; run on a machine with a GPU.
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/options.hpp"
#include "backend/storage.hpp"
#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"
#include "quant_test_blocks.hpp"
#include "test_util.hpp"
#include "wick/fast.hpp"
#include "wick/quant.hpp"

using namespace wick;

namespace {

Device gpu() { return Device::gpu(0); }

const GGMLType kTypes[] = {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,   GGMLType::Q5_1,   GGMLType::Q8_0,
                           GGMLType::Q8_1, GGMLType::Q2_K, GGMLType::Q3_K,   GGMLType::Q4_K,   GGMLType::Q5_K,
                           GGMLType::Q6_K, GGMLType::Q8_K, GGMLType::IQ4_NL, GGMLType::IQ4_XS, GGMLType::MXFP4};

// x values: normal, each 32-block at its own scale (2^-3 .. 2^3), one block of zeros.
std::vector<float> make_x(size_t m, size_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (size_t i = 0; i < m; ++i)
    for (size_t b = 0; b < k / 32; ++b) {
      const float s = (i == 0 && b == 1) ? 0.0f : std::ldexp(1.0f, int((b + 3 * i) % 7) - 3);
      for (size_t j = 0; j < 32; ++j) x[i * k + b * 32 + j] = s * normal(rng);
    }
  return x;
}

// x' = q D for one row of k values: the bytes of the host's quantize_block_q8_1 (what the device's
// quantizer must give), block by block.
std::vector<double> host_q8_1(const double* x, size_t k) {
  std::vector<double> xq(k);
  for (size_t b = 0; b < k / 32; ++b) {
    float blk[32];
    uint8_t q[36];
    for (size_t j = 0; j < 32; ++j) blk[j] = float(x[b * 32 + j]);
    quant::quantize_block_q8_1(blk, q);
    const double D = quant::detail::ld_f16(q);
    for (size_t j = 0; j < 32; ++j) xq[b * 32 + j] = double(int8_t(q[4 + j])) * D;
  }
  return xq;
}

// The relative rounding of y stored in dt: none for f32, 2^-11 for f16, 2^-8 for bf16.
double out_rounding(DType dt) {
  return dt == DType::F32 ? 0.0 : dt == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::fmax(m, std::fabs(x));
  return m;
}

struct Case {
  GGMLType type;
  size_t m, n, k;
  DType dtype;
  bool strided;
  size_t offset = 16;  // strided: the first element of row 0 in the wider tensor
};

std::string name(const Case& c) {
  return std::string(ggml_type_name(c.type)) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
         " k=" + std::to_string(c.k) + " " + dtype_name(c.dtype) +
         (c.strided ? " strided, offset " + std::to_string(c.offset) : "");
}

void run_case(const Case& c) {
  SCOPED_TRACE(name(c));
  const size_t qk = ggml_block_size(c.type), nblocks = c.n * c.k / qk;
  const std::vector<uint8_t> wb = test::random_qblocks(c.type, nblocks, 7 + unsigned(c.type) + unsigned(c.k));
  const QTensor wg = QTensor::from_bytes(c.type, {c.n, c.k}, wb.data(), wb.size(), gpu());
  const std::vector<double> w =
      test::values(QTensor::from_bytes(c.type, {c.n, c.k}, wb.data(), wb.size()).dequantize());
  const double wmax = max_abs(w);

  // x in its dtype (the reference uses the rounded values), optionally a view with row stride k + 64
  // and offset 16 into a wider tensor.
  const size_t pad = c.strided ? 64 : 0;
  std::vector<float> wide = make_x(c.m, c.k + pad, 99 + unsigned(c.m));
  Tensor xw = Tensor::from_vector(wide, {c.m, c.k + pad}).to_dtype(c.dtype);
  Tensor x_host = c.strided ? xw.narrow(1, c.offset, c.k) : xw;
  Tensor x_gpu = c.strided ? xw.to_device(gpu()).narrow(1, c.offset, c.k) : xw.to_device(gpu());
  const std::vector<double> xv = test::values(x_host);

  const std::vector<double> y = test::values(wg.matmul_t(x_gpu));
  ASSERT_EQ(y.size(), c.m * c.n);
  const double out_round = out_rounding(c.dtype);
  size_t bad = 0;
  for (size_t i = 0; i < c.m; ++i) {
    // x' (host Q8_1 of the row) and the per-block scales d_b = amax / 127
    const std::vector<double> xq = host_q8_1(&xv[i * c.k], c.k);
    std::vector<double> d(c.k / 32);
    for (size_t b = 0; b < c.k / 32; ++b) {
      float amax = 0;
      for (size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(float(xv[i * c.k + b * 32 + j])));
      d[b] = double(amax / 127.0f);
    }
    for (size_t r = 0; r < c.n; ++r) {
      double ref = 0, refq = 0, act = 0, rel = 0, mag = 0;
      for (size_t j = 0; j < c.k; ++j) {
        const double wj = w[r * c.k + j], xj = xv[i * c.k + j];
        ref += wj * xj;
        refq += wj * xq[j];
        act += 0.5003 * d[j / 32] * std::fabs(wj);
        rel += std::fabs(xj * wj);
        mag += std::fabs(xj) * (std::fabs(wj) + wmax);
      }
      const double got = y[i * c.n + r];
      double bound, boundq;
      if (c.m <= 8) {
        bound = act + std::ldexp(rel, -11) + 1e-5 * mag + out_round * std::fabs(ref) * 1.01;
        boundq = 1e-5 * mag + out_round * std::fabs(refq) * 1.01;
      } else {  // the prefill path rounds W and x to f16 (bf16 for bf16 x): 2 roundings per product
        const double u = c.dtype == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
        bound = 2.01 * u * rel + 1e-5 * mag + out_round * std::fabs(ref) * 1.01;
        boundq = -1;  // no activation quantization on that path
      }
      const bool ok = std::fabs(got - ref) <= bound && (boundq < 0 || std::fabs(got - refq) <= boundq);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "y[" << i << ", " << r << "] = " << got << ", f64 reference " << ref << " (bound " << bound
                      << "), with x quantized on the host " << refq << " (bound " << boundq << ")";
    }
  }
  EXPECT_EQ(bad, 0u);
}

// Odd block counts per row (7 blocks of 32, 3 of 256) and an odd n (the last block of rows is
// half full).
size_t odd_k(GGMLType t) { return ggml_block_size(t) == 32 ? 7 * 32 : 3 * 256; }

TEST(GpuQMatVec, EveryTypeEveryRowCount) {
  for (GGMLType t : kTypes)
    for (size_t m = 1; m <= 9; ++m) run_case({t, m, 37, odd_k(t), DType::F32, false});
}

// One row is also read at offsets 16 and 4 (32 and 8 bytes into the wider f16/bf16 row).
TEST(GpuQMatVec, HalfAndStridedActivations) {
  for (GGMLType t : kTypes)
    for (DType dt : {DType::F16, DType::BF16}) {
      for (size_t m : {1, 3, 8}) run_case({t, m, 21, odd_k(t), dt, m == 3});
      run_case({t, 1, 21, odd_k(t), dt, true, 16});
      run_case({t, 1, 21, odd_k(t), dt, true, 4});
    }
  for (GGMLType t : kTypes) run_case({t, 2, 19, odd_k(t), DType::F32, true});
}

// NaN and Inf in x. ggml's Q8_1 scale is the largest |x_j| after a block's last NaN, NaN when the
// NaN is the block's last element. Expected: the host's quantize_block_q8_1 bytes times the weights
// in f64, for f16, bf16 and f32 x. With NaNs before a block's end the scales stay finite and y is
// checked value by value; a NaN last element or an Inf gives that block a NaN / Inf scale, and
// every y a NaN.
TEST(GpuQMatVec, NaNAndInfActivations) {
  const size_t n = 6, k = 8 * 32;
  const float nan = std::nanf("");
  std::vector<float> fin = make_x(1, k, 11);
  fin[0 * 32 + 2] = 40.0f, fin[0 * 32 + 13] = nan;                            // a NaN after the block's max
  fin[1 * 32 + 3] = nan, fin[1 * 32 + 27] = nan, fin[1 * 32 + 30] = -9.0f;    // two NaNs, two lanes
  fin[5 * 32 + 24] = nan, fin[5 * 32 + 25] = 3.0f, fin[5 * 32 + 0] = 100.0f;  // in the last lane
  std::vector<float> nan_last = fin, inf = fin;
  nan_last[2 * 32 + 31] = nan;
  inf[3 * 32 + 8] = INFINITY;
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q8_0, GGMLType::Q4_K})
    for (DType dt : {DType::F16, DType::BF16, DType::F32})
      for (int v = 0; v < 3; ++v) {
        SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + dtype_name(dt) + " case " + std::to_string(v));
        const std::vector<float>& xs = v == 0 ? fin : v == 1 ? nan_last : inf;
        const std::vector<uint8_t> wb = test::random_qblocks(t, n * k / ggml_block_size(t), 21);
        const QTensor wg = QTensor::from_bytes(t, {n, k}, wb.data(), wb.size(), gpu());
        const std::vector<double> w = test::values(QTensor::from_bytes(t, {n, k}, wb.data(), wb.size()).dequantize());
        const Tensor xh = Tensor::from_vector(xs, {1, k}).to_dtype(dt);
        const std::vector<double> xv = test::values(xh);
        const std::vector<double> y = test::values(wg.matmul_t(xh.to_device(gpu())));
        ASSERT_EQ(y.size(), n);
        const double wmax = max_abs(w), out_round = out_rounding(dt);
        const std::vector<double> xq = host_q8_1(xv.data(), k);
        for (size_t r = 0; r < n; ++r) {
          double ref = 0, mag = 0;
          for (size_t j = 0; j < k; ++j) {
            ref += w[r * k + j] * xq[j];
            mag += std::fabs(xq[j]) * (std::fabs(w[r * k + j]) + wmax);
          }
          if (v == 0) {
            EXPECT_LE(std::fabs(y[r] - ref), 1e-5 * mag + out_round * std::fabs(ref) * 1.01)
                << "y[" << r << "] = " << y[r] << ", host-quantized reference " << ref;
          } else {
            EXPECT_TRUE(std::isnan(y[r])) << "y[" << r << "] = " << y[r] << " (reference " << ref << ")";
          }
        }
      }
}

// Long rows (several rounds of the block's threads over a row) for the bandwidth-critical types.
TEST(GpuQMatVec, LongRows) {
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q8_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::MXFP4})
    for (size_t m : {1, 5}) run_case({t, m, 24, 11008, DType::F32, false});
}

// The staged kernel (qmatmul.cu: one row of x, Q4_0 / Q8_0, 4096 <= k, a row within one warp's
// portion of 8192 / 4096 elements on 32-lane warps, n >= 8192): more rows than the resident wave
// has warps (each warp walks several), a last round that only some warps take, f16 and strided bf16
// x; and the shapes beside it that take qmv_kernel (one group past the portion, fewer rows). The
// ctest entry gpu_qmatmul_unstaged runs them all on qmv_kernel.
TEST(GpuQMatVec, StagedShapes) {
  run_case({GGMLType::Q4_0, 1, 8200, 4096, DType::F32, false});
  run_case({GGMLType::Q4_0, 1, 8192, 8192, DType::F16, false});
  run_case({GGMLType::Q4_0, 1, 8193, 4096, DType::BF16, true});
  run_case({GGMLType::Q4_0, 1, 8192, 8448, DType::F32, false});
  run_case({GGMLType::Q8_0, 1, 8200, 4096, DType::F32, false});
  run_case({GGMLType::Q8_0, 1, 8193, 4096, DType::F16, true});
  run_case({GGMLType::Q8_0, 1, 8192, 4352, DType::F32, false});
  run_case({GGMLType::Q8_0, 1, 8191, 4096, DType::F32, false});
}

// One row of x on the per-type / per-shape choices of qmatmul.cu's one_row_choice (tuning.hpp:
// kQmvShort*, kQmvQ4K*, kQmvLongK*): 8 (Q4_0) and 4 (Q4_K) rows per block over many short rows, the
// last block part full; Q4_K's 4 rows over rows of 4096; Q4_0 / Q8_0 past the staged kernel's
// portion.
TEST(GpuQMatVec, OneRowChoices) {
  run_case({GGMLType::Q4_0, 1, 8197, 2048, DType::F32, false});
  run_case({GGMLType::Q4_K, 1, 8194, 2048, DType::F16, false});
  run_case({GGMLType::Q4_K, 1, 4098, 4096, DType::BF16, true});
  run_case({GGMLType::Q8_0, 1, 4099, 8192, DType::F32, false});
}

// add_rms_norm_matmul_t: the staged kernel normalising x itself (qmatmul.cu, stage_normed_row). The
// sum must be the CPU's add bit for bit; y is checked as run_case checks a product, against the
// norm computed in f64 on the host from that sum (h_j = s_j / sqrt(mean(s^2) + eps) * w_j), with
// the kernel's h rounded to the dtype (one rounding, u |h_j|) and its rstd in f32 added to the
// bound. Where the staged kernel takes the shape the backend's fused entry must run (not return
// null, which would fall back to the two ops) unless Options::qmv_unstaged (WICK_QMV_STAGED=0) turned it off; k = 2048
// and Q4_K take the two ops.
struct NormCase {
  GGMLType type;
  size_t n, k;
  DType dtype;
  bool residual;
  bool fused;  // the staged kernel takes it (with the switches of backend/options.hpp unset)
};

void run_norm_case(const NormCase& c) {
  SCOPED_TRACE(std::string(ggml_type_name(c.type)) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
               " " + dtype_name(c.dtype) + (c.residual ? " with residual" : ""));
  const double eps = 1e-5;
  const size_t qk = ggml_block_size(c.type);
  const std::vector<uint8_t> wb = test::random_qblocks(c.type, c.n * c.k / qk, 11 + unsigned(c.k));
  const QTensor wg = QTensor::from_bytes(c.type, {c.n, c.k}, wb.data(), wb.size(), gpu());
  const std::vector<double> w =
      test::values(QTensor::from_bytes(c.type, {c.n, c.k}, wb.data(), wb.size()).dequantize());
  const double wmax = max_abs(w);
  const Tensor xh = Tensor::from_vector(make_x(1, c.k, 3), {1, c.k}).to_dtype(c.dtype);
  const Tensor rh = Tensor::from_vector(make_x(1, c.k, 4), {1, c.k}).to_dtype(c.dtype);
  std::vector<float> nw(c.k);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(0.5f, 1.5f);
  for (float& v : nw) v = uni(rng);
  const Tensor wn = Tensor::from_vector(nw, {c.k}).to_dtype(c.dtype);
  const Tensor xg = xh.to_device(gpu()), rg = rh.to_device(gpu()), wng = wn.to_device(gpu());

  if (c.fused &&
      !backend::options().qmv_unstaged) {  // the backend's fused entry itself, so a silent fallback cannot pass
    NormArgs a;
    a.eps = eps;
    a.rms = true;
    a.weight = wng.storage().get();
    StoragePtr sum;
    if (c.residual) {
      a.residual = rg.storage().get();
      a.sum = &sum;
    }
    const QuantDims q{c.type, c.n, c.k};
    EXPECT_NE(wg.storage()->qmatmul_rms_norm(q, *xg.storage(), xg.layout(), a), nullptr);
  }
  const auto [sum, y] = fast::add_rms_norm_matmul_t(wg, xg, c.residual ? rg : Tensor(), wng, eps);
  const Tensor s_host = c.residual ? xh.add(rh) : xh;  // the CPU's add: f32 sum rounded to the dtype
  ASSERT_EQ(sum.shape(), (Shape{1, c.k}));
  EXPECT_EQ(test::values(sum), test::values(s_host));
  const std::vector<double> sv = test::values(s_host), wv = test::values(wn), yv = test::values(y);
  ASSERT_EQ(yv.size(), c.n);
  double ms = 0;
  for (double v : sv) ms += v * v;
  const double rstd = 1.0 / std::sqrt(ms / double(c.k) + eps);
  std::vector<double> h(c.k), d(c.k / 32);
  for (size_t j = 0; j < c.k; ++j) h[j] = sv[j] * rstd * wv[j];
  for (size_t b = 0; b < c.k / 32; ++b) {
    double amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(h[b * 32 + j]));
    d[b] = amax * (1 + std::ldexp(1.0, -10)) / 127.0;  // of the kernel's h, within its rounding
  }
  const double u = c.dtype == DType::F32 ? std::ldexp(1.0, -20) : out_rounding(c.dtype) * 1.01;
  size_t bad = 0;
  for (size_t r = 0; r < c.n; ++r) {
    double ref = 0, act = 0, rel = 0, mag = 0;
    for (size_t j = 0; j < c.k; ++j) {
      const double wj = w[r * c.k + j];
      ref += wj * h[j];
      act += 0.5003 * d[j / 32] * std::fabs(wj);
      rel += std::fabs(h[j] * wj);
      mag += std::fabs(h[j]) * (std::fabs(wj) + wmax);
    }
    const double bound = act + (u + std::ldexp(1.0, -11)) * rel + 1e-5 * mag + out_rounding(c.dtype) * std::fabs(ref) * 1.01;
    if (std::fabs(yv[r] - ref) > bound && bad++ < 5)
      ADD_FAILURE() << "y[" << r << "] = " << yv[r] << ", f64 reference " << ref << " (bound " << bound << ")";
  }
  EXPECT_EQ(bad, 0u);
}

// Chunks of x a thread in the comments: at the default 512 threads (NVIDIA) / at 128 (ctest
// gpu_qmatmul_norm_128).
TEST(GpuQMatVec, NormInsideTheProduct) {
  run_norm_case({GGMLType::Q4_0, 8200, 4096, DType::F16, true, true});   // 1 / 4, rows past the wave
  run_norm_case({GGMLType::Q4_0, 8192, 4096, DType::F16, false, true});  // the first layer: no residual
  run_norm_case({GGMLType::Q8_0, 8193, 4096, DType::BF16, true, true});
  run_norm_case({GGMLType::Q8_0, 8192, 4096, DType::F32, true, true});   // 2 / 8
  run_norm_case({GGMLType::Q4_0, 8192, 8192, DType::F16, true, true});   // 2 / 8
  // 4 / 16: past the prologue's 8 at 128 threads, where the fused entry declines (the two ops run)
  run_norm_case({GGMLType::Q4_0, 8192, 8192, DType::F32, true, backend::options().qmv_norm_block == 0});
  run_norm_case({GGMLType::Q4_0, 8192, 2048, DType::F16, true, false});  // the two ops
  run_norm_case({GGMLType::Q4_K, 8192, 4096, DType::F16, true, false});
}

// A fused call with operands the kernel does not take runs the two ops, whose checks name the
// problem: a weight of the wrong length, x of two rows (both ops, no kernel), x on the CPU.
TEST(GpuQMatVec, NormInsideTheProductErrors) {
  const size_t k = 4096, n = 8192;
  const std::vector<uint8_t> wb = test::random_qblocks(GGMLType::Q4_0, n * k / 32, 3);
  const QTensor w = QTensor::from_bytes(GGMLType::Q4_0, {n, k}, wb.data(), wb.size(), gpu());
  const Tensor x = Tensor::ones({1, k}, DType::F16, gpu()), nw = Tensor::ones({k}, DType::F16, gpu());
  EXPECT_THROW(fast::add_rms_norm_matmul_t(w, x, x, Tensor::ones({k / 2}, DType::F16, gpu()), 1e-5), Error);
  EXPECT_THROW(fast::add_rms_norm_matmul_t(w, x, Tensor::ones({2, k}, DType::F16, gpu()), nw, 1e-5), Error);
  EXPECT_THROW(fast::add_rms_norm_matmul_t(w, x.to_device(Device::cpu()), Tensor(), nw, 1e-5), Error);
  const Tensor x2 = Tensor::ones({2, k}, DType::F16, gpu());
  const auto [s2, y2] = fast::add_rms_norm_matmul_t(w, x2, x2, Tensor::ones({k}, DType::F16, gpu()), 1e-5);
  EXPECT_EQ(y2.shape(), (Shape{2, n}));
}

TEST(GpuQMatVec, BatchShapeAndErrors) {
  const size_t k = 64, n = 5;
  const std::vector<uint8_t> wb = test::random_qblocks(GGMLType::Q8_0, n * k / 32, 3);
  const QTensor w = QTensor::from_bytes(GGMLType::Q8_0, {n, k}, wb.data(), wb.size(), gpu());
  const std::vector<float> xs = make_x(6, k, 5);
  Tensor x = Tensor::from_vector(xs, {2, 3, k});
  Tensor y = w.matmul_t(x.to_device(gpu()));
  EXPECT_EQ(y.shape(), (Shape{2, 3, n}));
  // the same rows one at a time (the same arithmetic per row; 1e-5 allows a different FMA contraction
  // between the 1-row and 8-row kernels)
  for (size_t i = 0; i < 6; ++i) {
    Tensor yi = w.matmul_t(x.reshape({6, k}).narrow(0, i, 1).to_device(gpu()));
    EXPECT_TRUE(
        test::all_close(yi.reshape({n}), test::values(y.reshape({6, n}).narrow(0, i, 1).reshape({n})), 1e-5, 1e-6));
  }
  EXPECT_THROW(w.matmul_t(Tensor::zeros({1, k}, DType::F32)), Error);              // x on the CPU
  EXPECT_THROW(w.matmul_t(Tensor::zeros({1, k + 32}, DType::F32, gpu())), Error);  // wrong k
  EXPECT_THROW(w.matmul_t(Tensor::zeros({1, k}, DType::F64, gpu())), Error);       // dtype
}

}  // namespace

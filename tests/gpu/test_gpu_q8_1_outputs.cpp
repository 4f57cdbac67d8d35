// The Q8_1 outputs of rms_norm, add_rms_norm and silu_mul on the GPU (src/backend/gpu/kernels/nn.cu,
// kernels/q8_1_store.cuh): the kernels that produce a quantized product's input also write it in
// Q8_1, and fast::matmul_t_q8_1 skips its own quantization. Expected bytes come from the
// host's quantize_block_q8_1 (ggml's reference quantizer, checked byte for byte in test_quant)
// applied to the op's f16/bf16/f32 result copied to the host; the fused results themselves must be
// the plain op's bits, and a product given the bytes the product without them.
// Built only with -DWICK_GPU=cuda|rocm; run on a machine with a GPU.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/quant_encode.hpp"
#include "quant_test_blocks.hpp"
#include "test_util.hpp"
#include "wick/fast.hpp"
#include "wick/quant.hpp"

using namespace wick;

namespace {

Device gpu() { return Device::gpu(0); }

// Values with each 32-block at its own scale (2^-4 .. 2^4); special values where asked.
std::vector<float> make_values(size_t n, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(normal(rng), int((i / 32) % 9) - 4);
  if (specials && n >= 128) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    v[5] = nan;                                     // block 0: a NaN inside
    v[63] = nan;                                    // block 1: the last element NaN
    v[70] = inf;                                    // block 2: an Inf
    for (size_t j = 96; j < 128; ++j) v[j] = 0.0f;  // block 3: all zero
  }
  return v;
}

// The host reference: quantize_block_q8_1 over every 32 values of t (copied to the host as f32,
// exact for f16/bf16), rows one after another.
std::vector<uint8_t> host_q8_1(const Tensor& t) {
  const std::vector<float> v = t.to_dtype(DType::F32).to_device(Device::cpu()).contiguous().to_vector<float>();
  std::vector<uint8_t> out(v.size() / 32 * 36);
  for (size_t b = 0; b < v.size() / 32; ++b) quant::quantize_block_q8_1(v.data() + 32 * b, out.data() + 36 * b);
  return out;
}

// The first differing byte, or -1. The f16 d and s of a block compare as values with every NaN
// equal: a NaN that arithmetic makes (0 * Inf in s = sum * d) has the sign bit set on x86 and
// clear on GPUs; ggml stores either as it comes.
long first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  auto nan16 = [](const uint8_t* p) { return (p[1] & 0x7c) == 0x7c && ((p[1] & 0x03) | p[0]) != 0; };
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t o = i % 36;
    if (o < 4 && nan16(&a[i - o % 2]) && nan16(&b[i - o % 2])) continue;
    if (a[i] != b[i]) return long(i);
  }
  return -1;
}

// Bitwise equality of two tensors' values (NaN == NaN of any payload).
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_dtype(DType::F32).to_device(Device::cpu()).contiguous().to_vector<float>();
  const std::vector<float> y = b.to_dtype(DType::F32).to_device(Device::cpu()).contiguous().to_vector<float>();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::isnan(x[i]) && std::isnan(y[i])) && std::memcmp(&x[i], &y[i], 4) != 0) return false;
  return true;
}

const DType kDtypes[] = {DType::F16, DType::BF16, DType::F32};

// (rows, cols): one row of the 1.1B and 7B hidden sizes and of a 7B MLP, small rows several to a
// warp, and two the norm kernel leaves to the core's own quantization (same bytes either way):
// (1, 20480) holds 32 values a thread, and f32 (4, 32) puts a Q8_1 block across thread groups.
const std::pair<size_t, size_t> kShapes[] = {{1, 2048}, {1, 4096},  {3, 4096},  {5, 64},    {2, 96},
                                             {7, 160},  {1, 11008}, {1, 16384}, {1, 20480}, {4, 32}};

TEST(GpuQ8_1Outputs, RmsNormAndAddRmsNorm) {
  for (DType dt : kDtypes)
    for (auto [rows, cols] : kShapes)
      for (bool specials : {false, true}) {
        const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                                 (specials ? " NaN/Inf" : "");
        const Tensor x = Tensor::from_vector(make_values(rows * cols, 1, specials), {rows, cols}, gpu()).to_dtype(dt);
        const Tensor r = Tensor::from_vector(make_values(rows * cols, 2, false), {rows, cols}, gpu()).to_dtype(dt);
        const Tensor w = Tensor::from_vector(make_values(cols, 3, false), {cols}, gpu()).to_dtype(dt);
        const auto [h, q] = fast::rms_norm_q8_1(x, w, 1e-5);
        ASSERT_TRUE(q.defined()) << what;
        EXPECT_EQ(q.type(), GGMLType::Q8_1) << what;
        EXPECT_EQ(q.shape(), h.shape()) << what;
        EXPECT_EQ(q.device(), gpu()) << what;
        EXPECT_TRUE(same_bits(h, x.rms_norm(w, 1e-5))) << "rms_norm " << what;
        EXPECT_EQ(first_diff(q.to_bytes(), host_q8_1(h)), -1) << "rms_norm " << what;

        const auto [s, h2, q2] = fast::add_rms_norm_q8_1(x, r, w, 1e-6);
        const auto [s_ref, h2_ref] = x.add_rms_norm(r, w, 1e-6);
        EXPECT_TRUE(same_bits(s, s_ref)) << "add_rms_norm sum " << what;
        EXPECT_TRUE(same_bits(h2, h2_ref)) << "add_rms_norm " << what;
        EXPECT_EQ(first_diff(q2.to_bytes(), host_q8_1(h2)), -1) << "add_rms_norm " << what;
      }
}

TEST(GpuQ8_1Outputs, SiluMul) {
  for (DType dt : kDtypes) {
    const std::string d = dtype_name(dt);
    // gate and up as the two halves of one (1, 2I) product (the LLM's stacked gate/up), then
    // contiguous rows, a row-broadcast up, and a misaligned start (the last two: other kernels).
    for (size_t inter : {size_t(5632), size_t(11008), size_t(64)}) {
      const Tensor y = Tensor::from_vector(make_values(2 * inter, 4, true), {1, 2 * inter}, gpu()).to_dtype(dt);
      const Tensor g = y.narrow(1, 0, inter), u = y.narrow(1, inter, inter);
      const auto [s, q] = fast::silu_mul_q8_1(g, u);
      EXPECT_TRUE(same_bits(s, g.silu_mul(u))) << d << " halves " << inter;
      EXPECT_EQ(first_diff(q.to_bytes(), host_q8_1(s)), -1) << d << " halves " << inter;
    }
    const Tensor a = Tensor::from_vector(make_values(6 * 256, 5, true), {6, 256}, gpu()).to_dtype(dt);
    const Tensor b = Tensor::from_vector(make_values(6 * 256, 6, false), {6, 256}, gpu()).to_dtype(dt);
    const Tensor b_row = Tensor::from_vector(make_values(256, 7, false), {1, 256}, gpu()).to_dtype(dt);
    const Tensor wide = Tensor::from_vector(make_values(6 * 264, 8, false), {6, 264}, gpu()).to_dtype(dt);
    const Tensor odd = wide.narrow(1, 1, 256);  // rows start 2 (4) bytes past a 16-byte boundary
    for (const auto& [name, up] :
         {std::pair<const char*, Tensor>{"rows", b}, {"broadcast", b_row}, {"misaligned", odd}}) {
      const auto [s, q] = fast::silu_mul_q8_1(a, up);
      EXPECT_EQ(q.shape(), s.shape()) << d << " " << name;
      EXPECT_TRUE(same_bits(s, a.silu_mul(up))) << d << " " << name;
      EXPECT_EQ(first_diff(q.to_bytes(), host_q8_1(s)), -1) << d << " " << name;
    }
  }
}

// fast::matmul_t_q8_1(w, x, x_q8_1) is w.matmul_t(x) bit for bit: with the producer's bytes (1, 2, 4 rows), with
// bytes it cannot use (3 rows: the kernel reads padded rows; 9 rows: the prefill path), and for
// a legacy and a K type.
TEST(GpuQ8_1Outputs, ProductGivenQ8_1Rows) {
  const size_t n = 300, k = 512;
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q6_K}) {
    const std::vector<uint8_t> wb = test::random_qblocks(t, n * k / ggml_block_size(t), 11);
    const QTensor wq = QTensor::from_bytes(t, {n, k}, wb.data(), wb.size(), gpu());
    for (DType dt : kDtypes)
      for (size_t m : {1, 2, 3, 4, 9}) {
        const Tensor x = Tensor::from_vector(make_values(m * k, 12, false), {m, k}, gpu()).to_dtype(dt);
        const Tensor w = Tensor::from_vector(make_values(k, 13, false), {k}, gpu()).to_dtype(dt);
        const auto [h, hq] = fast::rms_norm_q8_1(x, w, 1e-5);
        EXPECT_TRUE(same_bits(fast::matmul_t_q8_1(wq, h, hq), wq.matmul_t(h)))
            << ggml_type_name(t) << " " << dtype_name(dt) << " m=" << m;
      }
  }
}

TEST(GpuQ8_1Outputs, BadRequestsAreErrors) {
  const Tensor x = Tensor::ones({2, 48}, DType::F16, gpu());
  EXPECT_THROW(fast::rms_norm_q8_1(x, Tensor(), 1e-5), Error);  // 48 is not a multiple of 32
  EXPECT_THROW(fast::silu_mul_q8_1(x, x), Error);
  EXPECT_THROW(fast::rms_norm_q8_1(Tensor::ones({2, 64}, DType::F64, gpu()), Tensor(), 1e-5), Error);
  const Tensor h = Tensor::ones({2, 64}, DType::F16, gpu());
  const QTensor hq = fast::rms_norm_q8_1(h, Tensor(), 1e-5).second;
  const std::vector<uint8_t> wb = test::random_qblocks(GGMLType::Q4_0, 8 * 64 / 32, 1);
  const QTensor wq = QTensor::from_bytes(GGMLType::Q4_0, {8, 64}, wb.data(), wb.size(), gpu());
  EXPECT_THROW(fast::matmul_t_q8_1(wq, h.narrow(0, 0, 1), hq), Error);  // hq is (2, 64)
  EXPECT_THROW(fast::matmul_t_q8_1(wq, h, QTensor::quantize(h, GGMLType::Q8_0)), Error);
  EXPECT_NO_THROW(fast::matmul_t_q8_1(wq, h, hq));
}

}  // namespace

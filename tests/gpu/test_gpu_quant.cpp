// GPU quantized blocks (src/backend/gpu/kernels/quant.cu): dequantize, embedding rows, the
// activation quantizers and the prefill product (x @ W^T for more than 8 rows).
// Expected values: gguf-py's decodes (tests/fixtures/quant.json, gen_quant.py) where the fixture
// has the type, and the CPU backend otherwise (itself tested against that fixture in
// test_quant.cpp and test_quantize.cpp); the prefill against an f64 product on the host with the
// f16 roundings the design specifies and a bound derived below.
// Built only with -DWICK_GPU=cuda|rocm; run on a machine with a GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/storage.hpp"
#include "test_util.hpp"
#include "wick/quant.hpp"

using namespace wick;
using nlohmann::json;

using wick::test::from_hex;

namespace {

Device gpu() { return Device::gpu(0); }

const GGMLType kTypes[] = {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,   GGMLType::Q5_1,   GGMLType::Q8_0,
                           GGMLType::Q8_1, GGMLType::Q2_K, GGMLType::Q3_K,   GGMLType::Q4_K,   GGMLType::Q5_K,
                           GGMLType::Q6_K, GGMLType::Q8_K, GGMLType::IQ4_NL, GGMLType::IQ4_XS, GGMLType::MXFP4};

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool is_nan32(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0; }
bool is_nan16(uint16_t u, bool bf) {
  return bf ? (u & 0x7f80u) == 0x7f80u && (u & 0x007fu) != 0 : (u & 0x7c00u) == 0x7c00u && (u & 0x03ffu) != 0;
}

// Elements whose bits differ, NaN matching any NaN (a device's NaN payload may differ).
template <class T> size_t mismatches(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    uint32_t g, w;
    bool gn, wn;
    if constexpr (std::is_same_v<T, float>) {
      g = f32_bits(got[i]), w = f32_bits(want[i]);
      gn = is_nan32(g), wn = is_nan32(w);
    } else {
      constexpr bool bf = std::is_same_v<T, bf16>;
      g = got[i].bits, w = want[i].bits;
      gn = is_nan16(uint16_t(g), bf), wn = is_nan16(uint16_t(w), bf);
    }
    if (g == w || (gn && wn)) continue;
    if (bad++ < 4) ADD_FAILURE() << what << " element " << i << ": got bits 0x" << std::hex << g << " want 0x" << w;
  }
  return bad;
}

void put_f16(uint8_t* p, float v) {
  const uint16_t b = f16(v).bits;
  p[0] = uint8_t(b), p[1] = uint8_t(b >> 8);
}

// n_blocks blocks of type t with random quant bits and scales of sane size (|d| in [1e-3, 1e-2],
// so every weight is a finite f16 of moderate size). The scale fields' byte offsets are the
// block layouts of gguf-py's quants.py.
std::vector<uint8_t> sane_blocks(GGMLType t, size_t n_blocks, uint32_t seed) {
  const size_t bb = ggml_type_size(t);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(1e-3f, 1e-2f);
  std::vector<uint8_t> out(n_blocks * bb);
  for (auto& b : out) b = uint8_t(byte(rng));
  auto signed_mag = [&] { return (byte(rng) & 1) ? mag(rng) : -mag(rng); };
  for (size_t i = 0; i < n_blocks; ++i) {
    uint8_t* p = out.data() + i * bb;
    switch (t) {
      case GGMLType::Q4_1:
      case GGMLType::Q5_1:
      case GGMLType::Q8_1:
      case GGMLType::Q4_K:
      case GGMLType::Q5_K:  // d, then m / s / dmin
        put_f16(p, signed_mag());
        put_f16(p + 2, signed_mag());
        break;
      case GGMLType::Q2_K:  // d, dmin at 80
        put_f16(p + 80, signed_mag());
        put_f16(p + 82, signed_mag());
        break;
      case GGMLType::Q3_K:
        put_f16(p + 108, signed_mag());
        break;
      case GGMLType::Q6_K:
        put_f16(p + 208, signed_mag());
        break;
      case GGMLType::Q8_K: {
        const float d = signed_mag() * 0.1f;
        std::memcpy(p, &d, 4);  // little-endian host
        break;
      }
      case GGMLType::MXFP4:
        p[0] = uint8_t(118 + byte(rng) % 7);
        break;  // 2^-10 .. 2^-4
      default:
        put_f16(p, signed_mag());
        break;  // f16 d first
    }
  }
  return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = uint8_t(rng());
  return out;
}

const json& fixture() {
  static json j = wick::test::load_json_fixture("quant.json");
  return j;
}

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "did not throw";
  return Error(ErrorKind::Internal, "no throw");
}

}  // namespace

// Every type: GPU f32 == gguf-py's bits for the fixture blocks and == the CPU's for all blocks
// (random bytes too: NaN/Inf scales, subnormals), f16/bf16 == the CPU's rounding of them.
TEST(GpuQuant, DequantizeEveryTypeBitIdentical) {
  for (GGMLType t : kTypes) {
    const std::string name = ggml_type_name(t);
    const size_t be = ggml_block_size(t), bb = ggml_type_size(t);
    // 70 rows of 10 blocks: several rounds of every kernel (256 or 32 blocks per round).
    const size_t rows = 70, cols = 10 * be, n_blocks = rows * 10;
    std::vector<uint8_t> bytes = random_bytes(n_blocks * bb, 1000 + uint32_t(t));
    std::vector<uint32_t> fixture_bits;
    const json& ft = fixture()["types"];
    if (ft.contains(name)) {
      size_t at = 0;
      for (const auto& c : ft[name]["cases"]) {
        std::vector<uint8_t> b = from_hex(c["bytes"]);
        ASSERT_EQ(b.size(), bb);
        std::copy(b.begin(), b.end(), bytes.begin() + at * bb);
        std::vector<uint8_t> f = from_hex(c["f32"]);
        for (size_t i = 0; i < be; ++i)
          fixture_bits.push_back(uint32_t(f[4 * i]) | (uint32_t(f[4 * i + 1]) << 8) | (uint32_t(f[4 * i + 2]) << 16) |
                                 (uint32_t(f[4 * i + 3]) << 24));
        ++at;
      }
    }
    // sane blocks at the end, so f16/bf16 are compared on finite values too
    std::vector<uint8_t> sane = sane_blocks(t, 100, 7 + uint32_t(t));
    std::copy(sane.begin(), sane.end(), bytes.end() - int64_t(sane.size()));

    QTensor cpu = QTensor::from_bytes(t, {rows, cols}, bytes.data(), bytes.size());
    QTensor g = cpu.to(gpu());
    EXPECT_EQ(g.to_bytes(), bytes) << name;

    std::vector<float> got = g.dequantize(DType::F32).to_vector<float>();
    EXPECT_EQ(mismatches(got, cpu.dequantize(DType::F32).to_vector<float>(), name + " f32 vs CPU"), 0u);
    size_t fx_bad = 0;
    for (size_t i = 0; i < fixture_bits.size(); ++i) {
      const uint32_t gb = f32_bits(got[i]);
      if (gb != fixture_bits[i] && !(is_nan32(gb) && is_nan32(fixture_bits[i])) && fx_bad++ < 4)
        ADD_FAILURE() << name << " vs gguf-py element " << i;
    }
    EXPECT_EQ(fx_bad, 0u) << name;
    EXPECT_EQ(mismatches(g.dequantize(DType::F16).to_vector<f16>(), cpu.dequantize(DType::F16).to_vector<f16>(),
                         name + " f16"),
              0u);
    EXPECT_EQ(mismatches(g.dequantize(DType::BF16).to_vector<bf16>(), cpu.dequantize(DType::BF16).to_vector<bf16>(),
                         name + " bf16"),
              0u);
    // rows(): the byte range, copied on the device; one row dequantized is the embedding of its id
    // (the decode step's embedding).
    const size_t rb = bytes.size() / rows;
    for (size_t r : {size_t(0), rows / 2, rows - 1}) {
      const QTensor one = g.rows(r, 1);
      EXPECT_EQ(one.to_bytes(), std::vector<uint8_t>(bytes.begin() + long(r * rb), bytes.begin() + long((r + 1) * rb)))
          << name << " row " << r;
      const Tensor id = Tensor::full({1}, int64_t(r), DType::I32, gpu());
      EXPECT_EQ(mismatches(one.dequantize(DType::F16).to_vector<f16>(), g.embedding(id, DType::F16).to_vector<f16>(),
                           name + " row " + std::to_string(r)),
                0u);
    }
  }
}

TEST(GpuQuant, DequantizeLargeAndEmpty) {
  // 4096 x 4096 Q4_K: 65536 blocks, 2048 rounds
  const GGMLType t = GGMLType::Q4_K;
  std::vector<uint8_t> bytes = sane_blocks(t, 65536, 3);
  QTensor cpu = QTensor::from_bytes(t, {4096, 4096}, bytes.data(), bytes.size());
  QTensor g = cpu.to(gpu());
  EXPECT_EQ(mismatches(g.dequantize(DType::F16).to_vector<f16>(), cpu.dequantize(DType::F16).to_vector<f16>(),
                       "Q4_K 4096x4096 f16"),
            0u);
  QTensor empty = QTensor::from_bytes(GGMLType::Q8_0, {0, 64}, nullptr, 0, gpu());
  Tensor e = empty.dequantize(DType::F32);
  EXPECT_EQ(e.shape(), (Shape{0, 64}));
  EXPECT_EQ(e.device(), gpu());
}

TEST(GpuQuant, EmbeddingEveryTypeAndIndexDType) {
  const std::vector<int64_t> ids = {5, 0, 22, 5, 17, 1, 22};
  for (GGMLType t : kTypes) {
    const std::string name = ggml_type_name(t);
    const size_t rows = 23, cols = 2 * ggml_block_size(t);
    std::vector<uint8_t> bytes = sane_blocks(t, rows * 2, 50 + uint32_t(t));
    QTensor cpu = QTensor::from_bytes(t, {rows, cols}, bytes.data(), bytes.size());
    QTensor g = cpu.to(gpu());
    for (DType it : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) {
      Tensor id_cpu = Tensor::from_vector(ids, {ids.size()}).to_dtype(it);
      Tensor id_gpu = id_cpu.to_device(gpu());
      const std::string what = name + " ids " + dtype_name(it);
      EXPECT_EQ(mismatches(g.embedding(id_gpu, DType::F32).to_vector<float>(),
                           cpu.embedding(id_cpu, DType::F32).to_vector<float>(), what + " f32"),
                0u);
      Tensor e16 = g.embedding(id_gpu, DType::F16);
      EXPECT_EQ(e16.shape(), (Shape{ids.size(), cols}));
      EXPECT_EQ(mismatches(e16.to_vector<f16>(), cpu.embedding(id_cpu, DType::F16).to_vector<f16>(), what + " f16"),
                0u);
      EXPECT_EQ(mismatches(g.embedding(id_gpu, DType::BF16).to_vector<bf16>(),
                           cpu.embedding(id_cpu, DType::BF16).to_vector<bf16>(), what + " bf16"),
                0u);
    }
  }
}

TEST(GpuQuant, EmbeddingStridedAndBatchedIds) {
  const GGMLType t = GGMLType::Q6_K;
  const size_t rows = 40, cols = 512;
  std::vector<uint8_t> bytes = sane_blocks(t, rows * 2, 9);
  QTensor cpu = QTensor::from_bytes(t, {rows, cols}, bytes.data(), bytes.size());
  QTensor g = cpu.to(gpu());
  // column 1 of a (300, 2) table of ids: stride 2, offset 1; 300 rows cross many rounds
  std::vector<int32_t> pairs(600);
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = int32_t((i * 7 + 3) % rows);
  Tensor both = Tensor::from_vector(pairs, {300, 2});
  Tensor col_cpu = both.narrow(1, 1, 1).squeeze(1);
  Tensor col_gpu = both.to_device(gpu()).narrow(1, 1, 1).squeeze(1);
  EXPECT_EQ(mismatches(g.embedding(col_gpu).to_vector<float>(), cpu.embedding(col_cpu).to_vector<float>(), "strided"),
            0u);
  // 2-D ids give (2, 3, cols), row i of the result being table row ids[i]
  Tensor ids2 = Tensor::from_vector(std::vector<int64_t>{39, 0, 7, 7, 1, 2}, {2, 3});
  Tensor e = g.embedding(ids2.to_device(gpu()));
  EXPECT_EQ(e.shape(), (Shape{2, 3, cols}));
  std::vector<float> all = cpu.dequantize().to_vector<float>(), got = e.to_vector<float>();
  const int64_t want_rows[] = {39, 0, 7, 7, 1, 2};
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = 0; j < cols; ++j) ASSERT_EQ(f32_bits(got[i * cols + j]), f32_bits(all[want_rows[i] * cols + j]));
}

TEST(GpuQuant, EmbeddingBadIdsAreIndexErrors) {
  const GGMLType t = GGMLType::Q4_0;
  std::vector<uint8_t> bytes = sane_blocks(t, 8, 4);
  QTensor g = QTensor::from_bytes(t, {8, 32}, bytes.data(), bytes.size(), gpu());
  Error e = error_of([&] { g.embedding(Tensor::from_vector(std::vector<int64_t>{1, 2, 8, 9}, {4}).to_device(gpu())); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_NE(std::string(e.what()).find("id 8 at position 2"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("8 rows"), std::string::npos) << e.what();
  e = error_of([&] { g.embedding(Tensor::from_vector(std::vector<int32_t>{0, -1}, {2}).to_device(gpu())); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_NE(std::string(e.what()).find("id -1 at position 1"), std::string::npos) << e.what();
  e = error_of([&] { g.embedding(Tensor::from_vector(std::vector<uint32_t>{0xffffffffu}, {1}).to_device(gpu())); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  // the device still works, and so does the table
  Tensor ok = g.embedding(Tensor::from_vector(std::vector<int64_t>{7}, {1}).to_device(gpu()));
  EXPECT_EQ(ok.to_vector<float>().size(), 32u);
}

// GPU quantize == CPU quantize, byte for byte, from every input dtype; rows with zeros, an
// outlier, ties of the rounding and values at the f16 range's edge of d.
TEST(GpuQuant, QuantizeActivationTypesByteIdentical) {
  const size_t rows = 33, cols = 1024;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (auto& x : v) x = nd(rng);
  for (size_t j = 0; j < cols; ++j) {
    v[1 * cols + j] = 0.0f;                                    // zero blocks
    v[2 * cols + j] = j % 97 == 0 ? 300.0f : 1e-3f * nd(rng);  // outliers
    v[3 * cols + j] = float(int(j % 64) - 32) * 0.5f;          // halves: rounding ties
    v[4 * cols + j] = 1e-6f * nd(rng);                         // tiny (f16 subnormal d)
  }
  // f64 values that are not f32: the f32 rounding of the input is part of the contract
  Tensor base = Tensor::from_vector(v, {rows, cols}).to_dtype(DType::F64).affine(1.0 + 1e-12, 0.0);
  for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q8_1, GGMLType::Q8_K}) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
      const std::string what = std::string(ggml_type_name(t)) + " from " + dtype_name(dt);
      Tensor x = base.to_dtype(dt);
      std::vector<uint8_t> want = QTensor::quantize(x, t).to_bytes();
      QTensor q = QTensor::quantize(x.to_device(gpu()), t);
      EXPECT_EQ(q.device(), gpu());
      std::vector<uint8_t> got = q.to_bytes();
      ASSERT_EQ(got.size(), want.size()) << what;
      size_t first = got.size();
      for (size_t i = 0; i < got.size() && first == got.size(); ++i)
        if (got[i] != want[i]) first = i;
      EXPECT_EQ(first, got.size()) << what << ": first differing byte " << first << " (block "
                                   << first / ggml_type_size(t) << ")";
    }
  }
  // an offset view (rows 5..) quantizes the view's values
  Tensor xv = base.to_dtype(DType::F32).to_device(gpu()).narrow(0, 5, 7);
  EXPECT_EQ(QTensor::quantize(xv, GGMLType::Q8_0).to_bytes(),
            QTensor::quantize(base.to_dtype(DType::F32).narrow(0, 5, 7), GGMLType::Q8_0).to_bytes());
}

TEST(GpuQuant, QuantizeRoundTripAndUnsupportedTypes) {
  // Q8_0 round trip on the device alone: |x - q d| <= d / 2 from rounding q, plus up to
  // 127 * |d_f16 - d_f32| <= 127 * d * 2^-11 from storing d in f16: <= 0.57 d, d = amax / 127.
  Tensor x = Tensor::randn({16, 256}, DType::F32, gpu(), 5);
  Tensor back = QTensor::quantize(x, GGMLType::Q8_0).dequantize();
  std::vector<float> xv = x.to_vector<float>(), bv = back.to_vector<float>();
  for (size_t b = 0; b < xv.size() / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xv[b * 32 + j]));
    for (size_t j = 0; j < 32; ++j) ASSERT_LE(std::fabs(xv[b * 32 + j] - bv[b * 32 + j]), 0.57f * amax / 127.0f);
  }
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::MXFP4}) {
    Error e = error_of([&] { QTensor::quantize(x, t); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("quantize on the CPU"), std::string::npos) << e.what();
  }
}

namespace {

// Host reference of the prefill: y[i][o] = sum_j x~[i][j] w~[o][j] in f64, where w is the
// CPU's f32 dequantization and ~ is the rounding the GPU path applies to its operands (f16 for
// f32/f16 x, bf16 for bf16 x). The GPU forms each product exactly in f32 (11 + 11 or 8 + 8
// significant bits fit in 24) and sums k of them in f32 in an order of cuBLAS's choosing: any
// order of k - 1 additions errs by at most (k - 1) * u * sum|x~ w~| (u = 2^-24 for
// round-to-nearest). Tensor cores may truncate, and align a group's products to its largest
// exponent before adding (one more error of the same size per product), so the bound takes
// 2 k additions of unit 2^-23. Then one rounding to the output dtype: u_out * |y|. The bound is rigorous, and small enough that a wrong block,
// scale or row shows (a single weight off by its scale d moves y by |x| d >> the bound).
struct PrefillCheck {
  std::vector<double> want, bound;
};

PrefillCheck prefill_reference(const std::vector<float>& w, const std::vector<float>& x, size_t m, size_t n, size_t k,
                               DType xt) {
  const bool bf = xt == DType::BF16;
  auto rnd = [&](float v) { return bf ? float(bf16(v)) : float(f16(v)); };
  std::vector<float> wr(w.size()), xr(x.size());
  for (size_t i = 0; i < w.size(); ++i) wr[i] = rnd(w[i]);
  for (size_t i = 0; i < x.size(); ++i) xr[i] = rnd(x[i]);
  const double u_out = xt == DType::F32 ? 0x1p-24 : (xt == DType::F16 ? 0x1p-11 : 0x1p-8);
  const double gamma = 2.0 * double(k) * 0x1p-23;
  PrefillCheck c{std::vector<double>(m * n), std::vector<double>(m * n)};
  for (size_t i = 0; i < m; ++i)
    for (size_t o = 0; o < n; ++o) {
      double s = 0, a = 0;
      for (size_t j = 0; j < k; ++j) {
        const double p = double(xr[i * k + j]) * double(wr[o * k + j]);
        s += p;
        a += std::fabs(p);
      }
      c.want[i * n + o] = s;
      // + the f16 output's subnormal spacing (2^-24) halved, for results near zero
      c.bound[i * n + o] = gamma * a + u_out * (std::fabs(s) + gamma * a) + (xt == DType::F16 ? 0x1p-25 : 0.0);
    }
  return c;
}

// x (m, k) values representable in the path's operand type (so the check isolates the GEMM),
// unless `exact` is false (then f32 x carries bits f16 rounds away).
std::vector<float> prefill_x(size_t m, size_t k, DType xt, bool exact, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) {
    v = nd(rng);
    if (exact) v = xt == DType::BF16 ? float(bf16(v)) : float(f16(v));
  }
  return x;
}

::testing::AssertionResult within(const std::vector<double>& got, const PrefillCheck& c) {
  size_t bad = 0;
  std::string first;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - c.want[i]);
    worst = std::max(worst, err / (c.bound[i] > 0 ? c.bound[i] : 1e-300));
    if (!(err <= c.bound[i])) {
      if (bad++ == 0)
        first = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + " want " +
                std::to_string(c.want[i]) + " bound " + std::to_string(c.bound[i]);
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " outside the bound; first " << first;
  return ::testing::AssertionSuccess() << "worst error / bound " << worst;
}

}  // namespace

TEST(GpuQuant, PrefillEveryTypeWithinDerivedBound) {
  const size_t m = 64, n = 40, k = 512;
  for (GGMLType t : kTypes) {
    const std::string name = ggml_type_name(t);
    std::vector<uint8_t> bytes = sane_blocks(t, n * k / ggml_block_size(t), 200 + uint32_t(t));
    QTensor wc = QTensor::from_bytes(t, {n, k}, bytes.data(), bytes.size());
    QTensor wg = wc.to(gpu());
    const std::vector<float> w = wc.dequantize().to_vector<float>();
    for (DType xt : {DType::F16, DType::BF16, DType::F32}) {
      std::vector<float> x = prefill_x(m, k, xt, true, 300 + uint32_t(t));
      Tensor xg = Tensor::from_vector(x, {m, k}).to_dtype(xt).to_device(gpu());
      Tensor y = wg.matmul_t(xg);
      ASSERT_EQ(y.shape(), (Shape{m, n}));
      ASSERT_EQ(y.dtype(), xt);
      EXPECT_TRUE(within(wick::test::values(y), prefill_reference(w, x, m, n, k, xt)))
          << name << " x " << dtype_name(xt);
    }
  }
}

TEST(GpuQuant, PrefillShapesStridesAndRounding) {
  struct Case {
    GGMLType t;
    size_t m, n, k;
    DType xt;
  };
  const Case cases[] = {{GGMLType::Q4_K, 9, 37, 256, DType::F16},     {GGMLType::Q4_0, 512, 96, 4096, DType::F16},
                        {GGMLType::Q6_K, 130, 33, 768, DType::BF16},  {GGMLType::Q8_0, 17, 5, 96, DType::F32},
                        {GGMLType::MXFP4, 200, 64, 2880, DType::F16}, {GGMLType::IQ4_NL, 10, 3, 32, DType::F32}};
  for (const Case& c : cases) {
    const std::string name = std::string(ggml_type_name(c.t)) + " " + std::to_string(c.m) + "x" + std::to_string(c.n) +
                             "x" + std::to_string(c.k) + " " + dtype_name(c.xt);
    std::vector<uint8_t> bytes = sane_blocks(c.t, c.n * c.k / ggml_block_size(c.t), uint32_t(c.m + c.k));
    QTensor wc = QTensor::from_bytes(c.t, {c.n, c.k}, bytes.data(), bytes.size());
    QTensor wg = wc.to(gpu());
    const std::vector<float> w = wc.dequantize().to_vector<float>();
    std::vector<float> x = prefill_x(c.m, c.k, c.xt, true, uint32_t(c.n));
    const PrefillCheck ref = prefill_reference(w, x, c.m, c.n, c.k, c.xt);
    Tensor xc = Tensor::from_vector(x, {c.m, c.k}).to_dtype(c.xt);
    // contiguous
    EXPECT_TRUE(within(wick::test::values(wg.matmul_t(xc.to_device(gpu()))), ref)) << name;
    // rows 3 elements further apart than k, at an offset of 3: a narrow of a wider tensor
    std::vector<float> padded((c.k + 3) * c.m, 0.0f);
    for (size_t i = 0; i < c.m; ++i)
      for (size_t j = 0; j < c.k; ++j) padded[i * (c.k + 3) + 3 + j] = x[i * c.k + j];
    Tensor view = Tensor::from_vector(padded, {c.m, c.k + 3}).to_dtype(c.xt).to_device(gpu()).narrow(1, 3, c.k);
    ASSERT_EQ(view.layout().strides[0], int64_t(c.k + 3));
    EXPECT_TRUE(within(wick::test::values(wg.matmul_t(view)), ref)) << name << " strided";
  }
  // batch dims: (3, 5, k) -> (3, 5, n) = the 15 rows' products
  {
    const GGMLType t = GGMLType::Q5_K;
    const size_t n = 24, k = 512;
    std::vector<uint8_t> bytes = sane_blocks(t, n * 2, 77);
    QTensor wc = QTensor::from_bytes(t, {n, k}, bytes.data(), bytes.size());
    std::vector<float> x = prefill_x(15, k, DType::F16, true, 78);
    Tensor y = wc.to(gpu()).matmul_t(Tensor::from_vector(x, {3, 5, k}).to_dtype(DType::F16).to_device(gpu()));
    EXPECT_EQ(y.shape(), (Shape{3, 5, n}));
    EXPECT_TRUE(
        within(wick::test::values(y), prefill_reference(wc.dequantize().to_vector<float>(), x, 15, n, k, DType::F16)));
  }
  // f32 x with bits f16 does not keep: the product is of x rounded to f16 (nearest even), so the
  // reference that rounds x the same way holds with the GEMM-only bound
  {
    const GGMLType t = GGMLType::Q8_0;
    const size_t m = 12, n = 16, k = 256;
    std::vector<uint8_t> bytes = sane_blocks(t, n * k / 32, 79);
    QTensor wc = QTensor::from_bytes(t, {n, k}, bytes.data(), bytes.size());
    std::vector<float> x = prefill_x(m, k, DType::F32, false, 80);
    Tensor y = wc.to(gpu()).matmul_t(Tensor::from_vector(x, {m, k}).to_device(gpu()));
    EXPECT_TRUE(
        within(wick::test::values(y), prefill_reference(wc.dequantize().to_vector<float>(), x, m, n, k, DType::F32)));
  }
}

// Timing, run by hand (--gtest_also_run_disabled_tests): batch 512 x 4096 x 4096, quantized W
// through the prefill path against wick's own f16 matmul on the same shape.
TEST(GpuQuant, DISABLED_PrefillSpeed) {
  Device d = gpu();
  Backend& be = backend_for(d);
  const size_t m = 512, n = 4096, k = 4096;
  auto time_ms = [&](const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    be.synchronize();
    std::vector<double> reps;
    for (int r = 0; r < 7; ++r) {
      const int iters = 20;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) f();
      be.synchronize();
      reps.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    std::sort(reps.begin(), reps.end());
    return reps[reps.size() / 2];
  };
  const double flop = 2.0 * m * n * k;
  Tensor x = Tensor::randn({m, k}, DType::F16, d, 1);
  Tensor w16 = Tensor::randn({n, k}, DType::F16, d, 2).affine(0.01, 0.0);
  const double t16 = time_ms([&] { Tensor y = x.matmul(w16.t()); });
  std::printf("f16 matmul %zux%zux%zu: %.4f ms, %.1f TFLOP/s\n", m, n, k, t16, flop / t16 * 1e-9);
  for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q4_0, GGMLType::Q6_K, GGMLType::Q8_0, GGMLType::MXFP4}) {
    std::vector<uint8_t> bytes = sane_blocks(t, n * k / ggml_block_size(t), 5);
    QTensor w = QTensor::from_bytes(t, {n, k}, bytes.data(), bytes.size(), d);
    const double tq = time_ms([&] { Tensor y = w.matmul_t(x); });
    const double tdq = time_ms([&] { Tensor y = w.dequantize(DType::F16); });
    std::printf(
        "%-6s prefill f16 x: %.4f ms, %.1f TFLOP/s = %.0f%% of f16 matmul; dequantize->f16 alone %.4f ms "
        "(%.0f GB/s written+read)\n",
        ggml_type_name(t), tq, flop / tq * 1e-9, 100.0 * t16 / tq, tdq,
        (double(n * k) * 2 + double(bytes.size())) / tdq * 1e-6);
    Tensor x32 = x.to_dtype(DType::F32), xb = x.to_dtype(DType::BF16);
    const double t32 = time_ms([&] { Tensor y = w.matmul_t(x32); });
    const double tb = time_ms([&] { Tensor y = w.matmul_t(xb); });
    std::printf("       f32 x: %.4f ms (%.0f%%), bf16 x: %.4f ms (%.0f%%)\n", t32, 100.0 * t16 / t32, tb,
                100.0 * t16 / tb);
  }
}

// The public QTensor API (include/wick/quant.hpp) and the core's validation (src/core/quant.cpp):
// errors, to_bytes, dequantize, embedding, matmul_t, and GGUFFile::load_quantized. Expected values
// come from llama.cpp's gguf-py: tests/fixtures/quant.json (gen_quant.py: block bytes and their f32
// values, NaN/Inf scales included) and tests/fixtures/gguf/quantized.{gguf,json} (gen_gguf.py: a
// GGUF written by gguf-py, its f32 values and their f16/bf16 roundings computed by NumPy).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "test_util.hpp"
#include "wick/gguf.hpp"
#include "wick/quant.hpp"

using namespace wick;
using nlohmann::json;

using wick::test::from_hex;

namespace {

const json& quant_fixture() {
  static const json j = wick::test::load_json_fixture("quant.json");
  return j;
}
const json& gguf_fixture() {
  static const json j = wick::test::load_json_fixture("gguf/quantized.json");
  return j;
}

// Little-endian words of `bytes` bytes each (4: f32 bits, 2: f16/bf16 bits).
std::vector<uint32_t> words_from_hex(const std::string& h, size_t bytes) {
  const std::vector<uint8_t> b = from_hex(h);
  std::vector<uint32_t> out(b.size() / bytes);
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t k = 0; k < bytes; ++k) out[i] |= uint32_t(b[bytes * i + k]) << (8 * k);
  return out;
}
float f32_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// The bits of a tensor's elements (f32: 4 bytes each, f16/bf16: 2), as stored.
std::vector<uint32_t> bits_of(const Tensor& t) {
  const size_t w = dtype_size(t.dtype());
  std::vector<uint8_t> raw(t.numel() * w);
  t.copy_to_host(raw.data());
  std::vector<uint32_t> out(t.numel());
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t k = 0; k < w; ++k) out[i] |= uint32_t(raw[w * i + k]) << (8 * k);
  return out;
}
bool is_nan(uint32_t u, size_t bytes) {
  return bytes == 4 ? (u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)
                    : (bytes == 2 && (u & 0x7C00u) == 0x7C00u && (u & 0x3FFu));  // f16; bf16 below
}
// Elements whose bits differ (any NaN matches any NaN: NumPy and wick may carry other payloads).
size_t mismatches(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want, DType dt,
                  const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const bool nan_g = dt == DType::BF16 ? is_nan(got[i] << 16, 4) : is_nan(got[i], dtype_size(dt));
    const bool nan_w = dt == DType::BF16 ? is_nan(want[i] << 16, 4) : is_nan(want[i], dtype_size(dt));
    if (got[i] == want[i] || (nan_g && nan_w)) continue;
    if (bad++ < 4)
      ADD_FAILURE() << what << " element " << i << ": got bits 0x" << std::hex << got[i] << ", want 0x" << want[i];
  }
  return bad;
}

// The message of the Error `f` throws, which must be of `kind`.
std::string error_of(ErrorKind kind, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}
bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A type's fixture blocks from quant.json: the finite ones (two random blocks and a zero block)
// or all of them (extreme, NaN and Inf scales too), bytes and gguf-py's f32 bits.
struct Blocks {
  GGMLType type;
  size_t elems, bytes_per_block, count;
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> f32;
};
Blocks fixture_blocks(const std::string& name, bool finite_only) {
  const json& t = quant_fixture()["types"][name];
  Blocks b{GGMLType(t["id"].get<uint32_t>()), t["block_elems"], t["block_bytes"], 0, {}, {}};
  for (const auto& c : t["cases"]) {
    const std::string cn = c["name"];
    if (finite_only && cn != "random" && cn != "zero") continue;
    const auto by = from_hex(c["bytes"]);
    const auto v = words_from_hex(c["f32"], 4);
    b.bytes.insert(b.bytes.end(), by.begin(), by.end());
    b.f32.insert(b.f32.end(), v.begin(), v.end());
    ++b.count;
  }
  return b;
}
std::vector<std::string> supported_names() {
  std::vector<std::string> out;
  for (const auto& [name, t] : quant_fixture()["types"].items()) out.push_back(name);
  return out;
}

}  // namespace

// ---- construction and errors

TEST(QTensor, FromBytesChecksTheSize) {
  // Q4_0 (2, 64): 2 rows x 2 blocks x 18 bytes = 72
  std::vector<uint8_t> bytes(73, 0);
  const auto q = QTensor::from_bytes(GGMLType::Q4_0, {2, 64}, bytes.data(), 72);
  EXPECT_EQ(q.nbytes(), 72u);
  EXPECT_EQ(q.numel(), 128u);
  EXPECT_EQ(q.rank(), 2u);
  EXPECT_EQ(q.dim(-1), 64u);
  EXPECT_EQ(q.str(), "QTensor[2, 64] Q4_0 cpu");
  for (size_t n : {71u, 73u, 0u}) {
    const std::string m = error_of(ErrorKind::Argument, [&] {
      QTensor::from_bytes(GGMLType::Q4_0, {2, 64}, bytes.data(), n);
    });
    EXPECT_TRUE(has(m, "is 72 bytes")) << m;
    EXPECT_TRUE(has(m, "got " + std::to_string(n))) << m;
  }
  EXPECT_TRUE(has(error_of(ErrorKind::Argument,
                           [&] {
                             QTensor::from_bytes(GGMLType::Q4_0, {2, 64}, nullptr, 72);
                           }),
                  "null"));
}

TEST(QTensor, UnsupportedTypeNamesItselfAndTheSupportedOnes) {
  std::vector<uint8_t> bytes(66, 0);  // one IQ2_XXS block: 256 elements in 66 bytes
  const std::string m =
      error_of(ErrorKind::Unsupported, [&] { QTensor::from_bytes(GGMLType::IQ2_XXS, {256}, bytes.data(), 66); });
  EXPECT_TRUE(has(m, "IQ2_XXS")) << m;
  for (const char* t : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
                        "IQ4_NL", "IQ4_XS", "MXFP4"})
    EXPECT_TRUE(has(m, t)) << t << " missing from: " << m;
  // a plain type is not a QTensor either; an id ggml never assigned (4: the removed Q4_2) is refused
  EXPECT_TRUE(has(error_of(ErrorKind::Unsupported, [&] { QTensor::from_bytes(GGMLType::F32, {2}, bytes.data(), 8); }),
                  "ordinary Tensors"));
  EXPECT_TRUE(has(error_of(ErrorKind::Argument, [&] { QTensor::from_bytes(GGMLType(4), {32}, bytes.data(), 18); }),
                  "ggml type id 4"));
  EXPECT_FALSE(ggml_type_supported(GGMLType::IQ2_XXS));
  EXPECT_TRUE(ggml_type_supported(GGMLType::MXFP4));
  EXPECT_EQ(ggml_type_from_name("q4_k"), GGMLType::Q4_K);
  EXPECT_EQ(ggml_type_from_name("MxFp4"), GGMLType::MXFP4);
  EXPECT_EQ(ggml_type_from_name("q4_k_m"), std::nullopt);
  EXPECT_EQ(ggml_supported_types(),
            "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4");
}

TEST(QTensor, ShapeMustHoldWholeBlocks) {
  std::vector<uint8_t> bytes(1024, 0);
  std::string m = error_of(ErrorKind::Shape, [&] { QTensor::from_bytes(GGMLType::Q4_K, {2, 32}, bytes.data(), 144); });
  EXPECT_TRUE(has(m, "Q4_K")) << m;
  EXPECT_TRUE(has(m, "256")) << m;
  EXPECT_TRUE(has(m, "[2, 32]")) << m;
  m = error_of(ErrorKind::Shape, [&] { QTensor::from_bytes(GGMLType::Q8_0, {33}, bytes.data(), 34); });
  EXPECT_TRUE(has(m, "multiple of 32")) << m;
  EXPECT_TRUE(
      has(error_of(ErrorKind::Shape, [&] { QTensor::from_bytes(GGMLType::Q8_0, {}, bytes.data(), 34); }), "scalar"));
  // empty tensors are fine: no rows, or rows of no blocks
  EXPECT_EQ(QTensor::from_bytes(GGMLType::Q8_0, {0, 64}, bytes.data(), 0).nbytes(), 0u);
  EXPECT_EQ(QTensor::from_bytes(GGMLType::Q8_0, {3, 0}, bytes.data(), 0).numel(), 0u);
}

TEST(QTensor, UndefinedSaysSo) {
  const QTensor q;
  EXPECT_FALSE(q.defined());
  EXPECT_EQ(q.nbytes(), 0u);
  EXPECT_EQ(q.str(), "QTensor(undefined)");
  const Tensor x = Tensor::zeros({1, 32}, DType::F32);
  const Tensor ids = Tensor::zeros({1}, DType::I64);
  for (const auto& f : std::vector<std::function<void()>>{[&] { q.dequantize(); }, [&] { q.to_bytes(); },
                                                          [&] { q.matmul_t(x); }, [&] { q.embedding(ids); },
                                                          [&] { q.to(Device::cpu()); }, [&] { qmatmul(x, q); }})
    EXPECT_TRUE(has(error_of(ErrorKind::Argument, f), "undefined")) << "an op on an undefined QTensor";
}

TEST(QTensor, ToBytesRoundTrip) {
  for (const auto& name : supported_names()) {
    const Blocks b = fixture_blocks(name, false);
    const QTensor q = QTensor::from_bytes(b.type, {b.count, b.elems}, b.bytes.data(), b.bytes.size());
    EXPECT_EQ(q.to_bytes(), b.bytes) << name;
    EXPECT_EQ(q.type(), b.type);
    const QTensor c = q.to(Device::cpu());  // same device: shares the blocks
    EXPECT_EQ(c.storage(), q.storage()) << name;
    EXPECT_EQ(c.to_bytes(), b.bytes) << name;
  }
}

// rows(start, n): the bytes of those rows (row r is bytes [r, r + 1) x the row size of the file's
// blocks), and the range checks.
TEST(QTensor, RowsCopiesThatByteRange) {
  for (const auto& name : supported_names()) {
    const Blocks b = fixture_blocks(name, false);
    const QTensor q = QTensor::from_bytes(b.type, {b.count, b.elems}, b.bytes.data(), b.bytes.size());
    const size_t row = b.bytes.size() / b.count;
    for (auto [start, n] : std::vector<std::pair<size_t, size_t>>{{0, b.count}, {1, b.count - 1}, {b.count - 1, 1},
                                                                   {b.count / 2, 1}, {b.count, 0}}) {
      const QTensor r = q.rows(start, n);
      EXPECT_EQ(r.shape(), (Shape{n, b.elems})) << name;
      EXPECT_EQ(r.type(), b.type) << name;
      EXPECT_EQ(r.to_bytes(), std::vector<uint8_t>(b.bytes.begin() + long(start * row),
                                                   b.bytes.begin() + long((start + n) * row)))
          << name << " rows " << start << " + " << n;
    }
    for (auto [start, n] : std::vector<std::pair<size_t, size_t>>{{b.count, 1}, {0, b.count + 1}, {SIZE_MAX, 2}}) {
      try {
        (void)q.rows(start, n);
        ADD_FAILURE() << name << " rows " << start << " + " << n << " accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
        EXPECT_NE(std::string(e.what()).find("QTensor::rows"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_THROW((void)QTensor().rows(0, 1), Error);
}

// ---- dequantize

TEST(QTensor, DequantizeF32BitIdenticalToGgufPy) {
  size_t types = 0;
  for (const auto& name : supported_names()) {
    const Blocks b = fixture_blocks(name, false);  // NaN and Inf scales included
    const QTensor q = QTensor::from_bytes(b.type, {b.count, b.elems}, b.bytes.data(), b.bytes.size());
    const Tensor x = q.dequantize();
    EXPECT_EQ(x.dtype(), DType::F32);
    EXPECT_EQ(x.shape(), (Shape{b.count, b.elems}));
    EXPECT_EQ(mismatches(bits_of(x), b.f32, DType::F32, name), 0u);
    // a 3-D view of the same blocks decodes the same
    if (b.count % 7 == 0)
      EXPECT_EQ(
          mismatches(
              bits_of(
                  QTensor::from_bytes(b.type, {7, b.count / 7, b.elems}, b.bytes.data(), b.bytes.size()).dequantize()),
              b.f32, DType::F32, name + " 3-D"),
          0u);
    ++types;
  }
  EXPECT_EQ(types, 15u);
  EXPECT_TRUE(has(
      error_of(ErrorKind::DType,
               [&] {
                 const Blocks b = fixture_blocks("Q8_0", true);
                 QTensor::from_bytes(b.type, {b.count, b.elems}, b.bytes.data(), b.bytes.size()).dequantize(DType::F64);
               }),
      "f32, f16 or bf16"));
}

TEST(QTensor, DequantizeHalfIsTheF32ValueRoundedOnce) {
  // f16/bf16 expected bits: NumPy's rounding of gguf-py's f32 values (gen_gguf.py), including a
  // Q8_0 tensor whose 65504 scale overflows f16 to Inf and whose NaN / -Inf scales stay so.
  size_t n = 0;
  for (const auto& t : gguf_fixture()["tensors"]) {
    const GGMLType type = GGMLType(t["type"].get<uint32_t>());
    if (!ggml_is_quantized(type)) continue;
    const auto bytes = from_hex(t["raw_hex"]);
    const QTensor q = QTensor::from_bytes(type, t["shape"].get<Shape>(), bytes.data(), bytes.size());
    const std::string name = t["name"];
    EXPECT_EQ(mismatches(bits_of(q.dequantize(DType::F32)), words_from_hex(t["f32_hex"], 4), DType::F32, name), 0u);
    const Tensor h = q.dequantize(DType::F16), b = q.dequantize(DType::BF16);
    EXPECT_EQ(h.dtype(), DType::F16);
    EXPECT_EQ(b.shape(), q.shape());
    EXPECT_EQ(mismatches(bits_of(h), words_from_hex(t["f16_hex"], 2), DType::F16, name + " f16"), 0u);
    EXPECT_EQ(mismatches(bits_of(b), words_from_hex(t["bf16_hex"], 2), DType::BF16, name + " bf16"), 0u);
    ++n;
  }
  EXPECT_EQ(n, 15u);  // 13 types gguf-py decodes, a 3-D Q8_0 tensor and the extreme Q8_0 blocks
}

// ---- embedding

TEST(QTensor, EmbeddingGathersRowsForEveryIndexType) {
  for (const char* name : {"Q4_0", "Q5_1", "Q4_K", "Q6_K", "IQ4_XS", "MXFP4", "Q8_K"}) {
    const Blocks b = fixture_blocks(name, true);  // rows: random, random, zero
    const QTensor q = QTensor::from_bytes(b.type, {b.count, b.elems}, b.bytes.data(), b.bytes.size());
    const std::vector<int64_t> ids{2, 0, 1, 2, 1, 1};  // shape (2, 3)
    std::vector<uint32_t> want;
    for (int64_t id : ids) want.insert(want.end(), b.f32.begin() + id * b.elems, b.f32.begin() + (id + 1) * b.elems);
    for (DType idt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) {
      const Tensor t_ids = Tensor::from_vector(ids, {2, 3}).to_dtype(idt);
      const Tensor e = q.embedding(t_ids);
      EXPECT_EQ(e.shape(), (Shape{2, 3, b.elems})) << name;
      EXPECT_EQ(e.dtype(), DType::F32);
      EXPECT_EQ(mismatches(bits_of(e), want, DType::F32, std::string(name) + " ids " + dtype_name(idt)), 0u);
    }
    // strided ids (a transposed view) and half outputs: the rows of dequantize(F16/BF16)
    const Tensor t_ids = Tensor::from_vector(std::vector<int32_t>{2, 1, 0, 2}, {2, 2}).t();  // [[2,0],[1,2]]
    for (DType dt : {DType::F16, DType::BF16}) {
      const std::vector<uint32_t> all = bits_of(q.dequantize(dt));
      std::vector<uint32_t> w;
      for (int64_t id : {2, 0, 1, 2}) w.insert(w.end(), all.begin() + id * b.elems, all.begin() + (id + 1) * b.elems);
      EXPECT_EQ(mismatches(bits_of(q.embedding(t_ids, dt)), w, dt, std::string(name) + " strided ids"), 0u);
    }
    // a scalar id gives one row of shape (dim); no ids give (0, dim)
    EXPECT_EQ(q.embedding(Tensor::from_vector(std::vector<uint32_t>{1}, Shape{})).shape(), (Shape{b.elems}));
    EXPECT_EQ(q.embedding(Tensor::zeros({0}, DType::I64)).shape(), (Shape{0, b.elems}));
  }
}

TEST(QTensor, EmbeddingErrors) {
  const Blocks b = fixture_blocks("Q8_0", true);
  const QTensor q = QTensor::from_bytes(b.type, {b.count, b.elems}, b.bytes.data(), b.bytes.size());
  std::string m = error_of(ErrorKind::Index, [&] {
    q.embedding(Tensor::from_vector(std::vector<int64_t>{0, 3}, {2}));
  });
  EXPECT_TRUE(has(m, "id 3")) << m;
  EXPECT_TRUE(has(m, "3 rows")) << m;
  m = error_of(ErrorKind::Index, [&] { q.embedding(Tensor::from_vector(std::vector<int32_t>{-1}, {1})); });
  EXPECT_TRUE(has(m, "id -1")) << m;
  m = error_of(ErrorKind::DType, [&] { q.embedding(Tensor::zeros({2}, DType::F32)); });
  EXPECT_TRUE(has(m, "f32")) << m;
  m = error_of(ErrorKind::DType, [&] { q.embedding(Tensor::zeros({2}, DType::I64), DType::F64); });
  EXPECT_TRUE(has(m, "f64")) << m;
  const QTensor q3 = QTensor::from_bytes(b.type, {1, b.count, b.elems}, b.bytes.data(), b.bytes.size());
  m = error_of(ErrorKind::Shape, [&] { q3.embedding(Tensor::zeros({1}, DType::I64)); });
  EXPECT_TRUE(has(m, "(vocab, dim)")) << m;
  // a table of empty rows still has rows: id 2 of (3, 0) is one empty row, id 3 is out of range
  const QTensor empty = QTensor::from_bytes(GGMLType::Q8_0, {3, 0}, nullptr, 0);
  EXPECT_EQ(empty.embedding(Tensor::from_vector(std::vector<int64_t>{2}, {1})).shape(), (Shape{1, 0}));
  EXPECT_THROW(empty.embedding(Tensor::from_vector(std::vector<int64_t>{3}, {1})), Error);
}

// ---- matmul_t

namespace {

// A (n, k) weight of `name` built from the type's finite fixture blocks in turn (block (r, c) is
// fixture block (r * k / B + c) % count), so every row differs; values are gguf-py's.
struct Weight {
  QTensor q;
  std::vector<double> w;  // (n, k) row-major
  size_t n, k, block;
};
Weight make_weight(const std::string& name, size_t n, size_t blocks_per_row) {
  const Blocks b = fixture_blocks(name, true);
  const size_t k = blocks_per_row * b.elems;
  std::vector<uint8_t> bytes;
  std::vector<double> w;
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < blocks_per_row; ++c) {
      const size_t f = (r * blocks_per_row + c) % b.count;
      bytes.insert(bytes.end(), b.bytes.begin() + f * b.bytes_per_block, b.bytes.begin() + (f + 1) * b.bytes_per_block);
      for (size_t j = 0; j < b.elems; ++j) w.push_back(f32_of(b.f32[f * b.elems + j]));
    }
  return {QTensor::from_bytes(b.type, {n, k}, bytes.data(), bytes.size()), w, n, k, b.elems};
}

// y = x @ W^T checked element by element against the f64 product of x's values and gguf-py's
// weight values. The decode path quantizes each x row to the weight's activation format (Q8_0 /
// Q8_1 blocks of 32 for the 32-element types, Q8_K blocks of 256 for the k-quants and IQ4_XS):
// q = round(x / d) with d = amax / 127, so |x - d q| <= d / 2; Q8_0/Q8_1 store d as f16, off by at
// most 2^-11 d, which moves d q by 127 * 2^-11 d < 0.0625 d, so |x - x_q| <= 0.5625 d; Q8_K stores
// d = amax / 128 in f32, and where the opposite extreme clamps at 127 the error is one step, d.
// Hence |y - y_ref| <= sum over x blocks of e_b * sum_{j in b} |w_j| (e_b = 0.5625 amax_b / 127 or
// amax_b / 128), plus the f32 arithmetic: products and sums rounded in f32, 1e-5 * sum |x_j w_j|
// (2^-24 per operation times the few hundred terms a row has, summed pairwise or in blocks). The
// prefill path (no activation quantization) is inside the same bound. An f16/bf16 result is
// rounded once more: half an ulp, 2^-11 / 2^-8 relative (plus the f16 subnormal spacing).
void check_matmul(const Weight& W, const Tensor& x, const std::string& what) {
  const Tensor y = W.q.matmul_t(x);
  Shape want_shape = x.shape();
  want_shape.back() = W.n;
  ASSERT_EQ(y.shape(), want_shape) << what;
  ASSERT_EQ(y.dtype(), x.dtype()) << what;
  const std::vector<double> xv = wick::test::values(x), yv = wick::test::values(y);
  const size_t m = W.k ? xv.size() / W.k : 0;
  const double out_rel = x.dtype() == DType::F16    ? std::ldexp(1.0, -11)
                         : x.dtype() == DType::BF16 ? std::ldexp(1.0, -8)
                                                    : 0;
  const double out_abs = x.dtype() == DType::F16 ? std::ldexp(1.0, -25) : 0;
  const bool k_block = W.block == 256;
  size_t bad = 0;
  double worst = 0;  // largest |err| / bound seen
  for (size_t i = 0; i < m; ++i)
    for (size_t r = 0; r < W.n; ++r) {
      double ref = 0, bound = 0, abs_sum = 0;
      for (size_t b0 = 0; b0 < W.k; b0 += W.block) {
        double amax = 0, wsum = 0;
        for (size_t j = b0; j < b0 + W.block; ++j) {
          const double xj = xv[i * W.k + j], wj = W.w[r * W.k + j];
          amax = std::max(amax, std::fabs(xj));
          wsum += std::fabs(wj);
          ref += xj * wj;
          abs_sum += std::fabs(xj * wj);
        }
        bound += (k_block ? amax / 128 : 0.5625 * amax / 127) * wsum;
      }
      bound += 1e-5 * abs_sum;
      bound += (std::fabs(ref) + bound) * out_rel + out_abs;
      const double err = std::fabs(yv[i * W.n + r] - ref);
      if (bound > 0) worst = std::max(worst, err / bound);
      if (!(err <= bound) && bad++ < 3)
        ADD_FAILURE() << what << " y[" << i << ", " << r << "] = " << yv[i * W.n + r] << ", reference " << ref
                      << ", |err| " << err << " > bound " << bound;
    }
  EXPECT_EQ(bad, 0u) << what << " (worst err/bound " << worst << ")";
}

}  // namespace

TEST(QTensor, MatmulEveryTypeBatchShapesAgainstF64) {
  for (const auto& name : supported_names()) {
    const size_t be = quant_fixture()["types"][name]["block_elems"];
    const Weight W = make_weight(name, 5, be == 32 ? 3 : 2);  // k = 96 or 512
    const std::string tag = name + " k=" + std::to_string(W.k);
    for (size_t m : {1u, 2u, 3u, 8u, 9u, 17u})
      check_matmul(W, Tensor::randn({m, W.k}, DType::F32, Device::cpu(), 100 + m), tag + " m=" + std::to_string(m));
    check_matmul(W, Tensor::randn({W.k}, DType::F32, Device::cpu(), 7), tag + " 1-D x");
    check_matmul(W, Tensor::randn({2, 3, W.k}, DType::F32, Device::cpu(), 8), tag + " 3-D x");
    check_matmul(W, Tensor::randn({2, 2, 5, W.k}, DType::F32, Device::cpu(), 9), tag + " 4-D x, 20 rows");
    // non-contiguous x: a transposed view (unit stride along m, not k), a narrowed view (row
    // stride > k, offset), a narrowed middle dim of a 3-D tensor (rows not evenly spaced)
    check_matmul(W, Tensor::randn({W.k, 4}, DType::F32, Device::cpu(), 10).t(), tag + " transposed x");
    check_matmul(W, Tensor::randn({6, W.k + 64}, DType::F32, Device::cpu(), 11).narrow(1, 32, W.k).narrow(0, 1, 4),
                 tag + " narrowed x");
    check_matmul(W, Tensor::randn({2, 5, W.k}, DType::F32, Device::cpu(), 12).narrow(1, 1, 3), tag + " 3-D narrowed x");
  }
}

TEST(QTensor, MatmulHalfActivations) {
  for (const char* name : {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "MXFP4"}) {
    const size_t be = quant_fixture()["types"][name]["block_elems"];
    const Weight W = make_weight(name, 4, be == 32 ? 4 : 2);
    for (DType dt : {DType::F16, DType::BF16})
      for (size_t m : {1u, 8u, 12u})
        check_matmul(W, Tensor::randn({m, W.k}, DType::F32, Device::cpu(), 20 + m).to_dtype(dt),
                     std::string(name) + " " + dtype_name(dt) + " m=" + std::to_string(m));
  }
}

TEST(QTensor, MatmulLargerShapes) {
  // Batches that take the prefill path and a k with many blocks (k = 1024 / 2048).
  for (const char* name : {"Q4_0", "Q5_1", "Q4_K", "Q3_K", "IQ4_NL"}) {
    const size_t be = quant_fixture()["types"][name]["block_elems"];
    const Weight W = make_weight(name, 33, be == 32 ? 32 : 8);
    for (size_t m : {1u, 4u, 64u})
      check_matmul(W, Tensor::randn({m, W.k}, DType::F32, Device::cpu(), 40 + m),
                   std::string(name) + " m=" + std::to_string(m));
  }
}

TEST(QTensor, MatmulEmptyShapes) {
  const Weight W = make_weight("Q8_0", 3, 2);  // (3, 64)
  // m = 0: no rows in, none out
  Tensor y = W.q.matmul_t(Tensor::zeros({0, 64}, DType::F32));
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  EXPECT_EQ(W.q.matmul_t(Tensor::zeros({2, 0, 64}, DType::BF16)).shape(), (Shape{2, 0, 3}));
  // n = 0: a weight of no rows gives (m, 0)
  const QTensor none = QTensor::from_bytes(GGMLType::Q8_0, {0, 64}, nullptr, 0);
  y = none.matmul_t(Tensor::ones({4, 64}, DType::F32));
  EXPECT_EQ(y.shape(), (Shape{4, 0}));
  EXPECT_EQ(y.dtype(), DType::F32);
  // k = 0: every output is the empty sum, 0
  const QTensor flat = QTensor::from_bytes(GGMLType::Q4_K, {2, 0}, nullptr, 0);
  y = flat.matmul_t(Tensor::zeros({3, 0}, DType::F16));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_TRUE(wick::test::all_close(y, std::vector<double>(6, 0.0), 0, 0));
}

TEST(QTensor, MatmulErrors) {
  const Weight W = make_weight("Q4_0", 2, 2);  // (2, 64)
  std::string m = error_of(ErrorKind::Shape, [&] { W.q.matmul_t(Tensor::zeros({1, 32}, DType::F32)); });
  EXPECT_TRUE(has(m, "k = 64")) << m;
  EXPECT_TRUE(has(error_of(ErrorKind::Shape, [&] { W.q.matmul_t(Tensor::zeros(Shape{}, DType::F32)); }), "k = 64"));
  m = error_of(ErrorKind::DType, [&] { W.q.matmul_t(Tensor::zeros({1, 64}, DType::F64)); });
  EXPECT_TRUE(has(m, "f32, f16 or bf16")) << m;
  EXPECT_THROW(W.q.matmul_t(Tensor::zeros({1, 64}, DType::I32)), Error);
  const Blocks b = fixture_blocks("Q4_0", true);
  const QTensor stacked = QTensor::from_bytes(b.type, {1, b.count, b.elems}, b.bytes.data(), b.bytes.size());
  m = error_of(ErrorKind::Shape, [&] { stacked.matmul_t(Tensor::zeros({1, 32}, DType::F32)); });
  EXPECT_TRUE(has(m, "(n, k) matrix")) << m;
  EXPECT_THROW(qmatmul(Tensor(), W.q), Error);
}

TEST(QTensor, DeviceMismatchIsAnError) {
  const std::vector<Device> devs = available_devices();
  if (devs.size() < 2) GTEST_SKIP() << "no GPU in this build or machine: the device check needs one";
  const Device gpu = devs[1];
  const Weight W = make_weight("Q8_0", 2, 1);
  std::string m = error_of(ErrorKind::Device, [&] { W.q.matmul_t(Tensor::zeros({1, 32}, DType::F32, gpu)); });
  EXPECT_TRUE(has(m, gpu.name())) << m;
  m = error_of(ErrorKind::Device, [&] { W.q.embedding(Tensor::zeros({1}, DType::I64, gpu)); });
  EXPECT_TRUE(has(m, gpu.name())) << m;
}

// ---- GGUF

TEST(QTensor, LoadQuantizedIsZeroCopyAndKeepsTheFileAlive) {
  const std::string path = wick::test::fixture_path("gguf/quantized.gguf");
  QTensor q4k, q3d;
  const unsigned char* mapped = nullptr;
  {
    const GGUFFile f = GGUFFile::open(path);
    q4k = f.load_quantized("q.q4_k");
    q3d = f.load_quantized("q.q8_0_3d");
    mapped = f.raw("q.q4_k").first;
    // on the CPU the QTensor's blocks are the mapping itself
    EXPECT_EQ(static_cast<const cpu::CpuStorage&>(*q4k.storage()).data(), static_cast<const void*>(mapped));
    // load() of a quantized tensor points to load_quantized, and the other way round
    std::string m = error_of(ErrorKind::Unsupported, [&] { f.load("q.q4_k"); });
    EXPECT_TRUE(has(m, "load_quantized")) << m;
    EXPECT_TRUE(has(m, "Q4_K")) << m;
    m = error_of(ErrorKind::Unsupported, [&] { f.load_quantized("plain.f32"); });
    EXPECT_TRUE(has(m, "load()")) << m;
    EXPECT_THROW(f.load_quantized("no.such.tensor"), Error);
  }
  // the GGUFFile is gone; its mapping lives on in the QTensors
  EXPECT_EQ(static_cast<const cpu::CpuStorage&>(*q4k.storage()).data(), static_cast<const void*>(mapped));
  for (const auto& t : gguf_fixture()["tensors"]) {
    const QTensor* q = t["name"] == "q.q4_k" ? &q4k : t["name"] == "q.q8_0_3d" ? &q3d : nullptr;
    if (!q) continue;
    EXPECT_EQ(q->shape(), t["shape"].get<Shape>());
    EXPECT_EQ(q->to_bytes(), from_hex(t["raw_hex"]));
    EXPECT_EQ(mismatches(bits_of(q->dequantize()), words_from_hex(t["f32_hex"], 4), DType::F32, t["name"]), 0u);
  }
  EXPECT_EQ(q3d.shape(), (Shape{2, 2, 32}));
}

// cat_rows stacks whole rows of blocks: the stacked matrix's bytes are the parts' bytes back to back
// and it dequantizes to the parts' rows in order; mismatched parts are refused.
TEST(QTensor, CatRowsStacksTheBlocks) {
  const Tensor a = Tensor::rand({3, 64}, DType::F32, Device::cpu(), 11, -2.0, 2.0);
  const Tensor b = Tensor::rand({5, 64}, DType::F32, Device::cpu(), 12, -2.0, 2.0);
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q8_0}) {
    const QTensor qa = QTensor::quantize(a, t), qb = QTensor::quantize(b, t);
    const QTensor s = QTensor::cat_rows({qa, qb});
    EXPECT_EQ(s.shape(), (Shape{8, 64}));
    EXPECT_EQ(s.type(), t);
    std::vector<uint8_t> want = qa.to_bytes();
    const std::vector<uint8_t> wb = qb.to_bytes();
    want.insert(want.end(), wb.begin(), wb.end());
    EXPECT_EQ(s.to_bytes(), want);
    std::vector<float> rows = qa.dequantize().to_vector<float>();
    const std::vector<float> rb = qb.dequantize().to_vector<float>();
    rows.insert(rows.end(), rb.begin(), rb.end());
    EXPECT_EQ(s.dequantize().to_vector<float>(), rows);
  }
  const QTensor q4 = QTensor::quantize(a, GGMLType::Q4_0), q8 = QTensor::quantize(b, GGMLType::Q8_0);
  EXPECT_THROW(QTensor::cat_rows({q4, q8}), Error);
  EXPECT_THROW(QTensor::cat_rows({q4, QTensor::quantize(Tensor::rand({3, 32}, DType::F32, Device::cpu(), 13), GGMLType::Q4_0)}), Error);
  EXPECT_THROW(QTensor::cat_rows({}), Error);
}

// CPU quantizers (src/backend/cpu/quantize.cpp, src/ops/quant_encode.hpp) through the public API
// QTensor::quantize + to_bytes. Expected bytes: tests/fixtures/quant_llama.json, written by
// gen_quant_llama.py with llama.cpp's own ggml-base (ggml_quantize_chunk without an importance
// matrix, what llama-quantize writes; Q8_1/Q8_K: ggml's reference row quantizers), and
// tests/fixtures/quant.json (gguf-py's NumPy quantizers for the legacy types).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"
#include "test_util.hpp"

using namespace wick;
using nlohmann::json;

using wick::test::from_hex;

namespace {

const json& llama() {
  static json j = wick::test::load_json_fixture("quant_llama.json");
  return j;
}

std::vector<float> floats_from_hex(const std::string& h) {
  std::vector<uint8_t> b = from_hex(h);
  std::vector<float> out(b.size() / 4);
  std::memcpy(out.data(), b.data(), b.size());  // little-endian f32, as the host
  return out;
}

GGMLType type_named(const std::string& name) {
  auto t = ggml_type_from_name(name);
  if (!t) throw std::runtime_error("unknown type " + name);
  return *t;
}

// Compares block bytes; on a difference names the row, the block and the first differing byte.
::testing::AssertionResult same_blocks(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, GGMLType t,
                                       size_t cols, const std::vector<std::string>& row_names) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  const size_t bb = ggml_type_size(t), per_row = cols / ggml_block_size(t) * bb;
  size_t bad_blocks = 0;
  std::string first;
  for (size_t b = 0; b * bb < got.size(); ++b)
    for (size_t i = 0; i < bb; ++i)
      if (got[b * bb + i] != want[b * bb + i]) {
        if (bad_blocks++ == 0) {
          size_t row = b * bb / per_row;
          first = "row " + std::to_string(row) + " (" + (row < row_names.size() ? row_names[row] : "?") + ") block " +
                  std::to_string((b * bb % per_row) / bb) + " byte " + std::to_string(i) + ": got " +
                  std::to_string(got[b * bb + i]) + " want " + std::to_string(want[b * bb + i]);
        }
        break;
      }
  if (bad_blocks == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << ggml_type_name(t) << ": " << bad_blocks << " blocks differ; first at "
                                       << first;
}

struct Set {
  std::vector<float> x;
  std::vector<std::string> names;
  size_t rows, cols;
};

Set load_set(const std::string& name) {
  const json& s = llama()["sets"][name];
  Set out;
  out.x = floats_from_hex(s["f32"].get<std::string>());
  out.names = s["names"].get<std::vector<std::string>>();
  out.cols = llama()["cols"].get<size_t>();
  out.rows = out.x.size() / out.cols;
  return out;
}

std::vector<uint8_t> quantize_bytes(const Tensor& x, GGMLType t) { return QTensor::quantize(x, t).to_bytes(); }

void check_set(const std::string& set_name) {
  const Set s = load_set(set_name);
  ASSERT_EQ(s.rows, s.names.size());
  const Tensor x = Tensor::from_data(s.x.data(), {s.rows, s.cols}, DType::F32);
  size_t types = 0;
  for (const auto& [name, t] : llama()["sets"][set_name]["types"].items()) {
    const GGMLType type = type_named(name);
    EXPECT_EQ(static_cast<uint32_t>(type), t["id"].get<uint32_t>()) << name;
    EXPECT_TRUE(same_blocks(quantize_bytes(x, type), from_hex(t["bytes"].get<std::string>()), type, s.cols, s.names))
        << set_name << " " << name;
    ++types;
  }
  EXPECT_EQ(types, 15u);
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

// Every type wick decodes has a quantizer and llama.cpp bytes to match.
TEST(Quantize, EverySupportedTypeHasLlamaBytes) {
  for (const auto& info : quant::kGGMLTypes) {
    if (!info.dequant) continue;
    EXPECT_TRUE(llama()["sets"]["rows"]["types"].contains(info.name)) << info.name;
    EXPECT_TRUE(llama()["sets"]["special"]["types"].contains(info.name)) << info.name;
  }
}

// Normal, outlier, zero, constant, one-signed, mixed-magnitude (down to f32 subnormals and below
// ggml's GROUP_MAX_EPS), heavy-tailed, exact-tie and sparse rows: the bytes llama.cpp writes.
TEST(Quantize, ByteIdenticalToLlamaCpp) { check_set("rows"); }

// NaN (also with payloads), +/-Inf and values near f16's / f32's limits: llama.cpp (x86) is the
// reference here too, and wick gives its bytes. What that means (decoded with gguf-py): a NaN is
// skipped by every max/min/scale search and its block decodes finite, except in Q8_0/Q8_1 when it
// is a block's last element (ggml's MAX(amax, NaN) then makes d NaN: the block decodes to NaN).
// An Inf only spoils its own block: Q4_0..Q8_0, Q2_K, Q4_K, Q5_K and IQ4_NL decode it to Inf/NaN
// everywhere; Q3_K, Q6_K, IQ4_XS and MXFP4 to finite values (the Inf lost). Other blocks of the
// row are unaffected.
TEST(Quantize, NanInfAndExtremesAsLlamaCpp) { check_set("special"); }

// gguf-py's NumPy quantizers (quant.json, gen_quant.py) give the same legacy bytes.
TEST(Quantize, LegacyByteIdenticalToGgufPy) {
  const json q = wick::test::load_json_fixture("quant.json")["quantize"];
  size_t n = 0;
  for (const auto& [name, c] : q.items()) {
    const GGMLType type = type_named(name);
    const std::vector<float> x = floats_from_hex(c["f32"].get<std::string>());
    const size_t rows = c["rows"].get<size_t>(), cols = c["cols"].get<size_t>();
    const Tensor t = Tensor::from_data(x.data(), {rows, cols}, DType::F32);
    EXPECT_TRUE(same_blocks(quantize_bytes(t, type), from_hex(c["bytes"].get<std::string>()), type, cols, {})) << name;
    ++n;
  }
  EXPECT_EQ(n, 5u);
}

// f64 input rounds to f32 once (exact here: the values are f32), f16/bf16 widen exactly: the
// "grid" row (multiples of 1/8, exact in every float type) gives llama.cpp's bytes from each.
TEST(Quantize, InputDtypes) {
  const Set s = load_set("rows");
  size_t grid = 0;
  while (grid < s.names.size() && s.names[grid] != "grid") ++grid;
  ASSERT_LT(grid, s.names.size());
  std::vector<double> d(s.x.begin(), s.x.end());
  const Tensor f64 = Tensor::from_data(d.data(), {s.rows, s.cols}, DType::F64);
  const Tensor grid_f32 = Tensor::from_data(s.x.data() + grid * s.cols, {1, s.cols}, DType::F32);
  for (const auto& [name, t] : llama()["sets"]["rows"]["types"].items()) {
    const GGMLType type = type_named(name);
    const std::vector<uint8_t> want = from_hex(t["bytes"].get<std::string>());
    EXPECT_TRUE(same_blocks(quantize_bytes(f64, type), want, type, s.cols, s.names)) << "f64 " << name;
    const size_t rb = s.cols / ggml_block_size(type) * ggml_type_size(type);
    const std::vector<uint8_t> want_grid(want.begin() + long(grid * rb), want.begin() + long((grid + 1) * rb));
    for (DType dt : {DType::F16, DType::BF16})
      EXPECT_TRUE(same_blocks(quantize_bytes(grid_f32.to_dtype(dt), type), want_grid, type, s.cols, {"grid"}))
          << dtype_name(dt) << " " << name;
  }
}

// Any layout: a transposed view and an offset view quantize as their contiguous values.
TEST(Quantize, StridedAndOffsetInput) {
  const Set s = load_set("rows");
  const Tensor x = Tensor::from_data(s.x.data(), {s.rows, s.cols}, DType::F32);
  for (const char* name : {"Q4_K", "Q8_0", "IQ4_XS"}) {
    const GGMLType type = type_named(name);
    const std::vector<uint8_t> want = from_hex(llama()["sets"]["rows"]["types"][name]["bytes"].get<std::string>());
    EXPECT_TRUE(same_blocks(quantize_bytes(wick::test::as_transposed(x), type), want, type, s.cols, s.names)) << name;
    EXPECT_TRUE(same_blocks(quantize_bytes(wick::test::as_offset(x), type), want, type, s.cols, s.names)) << name;
    // Rows 3.. of the fixture as a narrow() view: the matching tail of the bytes.
    const size_t rb = s.cols / ggml_block_size(type) * ggml_type_size(type);
    const std::vector<uint8_t> tail(want.begin() + long(3 * rb), want.end());
    EXPECT_TRUE(same_blocks(quantize_bytes(x.narrow(0, 3, s.rows - 3), type), tail, type, s.cols, {})) << name;
  }
}

// Many rows at once (the thread pool) give each row's bytes; shape (2, 3, 512) is 6 rows.
TEST(Quantize, ManyRowsAndHigherRank) {
  const Tensor x = Tensor::randn({96, 1024}, DType::F32, Device::cpu(), 11);
  for (GGMLType type : {GGMLType::Q3_K, GGMLType::Q5_1, GGMLType::MXFP4}) {
    const std::vector<uint8_t> all = quantize_bytes(x, type);
    const size_t rb = 1024 / ggml_block_size(type) * ggml_type_size(type);
    ASSERT_EQ(all.size(), 96 * rb);
    for (size_t r : {size_t(0), size_t(47), size_t(95)}) {
      const std::vector<uint8_t> one = quantize_bytes(x.narrow(0, r, 1), type);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + long(r * rb))) << ggml_type_name(type) << " " << r;
    }
  }
  const Set s = load_set("rows");
  const Tensor x3 = Tensor::from_data(s.x.data(), {2, 3, s.cols}, DType::F32);
  const QTensor q = QTensor::quantize(x3, GGMLType::Q6_K);
  EXPECT_EQ(q.shape(), (Shape{2, 3, s.cols}));
  const std::vector<uint8_t> want = from_hex(llama()["sets"]["rows"]["types"]["Q6_K"]["bytes"].get<std::string>());
  const std::vector<uint8_t> head(want.begin(), want.begin() + long(q.nbytes()));
  EXPECT_EQ(q.to_bytes(), head);
}

// Round trip: dequantize(quantize(x)) has llama.cpp's RMSE (gguf-py's decode of llama.cpp's bytes,
// in the fixture) on every finite row; a loose sanity bound on top for the normal rows.
TEST(Quantize, RoundTripErrorMatchesLlamaCpp) {
  const Set s = load_set("rows");
  const Tensor x = Tensor::from_data(s.x.data(), {s.rows, s.cols}, DType::F32);
  for (const auto& [name, t] : llama()["sets"]["rows"]["types"].items()) {
    if (!t.contains("rmse")) continue;  // Q8_1 / Q8_K: no gguf-py decoder
    const std::vector<float> back = QTensor::quantize(x, type_named(name)).dequantize().to_vector<float>();
    for (size_t r = 0; r < s.rows; ++r) {
      double se = 0;
      for (size_t i = 0; i < s.cols; ++i) {
        double e = double(back[r * s.cols + i]) - double(s.x[r * s.cols + i]);
        se += e * e;
      }
      const double rmse = std::sqrt(se / double(s.cols)), want = t["rmse"][r].get<double>();
      EXPECT_NEAR(rmse, want, 1e-9 * (1 + want)) << name << " row " << s.names[r];
      if (s.names[r].rfind("normal", 0) == 0)  // unit variance; Q2_K (2.6 bits) is the coarsest at ~0.3
        EXPECT_LT(rmse, 0.35) << name << " row " << s.names[r];
    }
  }
}

// The host+device activation encoders directly: Q8_0 / Q8_1 / Q8_K of one block, hand-checked.
TEST(Quantize, ActivationEncodersByHand) {
  float x[256];
  for (int i = 0; i < 256; ++i) x[i] = float(i % 32) - 15.5f;  // -15.5 .. 15.5 per 32
  uint8_t b[292];
  quant::quantize_block_q8_0(x, b);
  // amax 15.5 -> d = 15.5 / 127 (f16 0x2FD0 = 0.1220703125); q = roundf(x * 127 / 15.5): -127 .. 127
  EXPECT_EQ(b[0] | (b[1] << 8), 0x2FD0);
  EXPECT_EQ(int8_t(b[2]), -127);
  EXPECT_EQ(int8_t(b[2 + 31]), 127);
  EXPECT_EQ(int8_t(b[2 + 15]), -4);  // -0.5 * 127 / 15.5 = -4.097 -> -4
  quant::quantize_block_q8_1(x, b);
  EXPECT_EQ(b[0] | (b[1] << 8), 0x2FD0);
  EXPECT_EQ(b[2] | (b[3] << 8), 0);  // symmetric values: sum(q) = 0 -> s = +0
  quant::quantize_block_q8_K(x, b);
  // max = -15.5 (first of largest magnitude): iscale = 127 / 15.5, d = 1 / iscale (f32)
  float d;
  std::memcpy(&d, b, 4);
  EXPECT_EQ(d, 1.0f / (-127.0f / -15.5f));
  EXPECT_EQ(int8_t(b[4]), -127);
  EXPECT_EQ(int8_t(b[4 + 31]), 127);
  EXPECT_EQ(int8_t(b[4 + 16]), 4);  // 0.5 * 127 / 15.5 = 4.097
  // bsums: group 0 holds -15.5 .. -0.5 -> q -127 .. -4; symmetric group pairs sum to 0
  int16_t g0 = int16_t(b[260] | (b[261] << 8)), g1 = int16_t(b[262] | (b[263] << 8));
  EXPECT_LT(g0, 0);
  EXPECT_EQ(g0 + g1, 0);
  float zero[256] = {};
  quant::quantize_block_q8_K(zero, b);
  for (int i = 0; i < 292; ++i) ASSERT_EQ(b[i], 0) << i;
}

TEST(Quantize, Errors) {
  const Tensor x = Tensor::zeros({2, 128}, DType::F32);
  Error e = error_of([&] { QTensor::quantize(x, GGMLType::Q4_K); });
  EXPECT_EQ(e.kind(), ErrorKind::Shape);
  EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  e = error_of([&] { QTensor::quantize(Tensor::zeros({2, 33}, DType::F32), GGMLType::Q8_0); });
  EXPECT_EQ(e.kind(), ErrorKind::Shape);
  e = error_of([&] { QTensor::quantize(Tensor::zeros({2, 32}, DType::I32), GGMLType::Q8_0); });
  EXPECT_EQ(e.kind(), ErrorKind::DType);
  EXPECT_NE(std::string(e.what()).find("to_dtype"), std::string::npos) << e.what();
  e = error_of([&] { QTensor::quantize(Tensor::zeros({2, 256}, DType::F32), GGMLType::IQ2_XXS); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  // An empty tensor quantizes to no bytes.
  EXPECT_EQ(QTensor::quantize(Tensor::zeros({0, 256}, DType::F32), GGMLType::Q4_K).nbytes(), 0u);
}

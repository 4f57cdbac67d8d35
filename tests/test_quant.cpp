// GGUF block formats (src/ops/quant_blocks.hpp) and their CPU dequantization
// (src/backend/cpu/quant.hpp). Expected values: tests/fixtures/quant.json, written by
// gen_quant.py from llama.cpp's gguf-py NumPy dequantizers, compared bit for bit (NaN matches any
// NaN: NumPy and wick may carry different payloads); plus hand-worked blocks here.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/quant.hpp"
#include "test_util.hpp"
#include "wick/gguf.hpp"

using namespace wick;
using namespace wick::quant;
using nlohmann::json;

using wick::test::from_hex;

namespace {

const json& fixture() {
  static json j = wick::test::load_json_fixture("quant.json");
  return j;
}

std::vector<uint32_t> f32_bits_from_hex(const std::string& h) {
  std::vector<uint8_t> b = from_hex(h);
  std::vector<uint32_t> out(b.size() / 4);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint32_t(b[4 * i]) | (uint32_t(b[4 * i + 1]) << 8) | (uint32_t(b[4 * i + 2]) << 16) |
             (uint32_t(b[4 * i + 3]) << 24);
  return out;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool is_nan_bits(uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0; }

// Counts elements whose bits differ (NaN == NaN); reports the first few.
size_t mismatches(const std::vector<float>& got, const std::vector<uint32_t>& want, const std::string& what) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    uint32_t g = bits_of(got[i]);
    if (g == want[i] || (is_nan_bits(g) && is_nan_bits(want[i]))) continue;
    if (bad++ < 4)
      ADD_FAILURE() << what << " element " << i << ": got bits 0x" << std::hex << g << " want 0x" << want[i];
  }
  return bad;
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

TEST(Quant, TableMatchesGgufPySizes) {
  size_t covered = 0;
  for (const auto& [name, t] : fixture()["types"].items()) {
    const GGMLTypeInfo* info = ggml_type_info(t["id"].get<uint32_t>());
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(std::string(info->name), name);
    EXPECT_EQ(info->block_elems, t["block_elems"].get<uint32_t>()) << name;
    EXPECT_EQ(info->block_bytes, t["block_bytes"].get<uint32_t>()) << name;
    EXPECT_TRUE(info->dequant) << name;
    ++covered;
  }
  // Every type the table says it decodes has fixture cases.
  for (const auto& info : kGGMLTypes)
    if (info.dequant) EXPECT_TRUE(fixture()["types"].contains(info.name)) << info.name << " has no fixture";
  EXPECT_EQ(covered, 15u);
  // Ids ggml leaves unassigned (4, 5: the removed Q4_2/Q4_3; 31) are unknown.
  EXPECT_EQ(ggml_type_info(4u), nullptr);
  EXPECT_EQ(ggml_type_info(31u), nullptr);
  EXPECT_EQ(ggml_type_info(GGMLType::Q6_K)->block_bytes, 210u);  // ggml's block_q6_K: 128 + 64 + 16 + 2
}

TEST(Quant, EveryBlockBitIdenticalToGgufPy) {
  for (const auto& [name, t] : fixture()["types"].items()) {
    GGMLType type = static_cast<GGMLType>(t["id"].get<uint32_t>());
    const size_t be = t["block_elems"], bb = t["block_bytes"];
    std::vector<uint8_t> all;
    std::vector<uint32_t> all_want;
    for (const auto& c : t["cases"]) {
      std::vector<uint8_t> b = from_hex(c["bytes"]);
      std::vector<uint32_t> want = f32_bits_from_hex(c["f32"]);
      ASSERT_EQ(b.size(), bb) << name;
      ASSERT_EQ(want.size(), be) << name;
      size_t nans = 0;
      for (uint32_t w : want) nans += is_nan_bits(w);
      EXPECT_EQ(nans, c["nan_count"].get<size_t>()) << name << " fixture decode";
      std::vector<float> got(be, -1.0f);
      ASSERT_TRUE(dequantize_block(type, b.data(), got.data())) << name;
      EXPECT_EQ(mismatches(got, want, name + " " + c["name"].get<std::string>()), 0u);
      all.insert(all.end(), b.begin(), b.end());
      all_want.insert(all_want.end(), want.begin(), want.end());
    }
    // The CPU entry over all of a type's blocks at once.
    std::vector<float> got(all_want.size(), -1.0f);
    cpu::dequantize_to_f32(type, all.data(), all.size(), got.data(), got.size());
    EXPECT_EQ(mismatches(got, all_want, name + " dequantize_to_f32"), 0u);
  }
}

TEST(Quant, ManyBlocksSplitOverThreadsMatchOneBlockAtATime) {
  // 3000 blocks: many pool chunks, one partial chunk at the end.
  for (const char* name : {"Q4_K", "Q8_0", "MXFP4"}) {
    const json& t = fixture()["types"][name];
    GGMLType type = static_cast<GGMLType>(t["id"].get<uint32_t>());
    const size_t be = t["block_elems"], bb = t["block_bytes"], reps = 3000;
    const json& cases = t["cases"];
    std::vector<uint8_t> all;
    std::vector<uint32_t> want;
    for (size_t r = 0; r < reps; ++r) {  // the fixture's blocks in turn, so a misplaced block shows
      std::vector<uint8_t> b = from_hex(cases[r % cases.size()]["bytes"]);
      std::vector<uint32_t> w = f32_bits_from_hex(cases[r % cases.size()]["f32"]);
      ASSERT_EQ(b.size(), bb);
      all.insert(all.end(), b.begin(), b.end());
      want.insert(want.end(), w.begin(), w.end());
    }
    std::vector<float> got(be * reps, -1.0f);
    cpu::dequantize_to_f32(type, all.data(), all.size(), got.data(), got.size());
    EXPECT_EQ(mismatches(got, want, std::string(name) + " x3000"), 0u);
  }
}

TEST(Quant, HandWorkedBlocks) {
  // Q4_0: d = 1.0 (f16 0x3C00); byte j holds element j (low nibble) and j + 16 (high): 0x10 gives
  // 0 - 8 = -8 and 1 - 8 = -7.
  std::vector<uint8_t> q40(18, 0x10);
  q40[0] = 0x00;
  q40[1] = 0x3C;
  float out[32];
  ASSERT_TRUE(dequantize_block(GGMLType::Q4_0, q40.data(), out));
  EXPECT_EQ(out[0], -8.0f);
  EXPECT_EQ(out[15], -8.0f);
  EXPECT_EQ(out[16], -7.0f);
  EXPECT_EQ(out[31], -7.0f);
  // Q8_0: d = 0.5 (0x3800), q = -128 and 127.
  std::vector<uint8_t> q80(34, 0);
  q80[1] = 0x38;
  q80[2] = 0x80;
  q80[3] = 0x7F;
  ASSERT_TRUE(dequantize_block(GGMLType::Q8_0, q80.data(), out));
  EXPECT_EQ(out[0], -64.0f);
  EXPECT_EQ(out[1], 63.5f);
  EXPECT_EQ(out[2], 0.0f);
  // MXFP4: e8m0 128 is the scale 2^(128-127) = 2; fp4 nibble 7 is 6.0 -> 12, nibble 9 is -0.5 -> -1,
  // nibble 0 is 0.
  std::vector<uint8_t> mx(17, 0);
  mx[0] = 128;
  mx[1] = 0x97;  // element 0: nibble 7, element 16: nibble 9
  ASSERT_TRUE(dequantize_block(GGMLType::MXFP4, mx.data(), out));
  EXPECT_EQ(out[0], 12.0f);
  EXPECT_EQ(out[16], -1.0f);
  EXPECT_EQ(out[1], 0.0f);
  // A type the decoder does not know returns false and writes nothing.
  out[0] = 7.0f;
  EXPECT_FALSE(dequantize_block(GGMLType::IQ2_XXS, q40.data(), out));
  EXPECT_EQ(out[0], 7.0f);
}

TEST(Quant, Errors) {
  std::vector<uint8_t> bytes(34 * 2, 0);
  std::vector<float> out(64);
  Error e = error_of([&] { cpu::dequantize_to_f32(GGMLType::Q8_0, bytes.data(), bytes.size(), out.data(), 63); });
  EXPECT_EQ(e.kind(), ErrorKind::Shape) << e.what();
  EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();

  e = error_of([&] { cpu::dequantize_to_f32(GGMLType::Q8_0, bytes.data(), 67, out.data(), 64); });
  EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
  EXPECT_NE(std::string(e.what()).find("needs 68 bytes"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("got 67"), std::string::npos) << e.what();

  e = error_of([&] { cpu::dequantize_to_f32(GGMLType::IQ2_XXS, bytes.data(), 66, out.data(), 256); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();

  e = error_of([&] { cpu::dequantize_to_f32(static_cast<GGMLType>(5), bytes.data(), bytes.size(), out.data(), 64); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  EXPECT_NE(std::string(e.what()).find("unknown ggml type id 5"), std::string::npos) << e.what();

  // Zero elements of zero bytes is a valid empty tensor.
  EXPECT_NO_THROW(cpu::dequantize_to_f32(GGMLType::Q4_K, nullptr, 0, nullptr, 0));
}

TEST(Quant, TableAgreesWithTheGgufReader) {
  // The GGUF reader (include/wick/gguf.hpp) keeps its own ids and sizes for validating files; the
  // decoder's table must name the same layout for every type both know.
  for (const auto& info : kGGMLTypes) {
    if (!info.dequant) continue;
    GGMLType pub = static_cast<GGMLType>(static_cast<uint32_t>(info.type));
    EXPECT_EQ(std::string(ggml_type_name(pub)), info.name);
    EXPECT_EQ(ggml_block_size(pub), info.block_elems) << info.name;
    EXPECT_EQ(ggml_type_size(pub), info.block_bytes) << info.name;
    EXPECT_TRUE(ggml_is_quantized(pub)) << info.name;
  }
}

TEST(Quant, UnalignedBytesAndNoWritePastTheEnd) {
  // GGUF tensors start at general.alignment, but a caller may hand any byte offset: every field is
  // read byte by byte. The output past n_elems stays untouched.
  for (const char* name : {"Q4_1", "Q5_K", "Q8_K", "IQ4_XS"}) {
    const json& t = fixture()["types"][name];
    GGMLType type = static_cast<GGMLType>(t["id"].get<uint32_t>());
    std::vector<uint8_t> b = from_hex(t["cases"][0]["bytes"]);
    std::vector<uint32_t> want = f32_bits_from_hex(t["cases"][0]["f32"]);
    std::vector<uint8_t> shifted(b.size() + 3, 0xAB);
    std::memcpy(shifted.data() + 3, b.data(), b.size());
    std::vector<float> got(want.size() + 1, 42.0f);
    cpu::dequantize_to_f32(type, shifted.data() + 3, b.size(), got.data(), want.size());
    EXPECT_EQ(got.back(), 42.0f) << name;
    got.pop_back();
    EXPECT_EQ(mismatches(got, want, std::string(name) + " unaligned"), 0u);
  }
}

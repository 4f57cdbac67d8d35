// GGUF reader: a file written by llama.cpp's gguf-py (tests/fixtures/gen_gguf.py, expected values
// from gguf-py's GGUFReader in small.json) and hand-built malformed files, each Error(Io).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.hpp"
#include "wick/gguf.hpp"

using namespace wick;
namespace fs = std::filesystem;
using wick::test::read_bytes;
using wick::test::write_bytes;

namespace {

// Little-endian byte builder for hand-made files.
struct B {
  std::string s;
  template <class T>
  B& put(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  B& u32(uint32_t v) { return put(v); }
  B& u64(uint64_t v) { return put(v); }
  B& str(const std::string& v) {
    u64(v.size());
    s += v;
    return *this;
  }
  B& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    s += "GGUF";
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  B& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (auto d : dims) u64(d);
    return u32(type).u64(offset);
  }
  B& pad(size_t align = 32) {
    s.append((align - s.size() % align) % align, '\0');
    return *this;
  }
  B& zeros(size_t n) {
    s.append(n, '\0');
    return *this;
  }
};

// Opening `bytes` is Error(Io) whose message holds `needle`.
void expect_io(const std::string& bytes, const std::string& needle) {
  const std::string path = wick::test::tmp_path("bad.gguf");
  write_bytes(path, bytes);
  try {
    GGUFFile::open(path);
    ADD_FAILURE() << "opened without error; expected Io with '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte offset"), std::string::npos) << e.what();
  }
}

double num(const nlohmann::json& j) { return j.is_string() ? std::stod(j.get<std::string>()) : j.get<double>(); }

void check_value(const GGUFValue& v, const nlohmann::json& want, uint32_t type, const std::string& key) {
  ASSERT_EQ(uint32_t(v.type), type) << key;
  switch (v.type) {
    case GGUFType::U8:
    case GGUFType::U16:
    case GGUFType::U32:
    case GGUFType::U64:
      EXPECT_EQ(v.as_u64(), want.get<uint64_t>()) << key;
      break;
    case GGUFType::I8:
    case GGUFType::I16:
    case GGUFType::I32:
    case GGUFType::I64:
      EXPECT_EQ(v.as_i64(), want.get<int64_t>()) << key;
      break;
    case GGUFType::F32:
    case GGUFType::F64:
      EXPECT_EQ(v.as_f64(), num(want)) << key;
      break;
    case GGUFType::Bool:
      EXPECT_EQ(v.as_bool(), want.get<bool>()) << key;
      break;
    case GGUFType::String:
      EXPECT_EQ(v.as_string(), want.get<std::string>()) << key;
      break;
    case GGUFType::Array:
      ASSERT_EQ(v.as_array().size(), want.size()) << key;
      break;
  }
}

}  // namespace

TEST(Gguf, ReadsGgufPyFile) {
  const auto want = wick::test::load_json_fixture("gguf/small.json");
  const auto f = GGUFFile::open(wick::test::fixture_path("gguf/small.gguf"));
  EXPECT_EQ(f.version(), want["version"].get<uint32_t>());
  EXPECT_EQ(f.alignment(), want["alignment"].get<size_t>());
  EXPECT_EQ(f.data_offset(), want["data_offset"].get<size_t>());
  ASSERT_EQ(f.metadata().size(), want["metadata"].size());
  for (size_t k = 0; k < f.metadata().size(); ++k) {
    const auto& w = want["metadata"][k];
    const auto& [key, v] = f.metadata()[k];
    EXPECT_EQ(key, w["key"].get<std::string>());
    check_value(v, w["value"], w["type"].get<uint32_t>(), key);
    if (v.type == GGUFType::Array) {
      EXPECT_EQ(uint32_t(v.elem_type), w["elem_type"].get<uint32_t>()) << key;
      for (size_t e = 0; e < v.array.size(); ++e) {
        if (v.elem_type == GGUFType::Array) {
          const auto& inner = v.array[e];
          EXPECT_EQ(uint32_t(inner.elem_type), w["inner_elem_type"].get<uint32_t>()) << key;
          ASSERT_EQ(inner.array.size(), w["value"][e].size()) << key;
          for (size_t i = 0; i < inner.array.size(); ++i)
            check_value(inner.array[i], w["value"][e][i], w["inner_elem_type"].get<uint32_t>(), key);
        } else {
          check_value(v.array[e], w["value"][e], uint32_t(v.elem_type), key);
        }
      }
    }
  }
  ASSERT_NE(f.find("t.string"), nullptr);
  EXPECT_EQ(f.find("t.string")->as_string(), "h\xc3\xa9llo gguf");
  EXPECT_EQ(f.find("no.such.key"), nullptr);
  EXPECT_EQ(f.find("t.u8")->as_u64(), 200u);  // hand check beside the JSON
  EXPECT_THROW(f.find("t.u8")->as_string(), Error);

  ASSERT_EQ(f.tensors().size(), want["tensors"].size());
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const auto& w = want["tensors"][k];
    const auto& t = f.tensors()[k];
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(t.dims, w["dims"].get<std::vector<uint64_t>>()) << t.name;
    EXPECT_EQ(uint32_t(t.type), w["type"].get<uint32_t>()) << t.name;
    EXPECT_EQ(t.offset, w["offset"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.nbytes, w["nbytes"].get<size_t>()) << t.name;
    auto [p, n] = f.raw(t.name);
    std::string hex;
    char buf[3];
    for (size_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%02x", p[i]);
      hex += buf;
    }
    EXPECT_EQ(hex, w["raw_hex"].get<std::string>()) << t.name;
    if (w.contains("values")) {
      Tensor x = f.load(t.name);
      EXPECT_EQ(x.shape(), t.shape());
      std::vector<double> vals;
      for (const auto& s : w["values"]) vals.push_back(num(s));
      EXPECT_TRUE(wick::test::all_close(x, vals, 0, 0)) << t.name;
    }
  }
  EXPECT_EQ(f.tensor("w.f32").shape(), (Shape{2, 3}));  // dims [3, 2] reversed
  EXPECT_EQ(f.load("w.f32").dtype(), DType::F32);
  EXPECT_EQ(f.load("w.f16").dtype(), DType::F16);
  EXPECT_EQ(ggml_type_name(f.tensor("w.q8_0").type), std::string("Q8_0"));
  EXPECT_EQ(f.tensor("w.q8_0").nbytes, 2u * 2 * 34);  // 2 rows x 2 blocks of 34 bytes
  try {
    f.load("w.q8_0");
    ADD_FAILURE() << "loaded a Q8_0 tensor";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.load("nope"), Error);
}

TEST(Gguf, BlockSizesMatchGgml) {
  EXPECT_EQ(ggml_type_size(GGMLType::Q4_0), 18u);
  EXPECT_EQ(ggml_type_size(GGMLType::Q4_K), 144u);
  EXPECT_EQ(ggml_block_size(GGMLType::Q4_K), 256u);
  EXPECT_EQ(ggml_type_size(GGMLType::Q6_K), 210u);
  EXPECT_EQ(ggml_type_size(GGMLType::Q8_K), 292u);
  EXPECT_EQ(ggml_type_size(GGMLType::IQ4_XS), 136u);
  EXPECT_EQ(ggml_type_size(GGMLType::MXFP4), 17u);
  EXPECT_TRUE(ggml_is_quantized(GGMLType::Q2_K));
  EXPECT_FALSE(ggml_is_quantized(GGMLType::BF16));
}

TEST(Gguf, MinimalValidFileAndBf16) {
  // one BF16 [2] tensor holding 1.0 and -2.0 (0x3f80, 0xc000), no metadata
  B b;
  b.header(1, 0).tensor("x", {2}, 30, 0).pad();
  b.put<uint16_t>(0x3f80).put<uint16_t>(0xc000);
  const std::string path = wick::test::tmp_path("ok.gguf");
  write_bytes(path, b.s);
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 64u);
  EXPECT_TRUE(wick::test::all_close(f.load("x"), {1.0, -2.0}, 0, 0));
  // version 2 files read the same
  b.s[4] = 2;
  write_bytes(path, b.s);
  EXPECT_EQ(GGUFFile::open(path).version(), 2u);
}

TEST(GgufMalformed, Truncated) {
  const std::string good = read_bytes(wick::test::fixture_path("gguf/small.gguf"));
  ASSERT_GT(good.size(), 100u);
  // gguf-py pads the last tensor to the alignment; the data needed ends at 704 + 128 + 136 = 968
  // (data section start + last tensor's offset + its 2 x 2 Q8_0 blocks of 34 bytes)
  const size_t need = 968;
  write_bytes(wick::test::tmp_path("cut.gguf"), good.substr(0, need));
  EXPECT_NO_THROW(GGUFFile::open(wick::test::tmp_path("cut.gguf")));
  // every shorter prefix is refused, none crashes
  for (size_t n = 0; n < need; n += 7) {
    const std::string path = wick::test::tmp_path("cut.gguf");
    write_bytes(path, good.substr(0, n));
    EXPECT_THROW(GGUFFile::open(path), Error) << n;
  }
  expect_io(good.substr(0, 10), "truncated");
  expect_io(good.substr(0, need - 1), "past the end");
}
TEST(GgufMalformed, BadMagic) { expect_io(B().u32(0x46554748).u32(3).u64(0).u64(0).s, "bad magic"); }
TEST(GgufMalformed, Version1) { expect_io(B().header(0, 0, 1).s, "version 1"); }
TEST(GgufMalformed, BigEndian) { expect_io(B().header(0, 0, 0x03000000).s, "big-endian"); }
TEST(GgufMalformed, StringPastEnd) { expect_io(B().header(0, 1).str("k").u32(8).u64(1000).s + "abc", "length 1000"); }
TEST(GgufMalformed, KeyPastEnd) { expect_io(B().header(0, 1).u64(~0ull).s + "abcdefghijklmn", "metadata key #0"); }
TEST(GgufMalformed, ArrayCountOverflows) {
  expect_io(B().header(0, 1).str("k").u32(9).u32(10).u64(~0ull >> 2).zeros(64).s, "elements of u64");
}
TEST(GgufMalformed, NestingTooDeep) {
  B b;
  b.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 20; ++i) b.u32(9).u64(1);  // array of array of ...
  b.u32(0).u64(0);
  expect_io(b.s, "deeper than 8");
}
TEST(GgufMalformed, UnknownValueType) {
  expect_io(B().header(0, 1).str("k").u32(13).u64(0).s, "unknown value type 13");
}
TEST(GgufMalformed, UnknownElementType) {
  expect_io(B().header(0, 1).str("k").u32(9).u32(77).u64(0).s, "unknown array element type 77");
}
TEST(GgufMalformed, BoolNotZeroOne) { expect_io(B().header(0, 1).str("k").u32(7).put<uint8_t>(2).zeros(16).s, "bool"); }
TEST(GgufMalformed, BoolInArrayNotZeroOne) {
  expect_io(B().header(0, 1).str("k").u32(9).u32(7).u64(3).put<uint8_t>(1).put<uint8_t>(0).put<uint8_t>(5).zeros(16).s,
            "metadata 'k'[2] is a bool holding 5");
}
TEST(GgufMalformed, DuplicateKey) {
  expect_io(B().header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).s, "duplicate metadata key 'k'");
}
TEST(GgufMalformed, AlignmentNotPowerOfTwo) {
  expect_io(B().header(0, 1).str("general.alignment").u32(4).u32(48).s, "not a power of two");
  expect_io(B().header(0, 1).str("general.alignment").u32(4).u32(0).s, "not a power of two");
  expect_io(B().header(0, 1).str("general.alignment").u32(10).u64(32).s, "must be u32");
}
TEST(GgufMalformed, TensorCountTooLarge) { expect_io(B().header(1ull << 40, 0).zeros(64).s, "tensor count"); }
TEST(GgufMalformed, UnknownGGMLType) {
  B b;
  b.header(1, 0).tensor("x", {32}, 16, 0).pad().zeros(64);                   // 16 = IQ2_XXS, not supported
  expect_io(b.s, "ggml type IQ2_XXS (id 16), which wick does not support");  // names itself
  expect_io(b.s, "Q4_K=12");                                                 // the message lists the supported ones
  B c;
  c.header(1, 0).tensor("x", {32}, 5, 0).pad().zeros(64);  // 5: an id ggml never assigned (Q4_3, removed)
  expect_io(c.s, "unknown ggml type id 5");
}
TEST(GgufMalformed, TooManyDims) {
  expect_io(B().header(1, 0).tensor("x", {1, 1, 1, 1, 1}, 0, 0).pad().zeros(8).s, "at most 4");
}
TEST(GgufMalformed, ElementCountOverflows) {
  expect_io(B().header(1, 0).tensor("x", {1ull << 32, 1ull << 32}, 0, 0).pad().zeros(8).s, "overflow");
  expect_io(B().header(1, 0).tensor("x", {~0ull}, 0, 0).pad().zeros(8).s, "overflow");
}
TEST(GgufMalformed, RowNotMultipleOfBlock) {
  expect_io(B().header(1, 0).tensor("x", {33}, 8, 0).pad().zeros(64).s, "not a multiple of its block size 32");
}
TEST(GgufMalformed, OffsetMisaligned) {
  expect_io(B().header(1, 0).tensor("x", {1}, 0, 4).pad().zeros(64).s, "alignment 32");
}
TEST(GgufMalformed, DataPastEnd) {
  expect_io(B().header(1, 0).tensor("x", {100}, 0, 0).pad().zeros(64).s, "runs past the end");
  expect_io(B().header(1, 0).tensor("x", {1}, 0, 1ull << 62).pad().zeros(64).s, "runs past the end");
  expect_io(B().header(1, 0).tensor("x", {1}, 0, 0).s, "data section starts");  // no padding, no data
}
TEST(GgufMalformed, OverlappingTensors) {
  expect_io(B().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad().zeros(128).s, "overlaps tensor 'a'");
}
TEST(GgufMalformed, DuplicateTensorName) {
  expect_io(B().header(2, 0).tensor("a", {1}, 0, 0).tensor("a", {1}, 0, 32).pad().zeros(64).s,
            "duplicate tensor name 'a'");
}
TEST(GgufMalformed, MissingFileIsIo) {
  try {
    GGUFFile::open(wick::test::tmp_path("does_not_exist.gguf"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
  }
}

// Writer: the file gguf-py wrote, re-written by wick from what wick read, is the same bytes.
// The peak resident memory of this process since the last reset_peak(), in bytes (Linux VmHWM).
size_t peak_rss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return size_t(std::stoull(line.substr(6))) * 1024;
  return 0;
}
bool reset_peak() {  // "5" resets VmHWM to the current RSS (Linux 4.0 on)
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return bool(out);
}

// Metadata of any kind costs a small multiple of the file's size: 20 MB arrays of u8 and of bool (which
// took about 110 bytes of memory per element as one GGUFValue each), of short strings and of one-element
// arrays open in under 4x the file size of peak memory, the mapping's pages included.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(Gguf, ArrayMetadataMemoryInProportionToTheFile) {
  if (!reset_peak() || peak_rss() == 0) GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here";
  const size_t n = 20u << 20;
  const fs::path path = fs::temp_directory_path() / ("wick_gguf_big_array_" + std::to_string(::getpid()) + ".gguf");
  for (uint32_t elem : {0u /* u8 */, 7u /* bool */, 8u /* string */, 9u /* array */}) {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      B h;
      h.header(0, 1).str("big").u32(9).u32(elem);
      if (elem == 8 || elem == 9) {
        h.u64(n / 13);
        f << h.s;
        B one;
        if (elem == 8) one.str(std::string(5, 'x'));       // 13 bytes each
        if (elem == 9) one.u32(0).u64(1).put<uint8_t>(3);  // [3] as u8: 13 bytes each
        for (size_t k = 0; k < n / 13; ++k) f << one.s;
      } else {
        h.u64(n);
        f << h.s << std::string(n, char(elem == 7 ? 1 : 200));
      }
    }
    const size_t file_size = fs::file_size(path);
    ASSERT_TRUE(reset_peak());
    const size_t before = peak_rss();
    {
      GGUFFile f = GGUFFile::open(path.string());
      const GGUFValue* v = f.find("big");
      ASSERT_NE(v, nullptr);
      ASSERT_EQ(v->elem_type, GGUFType(elem));
      if (elem == 8) {
        ASSERT_EQ(v->as_array().size(), n / 13);
        EXPECT_EQ(v->as_array().string_at(n / 13 - 1), "xxxxx");
        EXPECT_EQ(v->as_array()[7].as_string(), "xxxxx");
      } else if (elem == 9) {
        ASSERT_EQ(v->as_array().size(), n / 13);
        const GGUFValue last = v->as_array().back();
        ASSERT_EQ(last.as_array().size(), 1u);
        EXPECT_EQ(last.as_array()[0].as_u64(), 3u);
      } else {
        ASSERT_EQ(v->as_array().size(), n);
        if (elem == 7) EXPECT_TRUE(v->as_array().back().as_bool());
        if (elem == 0) EXPECT_EQ(v->as_array()[n / 2].as_u64(), 200u);
      }
    }
    const size_t grew = peak_rss() - before;
    if (!kAddressSanitizer)
      EXPECT_LT(grew, 4 * file_size) << "element type " << elem << ": a " << file_size << "-byte file took " << grew
                                     << " bytes at peak";
  }
  fs::remove(path);
  // ASan keeps freed blocks in quarantine and pads each allocation, so its peak RSS measures the
  // sanitizer (405 MB for the nested arrays' file), not the loader: the contents were checked above.
  if (kAddressSanitizer) GTEST_SKIP() << "peak memory bound not measured under AddressSanitizer";
}

TEST(GgufWrite, ByteIdenticalToGgufPy) {
  const std::string src = wick::test::fixture_path("gguf/small.gguf");
  const auto f = GGUFFile::open(src);
  std::vector<std::pair<std::string, Tensor>> tensors{{"w.f32", f.load("w.f32")}, {"w.f16", f.load("w.f16")}};
  auto [p, n] = f.raw("w.q8_0");
  std::vector<GGUFRawTensor> raw{{"w.q8_0", GGMLType::Q8_0, f.tensor("w.q8_0").dims, {p, p + n}}};
  const std::string out = wick::test::tmp_path("out.gguf");
  save_gguf(out, f.metadata(), tensors, raw);
  const std::string want = read_bytes(src), got = read_bytes(out);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "first difference at byte "
                           << std::distance(got.begin(), std::mismatch(got.begin(), got.end(), want.begin()).first);
}

TEST(GgufWrite, RoundTrip) {
  // a transposed (strided) f32 view, bf16, i32, a zero-size tensor and nested metadata
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [[1,4],[2,5],[3,6]]
  Tensor b = Tensor::from_vector(std::vector<float>{0.5f, -3.0f}, {2}).to_dtype(DType::BF16);
  Tensor c = Tensor::from_vector(std::vector<int32_t>{7, -8, 9}, {3});
  Tensor z = Tensor::zeros({0, 4}, DType::F32);
  std::vector<std::pair<std::string, GGUFValue>> meta{
      {"general.alignment", GGUFValue::of_u32(16)},
      {"k.s", GGUFValue::of_string("x y")},
      {"k.b", GGUFValue::of_bool(false)},
      {"k.i8", GGUFValue::of_i8(-5)},
      {"k.f", GGUFValue::of_f32(0.25f)},
      {"k.nest", GGUFValue::of_array(GGUFType::Array, {GGUFValue::of_array(GGUFType::U16, {GGUFValue::of_u16(3)}),
                                                       GGUFValue::of_array(GGUFType::String, {})})},
  };
  const std::string path = wick::test::tmp_path("rt.gguf");
  save_gguf(path, meta, {{"a", a}, {"b", b}, {"c", c}, {"z", z}});
  const auto f = GGUFFile::open(path);
  EXPECT_EQ(f.alignment(), 16u);
  EXPECT_EQ(f.data_offset() % 16, 0u);
  EXPECT_EQ(f.find("k.s")->as_string(), "x y");
  EXPECT_FALSE(f.find("k.b")->as_bool());
  EXPECT_EQ(f.find("k.i8")->as_i64(), -5);
  EXPECT_EQ(f.find("k.f")->as_f64(), 0.25);
  const auto& nest = f.find("k.nest")->as_array();
  ASSERT_EQ(nest.size(), 2u);
  EXPECT_EQ(nest[0].as_array().at(0).as_u64(), 3u);
  EXPECT_EQ(nest[1].elem_type, GGUFType::String);
  EXPECT_TRUE(nest[1].as_array().empty());
  EXPECT_EQ(f.tensor("a").dims, (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(wick::test::all_close(f.load("a"), {1, 4, 2, 5, 3, 6}, 0, 0));
  EXPECT_EQ(f.load("b").dtype(), DType::BF16);
  EXPECT_TRUE(wick::test::all_close(f.load("b"), {0.5, -3.0}, 0, 0));
  EXPECT_TRUE(wick::test::all_close(f.load("c"), {7, -8, 9}, 0, 0));
  EXPECT_EQ(f.load("z").shape(), (Shape{0, 4}));
  for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % 16, 0u) << t.name;
}

TEST(GgufWrite, RejectsBadInput) {
  const std::string path = wick::test::tmp_path("bad.gguf");
  Tensor u = Tensor::zeros({2}, DType::U8);
  try {
    save_gguf(path, {}, {{"u", u}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DType);
    EXPECT_NE(std::string(e.what()).find("'u'"), std::string::npos) << e.what();
  }
  try {
    save_gguf(path, {}, {}, {{"q", GGMLType::Q4_0, {32}, std::vector<unsigned char>(17)}});  // needs 18
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Argument);
    EXPECT_NE(std::string(e.what()).find("18 bytes, but holds 17"), std::string::npos) << e.what();
  }
  Tensor x = Tensor::zeros({1}, DType::F32);
  EXPECT_THROW(save_gguf(path, {}, {{"x", x}, {"x", x}}), Error);
  EXPECT_THROW(save_gguf(path, {{"k", GGUFValue::of_u8(1)}, {"k", GGUFValue::of_u8(2)}}, {}), Error);
  EXPECT_THROW(save_gguf(path, {{"general.alignment", GGUFValue::of_u32(24)}}, {}), Error);
  EXPECT_THROW(save_gguf(path, {{"k", GGUFValue::of_array(GGUFType::U8, {GGUFValue::of_i8(1)})}}, {}), Error);
}

namespace {

std::vector<uint8_t> hex_bytes(const std::string& h) {
  std::vector<uint8_t> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoul(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

}  // namespace

// gguf-py wrote one tensor per block type it decodes (gen_gguf.py: quantized.gguf); wick loads each
// with load_quantized and decodes it to the bits gguf-py's dequantize gives (quantized.json).
TEST(Gguf, QuantizedTensorsFromGgufPyLoadAndDequantize) {
  const auto want = wick::test::load_json_fixture("gguf/quantized.json");
  const auto f = GGUFFile::open(wick::test::fixture_path("gguf/quantized.gguf"));
  ASSERT_EQ(f.tensors().size(), want["tensors"].size());
  EXPECT_EQ(f.find("t.note")->as_string(), "one tensor per block type");
  size_t quantized = 0;
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const auto& w = want["tensors"][k];
    const auto& t = f.tensors()[k];
    ASSERT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(uint32_t(t.type), w["type"].get<uint32_t>()) << t.name;
    EXPECT_EQ(t.shape(), w["shape"].get<Shape>()) << t.name;
    EXPECT_EQ(t.nbytes, w["nbytes"].get<size_t>()) << t.name;
    const std::vector<uint8_t> raw = hex_bytes(w["raw_hex"]);
    const std::vector<uint8_t> f32 = hex_bytes(w["f32_hex"]);
    Tensor x;
    if (ggml_is_quantized(t.type)) {
      const QTensor q = f.load_quantized(t.name);
      EXPECT_EQ(q.type(), t.type);
      EXPECT_EQ(q.shape(), t.shape());
      EXPECT_EQ(q.to_bytes(), raw) << t.name;
      x = q.dequantize();
      ++quantized;
    } else {
      x = f.load(t.name);
    }
    ASSERT_EQ(x.numel() * 4, f32.size()) << t.name;
    std::vector<uint8_t> got(f32.size());
    x.copy_to_host(got.data());
    // bit-identical, except that any NaN matches any NaN (the extreme Q8_0 blocks have NaN scales)
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); i += 4) {
      uint32_t g, e;
      std::memcpy(&g, &got[i], 4);
      std::memcpy(&e, &f32[i], 4);
      const bool both_nan = (g & 0x7FFFFFFFu) > 0x7F800000u && (e & 0x7FFFFFFFu) > 0x7F800000u;
      if (g != e && !both_nan && bad++ < 3) ADD_FAILURE() << t.name << " element " << i / 4;
    }
  }
  EXPECT_EQ(quantized, 15u);  // Q4_0..Q8_0, MXFP4, IQ4_NL, Q2_K..Q6_K, IQ4_XS, a 3-D Q8_0, extreme Q8_0
}

// Found by the fuzzer (tests/fuzz/RESULTS.md): a Q5_1 tensor of dims [0, 3] (3 rows of no
// elements) parsed, but embedding saw a table of 0 rows and refused id 2. Rows of no blocks are
// still rows.
TEST(GgufFuzzRegression, EmptyRowsKeepTheirCount) {
  B b;
  b.header(1, 0).tensor("e", {0, 3}, 7, 0).pad();  // 7 = Q5_1
  const std::string path = wick::test::tmp_path("empty_rows.gguf");
  write_bytes(path, b.s);
  const auto f = GGUFFile::open(path);
  const QTensor q = f.load_quantized("e");
  EXPECT_EQ(q.shape(), (Shape{3, 0}));
  EXPECT_EQ(q.nbytes(), 0u);
  EXPECT_EQ(q.dequantize().shape(), (Shape{3, 0}));
  EXPECT_EQ(q.embedding(Tensor::from_vector(std::vector<int64_t>{2}, {1})).shape(), (Shape{1, 0}));
  try {
    q.embedding(Tensor::from_vector(std::vector<int64_t>{3}, {1}));
    ADD_FAILURE() << "id 3 of a 3-row table";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
  }
  EXPECT_EQ(q.matmul_t(Tensor::zeros({2, 0}, DType::F32)).shape(), (Shape{2, 3}));
}

// Found by the fuzzer: dims [2^44 + 1, 0, 2^43] hold no elements, so the element count did not
// overflow and the file opened, but the non-zero dims' product (a stride) passes 2^63 and load()
// refused the shape. The reader now refuses it at open, naming the dimension.
TEST(GgufFuzzRegression, EmptyTensorWithHugeDims) {
  expect_io(B().header(1, 0).tensor("x", {(1ull << 44) + 1, 0, 1ull << 43}, 0, 0).pad().s,
            "dimensions overflow the element count at dimension 2");
  expect_io(B().header(1, 0).tensor("q", {0, 1ull << 32, 1ull << 32}, 2, 0).pad().s, "overflow");  // Q4_0
  // an empty tensor whose other dims fit is fine
  B ok;
  ok.header(1, 0).tensor("e", {1ull << 20, 0, 1ull << 20}, 0, 0).pad();
  const std::string path = wick::test::tmp_path("empty_ok.gguf");
  write_bytes(path, ok.s);
  EXPECT_EQ(GGUFFile::open(path).load("e").shape(), (Shape{1ull << 20, 0, 1ull << 20}));
}

// Found by the fuzzer's write-back check: save_gguf passed an empty tensor's null data() to
// memcpy (undefined behaviour, reported by UBSan in scripts/ci_sanitize.sh's run of this suite).
TEST(GgufFuzzRegression, EmptyRawTensorWritesAndReadsBack) {
  const std::string path = wick::test::tmp_path("empty_raw.gguf");
  save_gguf(path, {}, {},
            {{"e", GGMLType::Q4_0, {0, 3}, {}}, {"f", GGMLType::Q8_0, {32}, std::vector<unsigned char>(34, 1)}});
  const auto f = GGUFFile::open(path);
  EXPECT_EQ(f.tensor("e").nbytes, 0u);
  EXPECT_EQ(f.load_quantized("e").shape(), (Shape{3, 0}));
  EXPECT_EQ(f.tensor("f").offset, 0u);  // the empty tensor takes no room
  EXPECT_EQ(f.load_quantized("f").to_bytes(), std::vector<uint8_t>(34, 1));
  // the empty tensor shares its offset with the next one, in either order of the sort by offset
  save_gguf(path, {}, {},
            {{"f", GGMLType::Q8_0, {32}, std::vector<unsigned char>(34, 1)}, {"e", GGMLType::Q4_0, {0}, {}}});
  EXPECT_EQ(GGUFFile::open(path).tensor("e").offset, 64u);
  for (int order = 0; order < 2; ++order) {
    B b;
    b.header(2, 0);
    if (order == 0)
      b.tensor("e", {0}, 0, 0).tensor("x", {4}, 0, 0);
    else
      b.tensor("x", {4}, 0, 0).tensor("e", {0}, 0, 0);
    b.pad().zeros(16);
    write_bytes(path, b.s);
    EXPECT_NO_THROW(GGUFFile::open(path)) << order;
  }
}

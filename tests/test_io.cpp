// File formats: safetensors and .npy. Fixture values are listed by hand here and in
// tests/fixtures/gen_io.py (numpy wrote the .npy files; a small Python writer the .safetensors).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "test_util.hpp"
#include "wick/io.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::values;
namespace fs = std::filesystem;
using wick::test::read_bytes;
using wick::test::write_bytes;

namespace {

std::string io_fixture(const std::string& name) { return wick::test::fixture_path("io/" + name); }

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file: 8-byte length + header + data, written by hand.
std::string st_bytes(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

std::vector<uint8_t> raw(const Tensor& t) {
  std::vector<uint8_t> out(t.numel() * dtype_size(t.dtype()));
  t.copy_to_host(out.data());
  return out;
}

// f() must throw wick::Error of `kind` whose message names `path` (and `what`, when given).
void expect_error(const std::function<void()>& f, ErrorKind kind, const std::string& path, const char* what = nullptr) {
  try {
    f();
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), kind) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
    if (what) EXPECT_NE(msg.find(what), std::string::npos) << "message lacks '" << what << "': " << msg;
  }
}

void expect_st_io(const std::string& bytes, const char* what = nullptr) {
  std::string p = wick::test::tmp_path("bad.safetensors");
  write_bytes(p, bytes);
  expect_error([&] { SafeTensors::open(p); }, ErrorKind::Io, p, what);
  expect_error([&] { load_safetensors(p); }, ErrorKind::Io, p, what);
}

Tensor sample(DType d) {
  return Tensor::from_vector<double>({0, 1, 2, 3.5, 100, 7}, {2, 3}).to_dtype(d);
}

}  // namespace

// ---------------------------------------------------------------- safetensors

TEST(SafeTensors, RoundTripAllDTypes) {
  std::map<std::string, Tensor> in;
  for (DType d : kAllDTypes) in[std::string("t_") + dtype_name(d)] = sample(d);
  in["scalar"] = Tensor::from_vector<float>({-4.5f}, {});
  in["empty"] = Tensor::zeros({0, 3}, DType::I32);
  std::string p = wick::test::tmp_path("all.safetensors");
  save_safetensors(in, p);
  SafeTensors st = SafeTensors::open(p);
  EXPECT_EQ(st.names().size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(st.contains(name)) << name;
    EXPECT_EQ(st.dtype(name), t.dtype()) << name;
    EXPECT_EQ(st.shape(name), t.shape()) << name;
    Tensor got = st.load(name);
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_EQ(raw(got), raw(t)) << name;
  }
  auto all = load_safetensors(p);
  ASSERT_EQ(all.size(), in.size());
  EXPECT_EQ(all.at("scalar").item<float>(), -4.5f);
  EXPECT_EQ(all.at("t_i64").to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 100, 7}));
}

TEST(SafeTensors, ExactValuesSurviveEachDType) {
  // Values exactly representable in each type, checked against the literals.
  std::string p = wick::test::tmp_path("exact.safetensors");
  save_safetensors({{"i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX, -1}, {3})},
                    {"u32", Tensor::from_vector<uint32_t>({0xffffffffu, 5}, {2})},
                    {"bf16", Tensor::from_vector<bf16>({bf16::from_bits(0x7f80), bf16::from_bits(0x0001)}, {2})},
                    {"f8", Tensor::from_vector<f8e4m3>({f8e4m3::from_bits(0x7f), f8e4m3::from_bits(0x80)}, {2})},
                    {"f64", Tensor::from_vector<double>({5e-324, -1e300}, {2})}},
                   p);
  auto m = load_safetensors(p);
  EXPECT_EQ(m.at("i64").to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MAX, -1}));
  EXPECT_EQ(m.at("u32").to_vector<uint32_t>(), (std::vector<uint32_t>{0xffffffffu, 5}));
  auto b = m.at("bf16").to_vector<bf16>();
  EXPECT_EQ(b[0].bits, 0x7f80);
  EXPECT_EQ(b[1].bits, 0x0001);
  auto f8 = m.at("f8").to_vector<f8e4m3>();
  EXPECT_EQ(f8[0].bits, 0x7f);  // NaN bits kept
  EXPECT_EQ(f8[1].bits, 0x80);  // -0
  EXPECT_EQ(m.at("f64").to_vector<double>(), (std::vector<double>{5e-324, -1e300}));
}

TEST(SafeTensors, StridedTensorsSavedRowMajor) {
  Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  std::string p = wick::test::tmp_path("strided.safetensors");
  save_safetensors({{"t", base.t()},
                    {"narrow", base.narrow(1, 1, 2)},
                    {"bcast", Tensor::from_vector<float>({7, 8, 9}, {3}).broadcast_as({2, 3})},
                    {"offset", wick::test::as_offset(base)},
                    {"permuted", Tensor::arange(0, 24, 1, DType::I16).reshape({2, 3, 4}).permute({2, 0, 1})}},
                   p);
  auto m = load_safetensors(p);
  EXPECT_EQ(m.at("t").shape(), (Shape{3, 2}));
  EXPECT_EQ(m.at("t").to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(m.at("narrow").to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(m.at("bcast").to_vector<float>(), (std::vector<float>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(m.at("offset").to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // permute({2,0,1}) of arange(24) as [2,3,4]: element [k][i][j] = i*12 + j*4 + k.
  EXPECT_EQ(m.at("permuted").shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(m.at("permuted").to_vector<int16_t>(),
            (std::vector<int16_t>{0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));
}

TEST(SafeTensors, MetadataRoundTrip) {
  std::string p = wick::test::tmp_path("meta.safetensors");
  std::map<std::string, std::string> meta{{"format", "pt"}, {"unicode", "\xc3\xa9t\xc3\xa9"}, {"empty", ""}};
  save_safetensors({{"x", Tensor::ones({2}, DType::F32)}}, p, meta);
  EXPECT_EQ(SafeTensors::open(p).metadata(), meta);
  std::string q = wick::test::tmp_path("nometa.safetensors");
  save_safetensors({{"x", Tensor::ones({2}, DType::F32)}}, q);
  EXPECT_TRUE(SafeTensors::open(q).metadata().empty());
  EXPECT_EQ(read_bytes(q).find("__metadata__"), std::string::npos);
}

TEST(SafeTensors, WrittenLayoutMatchesTheFormat) {
  std::string p = wick::test::tmp_path("layout.safetensors");
  // Order: larger element types first, then names; the header padded with spaces to 8 bytes.
  save_safetensors({{"b", Tensor::from_vector<uint8_t>({9}, {1})},
                    {"a", Tensor::from_vector<uint8_t>({8, 7}, {2})},
                    {"z", Tensor::from_vector<double>({1.0}, {1})},
                    {"m", Tensor::from_vector<float>({2.0f}, {1})}},
                   p);
  std::string f = read_bytes(p);
  uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);
  ASSERT_LE(8 + n, f.size());
  EXPECT_EQ(n % 8, 0u);
  std::string header = f.substr(8, n);
  auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["z"]["data_offsets"], nlohmann::json::array({0, 8}));
  EXPECT_EQ(j["m"]["data_offsets"], nlohmann::json::array({8, 12}));
  EXPECT_EQ(j["a"]["data_offsets"], nlohmann::json::array({12, 14}));
  EXPECT_EQ(j["b"]["data_offsets"], nlohmann::json::array({14, 15}));
  EXPECT_EQ(j["z"]["dtype"], "F64");
  EXPECT_EQ(j["a"]["shape"], nlohmann::json::array({2}));
  size_t end = header.find_last_not_of(' ');
  EXPECT_EQ(header[end], '}');
  EXPECT_EQ(f.size(), 8 + n + 15);
  EXPECT_EQ(uint8_t(f[8 + n + 12]), 8);  // "a" = [8, 7]
  EXPECT_EQ(uint8_t(f[8 + n + 14]), 9);  // "b" = [9]
  double z;
  std::memcpy(&z, f.data() + 8 + n, 8);
  EXPECT_EQ(z, 1.0);
  EXPECT_EQ(SafeTensors::open(p).names(), (std::vector<std::string>{"z", "m", "a", "b"}));
}

TEST(SafeTensors, EmptyFileSet) {
  std::string p = wick::test::tmp_path("none.safetensors");
  save_safetensors({}, p);
  SafeTensors st = SafeTensors::open(p);
  EXPECT_TRUE(st.names().empty());
  EXPECT_TRUE(load_safetensors(p).empty());
  EXPECT_EQ(read_bytes(p), le64(8) + "{}      ");
}

TEST(SafeTensors, ReadsPythonWrittenFixture) {
  SafeTensors st = SafeTensors::open(io_fixture("mixed.safetensors"));
  EXPECT_EQ(st.names(), (std::vector<std::string>{"f32", "f64", "i64", "i32", "i16", "u32", "u8", "f16", "bf16", "f8",
                                                  "bool", "empty"}));
  EXPECT_EQ(st.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "written by gen_io.py"}}));
  Tensor f32 = st.load("f32");
  EXPECT_EQ(f32.shape(), (Shape{2, 3}));
  EXPECT_EQ(f32.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 0.125f, -7.5f}));
  Tensor f64 = st.load("f64");
  EXPECT_EQ(f64.shape(), Shape{});
  EXPECT_EQ(f64.item<double>(), 3.141592653589793);
  EXPECT_EQ(st.load("i64").to_vector<int64_t>(), (std::vector<int64_t>{-9007199254740993LL, 0, INT64_MAX}));
  EXPECT_EQ(st.load("i32").to_vector<int32_t>(), (std::vector<int32_t>{INT32_MIN, INT32_MAX, -1, 7}));
  EXPECT_EQ(st.load("i32").shape(), (Shape{2, 2}));
  EXPECT_EQ(st.load("i16").to_vector<int16_t>(), (std::vector<int16_t>{-32768, 32767, -5}));
  EXPECT_EQ(st.load("u32").to_vector<uint32_t>(), (std::vector<uint32_t>{4294967295u, 17}));
  EXPECT_EQ(st.load("u8").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 200, 255}));
  EXPECT_TRUE(all_close(st.load("f16"), {1.0, -2.5, 65504.0}, 0, 0));
  EXPECT_EQ(st.dtype("f16"), DType::F16);
  EXPECT_TRUE(all_close(st.load("bf16"), {1.0, -5.0, 3.140625}, 0, 0));
  EXPECT_EQ(st.dtype("bf16"), DType::BF16);
  EXPECT_TRUE(all_close(st.load("f8"), {1.0, 448.0, -0.5, 1.0 / 512}, 0, 0));
  EXPECT_EQ(st.dtype("f8"), DType::F8E4M3);
  EXPECT_EQ(st.dtype("bool"), DType::U8);
  EXPECT_EQ(st.load("bool").to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(st.load("empty").shape(), (Shape{0, 2}));
  EXPECT_EQ(st.load("empty").numel(), 0u);
}

TEST(SafeTensors, UnsupportedDTypeListedButNotLoadable) {
  std::string p = io_fixture("unsupported.safetensors");
  SafeTensors st = SafeTensors::open(p);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"i8", "f"}));
  EXPECT_EQ(st.shape("i8"), Shape{2});
  EXPECT_EQ(st.load("f").to_vector<float>(), std::vector<float>{2.0f});
  expect_error([&] { st.load("i8"); }, ErrorKind::DType, p, "I8");
  expect_error([&] { st.dtype("i8"); }, ErrorKind::DType, p, "I8");
  expect_error([&] { load_safetensors(p); }, ErrorKind::DType, p);
}

TEST(SafeTensors, UnknownNameIsArgumentError) {
  std::string p = io_fixture("mixed.safetensors");
  SafeTensors st = SafeTensors::open(p);
  EXPECT_FALSE(st.contains("nope"));
  expect_error([&] { st.load("nope"); }, ErrorKind::Argument, p, "nope");
  expect_error([&] { st.shape("nope"); }, ErrorKind::Argument, p);
}

TEST(SafeTensors, MappingOutlivesTheOriginalObjectAndTheFileName) {
  std::string p = wick::test::tmp_path("lazy.safetensors");
  save_safetensors({{"x", Tensor::from_vector<int32_t>({4, 5, 6}, {3})}}, p);
  std::optional<SafeTensors> copy;
  {
    SafeTensors st = SafeTensors::open(p);
    copy = st;
  }
  fs::remove(p);  // the mapping keeps the data reachable
  EXPECT_EQ(copy->load("x").to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 6}));
}

TEST(SafeTensors, SaveErrors) {
  std::string p = wick::test::tmp_path("nodir") + "/sub/x.safetensors";
  expect_error([&] { save_safetensors({{"x", Tensor::ones({1}, DType::F32)}}, p); }, ErrorKind::Io, p);
  std::string q = wick::test::tmp_path("x.safetensors");
  EXPECT_THROW(save_safetensors({{"x", Tensor()}}, q), Error);
  expect_error([&] { save_safetensors({{"__metadata__", Tensor::ones({1}, DType::F32)}}, q); }, ErrorKind::Argument,
               "__metadata__");
}

TEST(SafeTensors, OpenErrorsForMissingAndOddFiles) {
  std::string p = wick::test::tmp_path("missing.safetensors");
  expect_error([&] { SafeTensors::open(p); }, ErrorKind::Io, p);
  std::string dir = wick::test::tmp_path("adir");
  fs::create_directories(dir);
  expect_error([&] { SafeTensors::open(dir); }, ErrorKind::Io, dir);
}

TEST(SafeTensorsMalformed, TooSmallForLength) {
  expect_st_io("", "too small");
  expect_st_io(std::string("\x02\x00\x00", 3), "too small");
  expect_st_io(std::string(7, '\0'), "too small");
}

TEST(SafeTensorsMalformed, HeaderLengthPastEnd) {
  expect_st_io(le64(1000) + "{}", "past the end");
  expect_st_io(le64(3) + "{}", "past the end");
}

TEST(SafeTensorsMalformed, HeaderLengthHuge) {
  expect_st_io(le64(100'000'001) + "{}", "limit");
  expect_st_io(le64(~uint64_t(0)) + "{}", "limit");
}

TEST(SafeTensorsMalformed, BadJson) {
  expect_st_io(st_bytes("{\"a\": ", ""), "JSON");
  expect_st_io(st_bytes("{} x", ""), "JSON");
  expect_st_io(st_bytes("{\"a\xff\": 1}", ""), "JSON");  // invalid UTF-8
  expect_st_io(st_bytes("", ""), "JSON");
}

TEST(SafeTensorsMalformed, HeaderShape) {
  expect_st_io(st_bytes("[1, 2]", ""), "object");
  expect_st_io(st_bytes("{\"a\": 3}", ""), "object");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1]}})", "abcd"), "data_offsets");
  expect_st_io(st_bytes(R"({"a": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})", "abcd"), "dtype");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", "abcd"), "shape");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd"), "non-negative");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "abcd"),
               "non-negative");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "abcd"), "data_offsets");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, "4"]}})", "abcd"),
               "data_offsets");
  expect_st_io(st_bytes(R"({"__metadata__": {"k": 1}})", ""), "__metadata__");
  expect_st_io(st_bytes(R"({"__metadata__": [1]})", ""), "__metadata__");
}

TEST(SafeTensorsMalformed, UnknownDType) {
  expect_st_io(st_bytes(R"({"a": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", "abcd"), "F33");
  expect_st_io(st_bytes(R"({"a": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})", "abcd"), "f32");
}

TEST(SafeTensorsMalformed, ShapeDoesNotMatchSpan) {
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "abcdefgh"), "span");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 4]}})", "abcd"), "span");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 8], "data_offsets": [0, 4]}})",
                        "abcd"),
               "overflow");
  // 3 four-bit values do not fill whole bytes.
  expect_st_io(st_bytes(R"({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}})", "ab"), "whole number");
}

TEST(SafeTensorsMalformed, OffsetsOutOfRangeOrTruncated) {
  // Offsets past the data: the file is truncated.
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "abcd"), "truncated");
  // A valid file cut one byte short.
  std::string p = wick::test::tmp_path("good.safetensors");
  save_safetensors({{"x", Tensor::ones({4}, DType::F32)}}, p);
  std::string good = read_bytes(p);
  expect_st_io(good.substr(0, good.size() - 1), "truncated");
  // Cut inside the header.
  expect_st_io(good.substr(0, 12), "past the end");
}

TEST(SafeTensorsMalformed, TrailingBytes) {
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", "abcdXY"), "trailing");
  expect_st_io(st_bytes("{}", "x"), "trailing");
}

TEST(SafeTensorsMalformed, OverlappingGapsAndReversed) {
  const std::string d12 = "abcdefghijkl";
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                        d12),
               "contiguous");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                            "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                        d12),
               "contiguous");
  // Two tensors on the same bytes.
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                            "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                        "abcd"),
               "contiguous");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", "abcdefgh"), "contiguous");
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", "abcdefgh"), "contiguous");
}

TEST(SafeTensorsMalformed, AcceptsWhatTheRustCrateAccepts) {
  // Header order differing from data order, extra spaces, null metadata and an unknown field.
  std::string p = wick::test::tmp_path("ok.safetensors");
  float v[2] = {1.25f, -3.0f};
  std::string data(reinterpret_cast<const char*>(v), 8);
  write_bytes(p, st_bytes(R"({"__metadata__": null, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                             "a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4], "extra": 1}}   )",
                          data));
  SafeTensors st = SafeTensors::open(p);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(st.load("a").item<float>(), 1.25f);
  EXPECT_EQ(st.load("b").to_vector<float>(), std::vector<float>{-3.0f});
}

// What nlohmann tolerates and serde_json (the Rust crate's parser) rejects: a NUL byte
// (nlohmann stopped there and dropped the rest), a UTF-8 byte order mark (nlohmann skipped it) and
// a key given twice (nlohmann kept the later one). Offsets below are counted by hand: 8 length
// bytes, then the header.
TEST(SafeTensorsMalformed, NulByteInHeader) {
  const std::string j = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  // After a complete JSON value: the rest used to be ignored.
  expect_st_io(st_bytes(j + std::string("\0{\"b\": 1}", 9), "abcd"),
               ("NUL byte at byte offset " + std::to_string(8 + j.size())).c_str());
  expect_st_io(st_bytes(j + std::string("\0\0\0", 3), "abcd"), "NUL");  // NUL padding (spaces are legal)
  // Between tokens.
  std::string mid = j;
  mid.insert(5, 1, '\0');
  expect_st_io(st_bytes(mid, "abcd"), "byte offset 13");
  // Space padding stays legal.
  std::string p = wick::test::tmp_path("padded.safetensors");
  float one = 1.0f;
  write_bytes(p, st_bytes(j + "   ", std::string(reinterpret_cast<const char*>(&one), 4)));
  EXPECT_EQ(SafeTensors::open(p).load("a").to_vector<float>(), std::vector<float>{1.0f});
}

TEST(SafeTensorsMalformed, ByteOrderMark) {
  const std::string j = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  expect_st_io(st_bytes("\xEF\xBB\xBF" + j, "abcd"), "byte order mark (byte offset 8)");
  expect_st_io(st_bytes("\xEF\xBB\xBF{}", ""), "byte order mark");
}

TEST(SafeTensorsMalformed, DuplicateNames) {
  const std::string t = R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  const std::string h = "{\"a\": " + t + ", \"a\": " + t + "}";
  const size_t second = h.find("\"a\"", 2);  // the first is at index 1
  expect_st_io(st_bytes(h, "abcd"),
               ("'a' twice in one object (at byte offsets 9 and " + std::to_string(8 + second) + ")").c_str());
  // The same name spelled with an escape is the same key.
  expect_st_io(st_bytes("{\"a\": " + t + ", \"\\u0061\": " + t + "}", "abcd"), "'a' twice");
  expect_st_io(st_bytes(R"({"__metadata__": {"k": "1"}, "__metadata__": {"k": "2"}})", ""), "'__metadata__' twice");
  // Inside one tensor's object and inside the metadata.
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "dtype": "F64", "shape": [1], "data_offsets": [0, 4]}})", "abcd"),
               "'dtype' twice");
  expect_st_io(st_bytes(R"({"__metadata__": {"k": "1", "k": "2"}})", ""), "'k' twice");
  // The same key in different objects, and key-like strings as values, are fine.
  std::string p = wick::test::tmp_path("ok.safetensors");
  float v[2] = {1.0f, 2.0f};
  write_bytes(p, st_bytes(R"({"__metadata__": {"a": "b:", "shape": "a"},
                              "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                          std::string(reinterpret_cast<const char*>(v), 8)));
  SafeTensors st = SafeTensors::open(p);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(st.metadata().at("a"), "b:");
  EXPECT_EQ(st.load("b").to_vector<float>(), std::vector<float>{2.0f});
}

TEST(SafeTensorsMalformed, EmptyShapeWithHugeDims) {
  // 0 elements, 0 bytes: the old check multiplied from the left and never saw the overflow.
  expect_st_io(st_bytes(R"({"a": {"dtype": "F32", "shape": [0, 4294967296, 4294967296], "data_offsets": [0, 0]}})", ""),
               "more elements");
}

// ---------------------------------------------------------------- npy

namespace {

// An .npy file written by hand: version 1.0, the given header dict (padded to 64 bytes).
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict;
  size_t prefix = major == 1 ? 10 : 12;
  h.append((64 - (prefix + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  for (size_t i = 0; i < prefix - 8; ++i) out += char((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

void expect_npy_io(const std::string& bytes, const char* what = nullptr) {
  std::string p = wick::test::tmp_path("bad.npy");
  write_bytes(p, bytes);
  expect_error([&] { load_npy(p); }, ErrorKind::Io, p, what);
}

}  // namespace

TEST(Npy, ReadsNumpyIntegers) {
  Tensor u1 = load_npy(io_fixture("u1.npy"));
  EXPECT_EQ(u1.dtype(), DType::U8);
  EXPECT_EQ(u1.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 7, 255}));
  Tensor b1 = load_npy(io_fixture("b1.npy"));
  EXPECT_EQ(b1.dtype(), DType::U8);
  EXPECT_EQ(b1.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 1}));
  Tensor u4 = load_npy(io_fixture("u4.npy"));
  EXPECT_EQ(u4.shape(), (Shape{2, 2}));
  EXPECT_EQ(u4.to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1, 4294967295u, 123456}));
  EXPECT_EQ(load_npy(io_fixture("i2.npy")).to_vector<int16_t>(), (std::vector<int16_t>{-32768, 32767, -1}));
  Tensor i4 = load_npy(io_fixture("i4.npy"));
  EXPECT_EQ(i4.shape(), (Shape{2, 3}));
  EXPECT_EQ(i4.to_vector<int32_t>(), (std::vector<int32_t>{INT32_MIN, 0, 5, INT32_MAX, -7, 9}));
  EXPECT_EQ(load_npy(io_fixture("i8.npy")).to_vector<int64_t>(),
            (std::vector<int64_t>{-9007199254740993LL, INT64_MAX, -1}));
}

TEST(Npy, ReadsNumpyFloats) {
  Tensor f2 = load_npy(io_fixture("f2.npy"));
  EXPECT_EQ(f2.dtype(), DType::F16);
  EXPECT_TRUE(all_close(f2, {1.0, -2.5, 65504.0, INFINITY}, 0, 0));
  Tensor f4 = load_npy(io_fixture("f4.npy"));
  EXPECT_EQ(f4.shape(), (Shape{2, 3}));
  EXPECT_EQ(f4.to_vector<float>(), (std::vector<float>{1.5f, -0.25f, 100.0f, -3.0f, 0.5f, 2.0f}));
  EXPECT_EQ(load_npy(io_fixture("f8.npy")).to_vector<double>(),
            (std::vector<double>{3.141592653589793, -1e300, 5e-324}));
}

TEST(Npy, ReadsBigEndian) {
  EXPECT_EQ(load_npy(io_fixture("be_i4.npy")).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 65536}));
  EXPECT_EQ(load_npy(io_fixture("be_f8.npy")).to_vector<double>(), (std::vector<double>{1.5, -2.25}));
  EXPECT_TRUE(all_close(load_npy(io_fixture("be_f2.npy")), {1.0, -2.5}, 0, 0));
  EXPECT_EQ(load_npy(io_fixture("be_u4.npy")).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 4294967294u}));
}

TEST(Npy, ReadsFortranOrder) {
  Tensor f = load_npy(io_fixture("fortran_f4.npy"));
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_TRUE(f.is_contiguous());
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  Tensor g = load_npy(io_fixture("fortran_i8_3d.npy"));
  EXPECT_EQ(g.shape(), (Shape{2, 3, 4}));
  std::vector<int64_t> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  EXPECT_EQ(g.to_vector<int64_t>(), want);
}

TEST(Npy, ReadsScalarEmptyAndLaterVersions) {
  Tensor s = load_npy(io_fixture("scalar_f8.npy"));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item<double>(), 2.5);
  Tensor e = load_npy(io_fixture("empty_f4.npy"));
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(e.dtype(), DType::F32);
  EXPECT_EQ(load_npy(io_fixture("v2_f4.npy")).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor v3 = load_npy(io_fixture("v3_i2.npy"));
  EXPECT_EQ(v3.shape(), (Shape{2, 2}));
  EXPECT_EQ(v3.to_vector<int16_t>(), (std::vector<int16_t>{1, 2, 3, 4}));
}

TEST(Npy, RoundTripAllDTypes) {
  for (DType d : kAllDTypes) {
    Tensor t = sample(d);
    std::string p = wick::test::tmp_path(std::string("rt_") + dtype_name(d) + ".npy");
    save_npy(t, p);
    Tensor got = load_npy(p);
    EXPECT_EQ(got.dtype(), d) << dtype_name(d);
    EXPECT_EQ(got.shape(), t.shape()) << dtype_name(d);
    EXPECT_EQ(raw(got), raw(t)) << dtype_name(d);
  }
  std::string p = wick::test::tmp_path("scalar.npy");
  save_npy(Tensor::from_vector<int64_t>({-3}, {}), p);
  EXPECT_EQ(load_npy(p).shape(), Shape{});
  EXPECT_EQ(load_npy(p).item<int64_t>(), -3);
  save_npy(Tensor::zeros({3, 0}, DType::F16), p);
  EXPECT_EQ(load_npy(p).shape(), (Shape{3, 0}));
  save_npy(Tensor::from_vector<uint32_t>({5, 6, 7}, {3}), p);
  EXPECT_EQ(load_npy(p).to_vector<uint32_t>(), (std::vector<uint32_t>{5, 6, 7}));
}

TEST(Npy, WrittenHeaderIsNumpys) {
  std::string p = wick::test::tmp_path("h.npy");
  save_npy(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), p);
  std::string f = read_bytes(p);
  ASSERT_GE(f.size(), 10u);
  EXPECT_EQ(f.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t hlen = uint8_t(f[8]) | (size_t(uint8_t(f[9])) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(f.size(), 10 + hlen + 24);
  std::string h = f.substr(10, hlen);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_EQ(h.substr(0, h.find('}') + 1), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  float last;
  std::memcpy(&last, f.data() + 10 + hlen + 20, 4);
  EXPECT_EQ(last, 6.0f);

  save_npy(Tensor::from_vector<bf16>({bf16(1.0f)}, {1}), p);
  f = read_bytes(p);
  EXPECT_NE(f.find("{'descr': 'bfloat16', 'fortran_order': False, 'shape': (1,), }"), std::string::npos);
  save_npy(Tensor::from_vector<f8e4m3>({f8e4m3(1.0f)}, {}), p);
  f = read_bytes(p);
  EXPECT_NE(f.find("{'descr': 'float8_e4m3fn', 'fortran_order': False, 'shape': (), }"), std::string::npos);
  save_npy(Tensor::from_vector<uint8_t>({1}, {1}), p);
  EXPECT_NE(read_bytes(p).find("'descr': '|u1'"), std::string::npos);
}

TEST(Npy, StridedTensorsSavedRowMajor) {
  Tensor base = Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5}, {2, 3});
  std::string p = wick::test::tmp_path("s.npy");
  save_npy(base.t(), p);
  EXPECT_EQ(load_npy(p).shape(), (Shape{3, 2}));
  EXPECT_EQ(load_npy(p).to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  save_npy(base.narrow(1, 1, 2), p);
  EXPECT_EQ(load_npy(p).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 4, 5}));
  save_npy(wick::test::as_offset(base), p);
  EXPECT_EQ(load_npy(p).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  save_npy(Tensor::from_vector<int32_t>({8, 9}, {2, 1}).broadcast_as({2, 3}), p);
  EXPECT_EQ(load_npy(p).to_vector<int32_t>(), (std::vector<int32_t>{8, 8, 8, 9, 9, 9}));
}

TEST(Npy, HandWrittenHeaderVariants) {
  // Double quotes, no trailing comma, other key order, '=' byte order, Python 2 long shapes, v2.0.
  std::string p = wick::test::tmp_path("v.npy");
  int16_t v[3] = {7, -8, 9};
  std::string d(reinterpret_cast<const char*>(v), 6);
  write_bytes(p, npy_bytes("{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"=i2\"}", d));
  EXPECT_EQ(load_npy(p).to_vector<int16_t>(), (std::vector<int16_t>{7, -8, 9}));
  write_bytes(p, npy_bytes("{'descr': '<i2', 'fortran_order': True, 'shape': (3,), }", d, 2));
  EXPECT_EQ(load_npy(p).to_vector<int16_t>(), (std::vector<int16_t>{7, -8, 9}));
  write_bytes(p, npy_bytes("{'descr': 'bfloat16', 'fortran_order': False, 'shape': (3,)}", d));
  EXPECT_EQ(load_npy(p).dtype(), DType::BF16);
}

TEST(Npy, UnsupportedDescrIsIoError) {
  expect_error([] { load_npy(io_fixture("i1_unsupported.npy")); }, ErrorKind::Io, io_fixture("i1_unsupported.npy"),
               "|i1");
  expect_npy_io(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')), "<c8");
  expect_npy_io(npy_bytes("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", std::string(2, '\0')), "<u2");
  expect_npy_io(npy_bytes("{'descr': '<f4x', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')));
  expect_npy_io(npy_bytes("{'descr': '', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')));
  expect_npy_io(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')),
                "structured");
}

TEST(NpyMalformed, MagicAndVersion) {
  expect_npy_io("", "magic");
  expect_npy_io("\x93NUMP", "magic");
  expect_npy_io(std::string("\x93NUMPX\x01\x00\x10\x00", 10) + std::string(16, ' '), "magic");
  expect_npy_io(std::string("PK\x03\x04") + std::string(60, '\0'), "magic");  // an .npz
  std::string good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
  std::string v4 = good;
  v4[6] = 4;
  expect_npy_io(v4, "version");
  std::string v11 = good;
  v11[7] = 1;
  expect_npy_io(v11, "version");
}

TEST(NpyMalformed, TruncatedHeader) {
  std::string good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
  expect_npy_io(good.substr(0, 9));
  expect_npy_io(good.substr(0, 40), "past the end");
  std::string v2 = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'), 2);
  expect_npy_io(v2.substr(0, 11), "truncated");
  std::string huge = good;
  huge[8] = char(0xff);
  huge[9] = char(0xff);
  expect_npy_io(huge, "past the end");
}

TEST(NpyMalformed, BadHeaderDict) {
  const std::string d4(4, '\0');
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False}", d4), "lacks");
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", d4), "unexpected key");
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': maybe, 'shape': (1,)}", d4), "True or False");
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", d4), "non-negative");
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", d4), "tuple");
  expect_npy_io(npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", d4));
  expect_npy_io(npy_bytes("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", d4));
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} extra", d4), "after");
  expect_npy_io(npy_bytes("'descr': '<f4', 'fortran_order': False, 'shape': (1,)", d4));
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,", d4));
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}", d4),
                "overflow");
  expect_npy_io(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", d4),
                "overflow");
}

TEST(NpyMalformed, DataSizeMismatch) {
  const char* h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expect_npy_io(npy_bytes(h, std::string(20, '\0')), "truncated");
  expect_npy_io(npy_bytes(h, std::string(28, '\0')), "trailing");
  expect_npy_io(npy_bytes(h, ""), "truncated");
  // A numpy-written file cut short.
  std::string f = read_bytes(io_fixture("f8.npy"));
  expect_npy_io(f.substr(0, f.size() - 3), "truncated");
}

TEST(Npy, FileErrors) {
  std::string p = wick::test::tmp_path("missing.npy");
  expect_error([&] { load_npy(p); }, ErrorKind::Io, p);
  std::string q = wick::test::tmp_path("nodir") + "/sub/x.npy";
  expect_error([&] { save_npy(Tensor::ones({1}, DType::F32), q); }, ErrorKind::Io, q);
  EXPECT_THROW(save_npy(Tensor(), wick::test::tmp_path("u.npy")), Error);
}

// Writes a GGUF with wick (save_gguf) and a JSON of what it wrote, for the ctest gguf_py_roundtrip:
// gguf-py's GGUFReader must read the same metadata and tensors back, and gguf-py's dequantizers
// must give the values wick's dequantize gives (tests/fixtures/gen_gguf.py --roundtrip).
// Usage: gguf_roundtrip_writer OUT.gguf OUT.json [--no-nested]
// --no-nested leaves out the nested array, which gguf-py reads but llama.cpp's own reader (ggml's
// gguf.cpp) refuses ("invalid GGUF type 9"): the file for checking with ggml.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "wick/gguf.hpp"
#include "wick/wick.hpp"

using namespace wick;
using nlohmann::json;

namespace {

// The value as written (gen_gguf.py flattens nested arrays, as gguf-py's reader does).
json value_json(const GGUFValue& v) {
  switch (v.type) {
    case GGUFType::U8:
    case GGUFType::U16:
    case GGUFType::U32:
    case GGUFType::U64:
      return v.u;
    case GGUFType::I8:
    case GGUFType::I16:
    case GGUFType::I32:
    case GGUFType::I64:
      return v.i;
    case GGUFType::F32:
    case GGUFType::F64:
      return v.f;  // nlohmann writes doubles so they read back exactly
    case GGUFType::Bool:
      return v.b;
    case GGUFType::String:
      return v.s;
    case GGUFType::Array: {
      json a = json::array();
      for (const auto& e : v.array) a.push_back(value_json(e));
      return a;
    }
  }
  return nullptr;
}
// gguf-py's GGUFReader types a field as its own type followed by its first element's types (an
// empty array is just [ARRAY]).
json types_json(const GGUFValue& v) {
  json t = json::array({uint32_t(v.type)});
  if (v.type == GGUFType::Array && !v.array.empty())
    for (const auto& x : types_json(v.array[0])) t.push_back(x);
  return t;
}

std::string hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}
std::string f32_hex(const Tensor& t) {
  const Tensor f = t.to_dtype(DType::F32);
  std::vector<float> v = f.to_vector<float>();
  return hex(v.data(), v.size() * 4);
}

}  // namespace

int main(int argc, char** argv) {
  const bool nested = !(argc == 4 && std::string(argv[3]) == "--no-nested");
  if (argc != 3 && nested) {
    std::fprintf(stderr, "usage: %s OUT.gguf OUT.json [--no-nested]\n", argv[0]);
    return 2;
  }
  try {
    using V = GGUFValue;
    // every value type, extremes of each integer type, arrays of several element types, a nested
    // array, an empty array, a UTF-8 string, and a non-default alignment
    std::vector<std::pair<std::string, GGUFValue>> meta{
        {"general.architecture", V::of_string("wickrt")},
        {"general.alignment", V::of_u32(64)},
        {"rt.u8", V::of_u8(255)},
        {"rt.i8", V::of_i8(-128)},
        {"rt.u16", V::of_u16(65535)},
        {"rt.i16", V::of_i16(-32768)},
        {"rt.u32", V::of_u32(4294967295u)},
        {"rt.i32", V::of_i32(-2147483647 - 1)},
        {"rt.u64", V::of_u64(18446744073709551615ull)},
        {"rt.i64", V::of_i64(-9223372036854775807ll - 1)},
        {"rt.f32", V::of_f32(-0.1f)},
        {"rt.f32_tiny", V::of_f32(1e-45f)},  // the smallest f32 subnormal
        {"rt.f64", V::of_f64(6.02214076e23)},
        {"rt.bool_t", V::of_bool(true)},
        {"rt.bool_f", V::of_bool(false)},
        {"rt.string", V::of_string("gr\xc3\xbc\xc3\x9f dich, \xe2\x88\x9e")},
        {"rt.empty_string", V::of_string("")},
        {"rt.arr_u8", V::of_array(GGUFType::U8, {V::of_u8(0), V::of_u8(7), V::of_u8(255)})},
        {"rt.arr_i64", V::of_array(GGUFType::I64, {V::of_i64(-1), V::of_i64(1ll << 40)})},
        {"rt.arr_f32", V::of_array(GGUFType::F32, {V::of_f32(0.5f), V::of_f32(-3.25f), V::of_f32(1e30f)})},
        {"rt.arr_f64", V::of_array(GGUFType::F64, {V::of_f64(1.0 / 3)})},
        {"rt.arr_bool", V::of_array(GGUFType::Bool, {V::of_bool(true), V::of_bool(false)})},
        {"rt.arr_str", V::of_array(GGUFType::String, {V::of_string("a"), V::of_string(""), V::of_string("tok")})},
        {"rt.arr_empty", V::of_array(GGUFType::U32, {})},
        {"rt.nested", V::of_array(GGUFType::Array, {V::of_array(GGUFType::I16, {V::of_i16(1), V::of_i16(-2)}),
                                                    V::of_array(GGUFType::I16, {V::of_i16(3)})})},
    };

    if (!nested) meta.pop_back();  // rt.nested is last

    // plain tensors: a transposed (strided) f32 view, f16, bf16
    const Tensor a = Tensor::randn({3, 2}, DType::F32, Device::cpu(), 1).t();
    const Tensor h = Tensor::randn({4}, DType::F32, Device::cpu(), 2).to_dtype(DType::F16);
    const Tensor bf = Tensor::randn({2, 2}, DType::F32, Device::cpu(), 3).to_dtype(DType::BF16);
    std::vector<std::pair<std::string, Tensor>> plain{{"p.f32", a}, {"p.f16", h}, {"p.bf16", bf}};

    // every supported block type, quantized by wick from random rows, written as raw blocks
    std::vector<GGUFRawTensor> raw;
    std::vector<QTensor> qs;
    for (const char* name : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                             "Q8_K", "IQ4_NL", "IQ4_XS", "MXFP4"}) {
      const GGMLType t = *ggml_type_from_name(name);
      const size_t cols = ggml_block_size(t) == 32 ? 96 : 512;
      const QTensor q = QTensor::quantize(Tensor::randn({3, cols}, DType::F32, Device::cpu(), 10 + uint32_t(t)), t);
      std::string lower = name;
      for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
      const std::vector<uint8_t> bytes = q.to_bytes();
      raw.push_back({"q." + lower, t, {cols, 3}, {bytes.begin(), bytes.end()}});
      qs.push_back(q);
    }
    save_gguf(argv[1], meta, plain, raw);

    json doc;
    doc["alignment"] = 64;
    doc["metadata"] = json::array();
    for (const auto& [k, v] : meta)
      doc["metadata"].push_back({{"key", k}, {"types", types_json(v)}, {"value", value_json(v)}});
    doc["tensors"] = json::array();
    const std::pair<GGMLType, const Tensor*> plain_types[] = {
        {GGMLType::F32, &a}, {GGMLType::F16, &h}, {GGMLType::BF16, &bf}};
    for (size_t i = 0; i < plain.size(); ++i) {
      const Tensor c = plain[i].second.contiguous();
      std::vector<uint8_t> bytes(c.numel() * dtype_size(c.dtype()));
      c.copy_to_host(bytes.data());
      doc["tensors"].push_back({{"name", plain[i].first},
                                {"type", uint32_t(plain_types[i].first)},
                                {"shape", c.shape()},
                                {"raw_hex", hex(bytes.data(), bytes.size())},
                                {"values_f32_hex", f32_hex(c)}});
    }
    for (size_t i = 0; i < raw.size(); ++i) {
      json e = {{"name", raw[i].name},
                {"type", uint32_t(raw[i].type)},
                {"shape", qs[i].shape()},
                {"raw_hex", hex(raw[i].bytes.data(), raw[i].bytes.size())}};
      // gguf-py has no dequantizer for the activation formats Q8_1 and Q8_K: bytes only
      if (raw[i].type != GGMLType::Q8_1 && raw[i].type != GGMLType::Q8_K)
        e["values_f32_hex"] = f32_hex(qs[i].dequantize());
      doc["tensors"].push_back(e);
    }
    std::ofstream(argv[2]) << doc.dump(1) << "\n";
  } catch (const Error& e) {
    std::fprintf(stderr, "gguf_roundtrip_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}

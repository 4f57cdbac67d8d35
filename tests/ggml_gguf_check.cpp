// Reads a GGUF with llama.cpp's own reader (ggml's gguf.cpp, loading the tensor data too) and
// compares it with what wick wrote (the JSON of tests/gguf_roundtrip_writer.cpp): keys, value
// types and values, alignment, tensor names, types, shapes and bytes. Built and run by
// scripts/check_gguf_with_ggml.sh against llama.cpp's ggml-base (not part of the CMake build).
// Usage: ggml_gguf_check FILE.gguf EXPECT.json
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"
int main(int argc, char** argv) {
  nlohmann::json want;
  std::ifstream(argv[2]) >> want;
  ggml_context* gctx = nullptr;
  gguf_init_params p{false, &gctx};
  gguf_context* ctx = gguf_init_from_file(argv[1], p);
  if (!ctx) {
    std::printf("ggml refused the file\n");
    return 1;
  }
  int bad = 0;
  const int64_t n_kv = gguf_get_n_kv(ctx);
  if (n_kv != (int64_t)want["metadata"].size()) {
    std::printf("kv count %lld vs %zu\n", (long long)n_kv, want["metadata"].size());
    bad++;
  }
  for (int64_t i = 0; i < n_kv && i < (int64_t)want["metadata"].size(); ++i) {
    const auto& m = want["metadata"][i];
    std::string key = gguf_get_key(ctx, i);
    int t = gguf_get_kv_type(ctx, i);
    if (key != m["key"].get<std::string>() || t != m["types"][0].get<int>()) {
      std::printf("kv %lld: %s type %d vs %s\n", (long long)i, key.c_str(), t, m["key"].dump().c_str());
      bad++;
      continue;
    }
    bool ok = true;
    switch (t) {
      case GGUF_TYPE_UINT8:
        ok = gguf_get_val_u8(ctx, i) == m["value"].get<uint64_t>();
        break;
      case GGUF_TYPE_INT8:
        ok = gguf_get_val_i8(ctx, i) == m["value"].get<int64_t>();
        break;
      case GGUF_TYPE_UINT16:
        ok = gguf_get_val_u16(ctx, i) == m["value"].get<uint64_t>();
        break;
      case GGUF_TYPE_INT16:
        ok = gguf_get_val_i16(ctx, i) == m["value"].get<int64_t>();
        break;
      case GGUF_TYPE_UINT32:
        ok = gguf_get_val_u32(ctx, i) == m["value"].get<uint64_t>();
        break;
      case GGUF_TYPE_INT32:
        ok = gguf_get_val_i32(ctx, i) == m["value"].get<int64_t>();
        break;
      case GGUF_TYPE_UINT64:
        ok = gguf_get_val_u64(ctx, i) == m["value"].get<uint64_t>();
        break;
      case GGUF_TYPE_INT64:
        ok = gguf_get_val_i64(ctx, i) == m["value"].get<int64_t>();
        break;
      case GGUF_TYPE_FLOAT32:
        ok = (double)gguf_get_val_f32(ctx, i) == m["value"].get<double>();
        break;
      case GGUF_TYPE_FLOAT64:
        ok = gguf_get_val_f64(ctx, i) == m["value"].get<double>();
        break;
      case GGUF_TYPE_BOOL:
        ok = gguf_get_val_bool(ctx, i) == m["value"].get<bool>();
        break;
      case GGUF_TYPE_STRING:
        ok = gguf_get_val_str(ctx, i) == m["value"].get<std::string>();
        break;
      case GGUF_TYPE_ARRAY: {
        ok = gguf_get_arr_n(ctx, i) == m["value"].size() &&
             (m["value"].empty() || gguf_get_arr_type(ctx, i) == m["types"][1].get<int>());
        if (ok && gguf_get_arr_type(ctx, i) == GGUF_TYPE_STRING)
          for (size_t k = 0; k < gguf_get_arr_n(ctx, i); ++k)
            ok = ok && gguf_get_arr_str(ctx, i, k) == m["value"][k].get<std::string>();
        break;
      }
    }
    if (!ok) {
      std::printf("value of %s differs\n", key.c_str());
      bad++;
    }
  }
  if (gguf_get_alignment(ctx) != want["alignment"].get<size_t>()) {
    std::printf("alignment\n");
    bad++;
  }
  const int64_t nt = gguf_get_n_tensors(ctx);
  if (nt != (int64_t)want["tensors"].size()) {
    std::printf("tensor count\n");
    bad++;
  }
  for (int64_t i = 0; i < nt; ++i) {
    const auto& w = want["tensors"][i];
    std::string name = gguf_get_tensor_name(ctx, i);
    ggml_tensor* t = ggml_get_tensor(gctx, name.c_str());
    std::string hex;
    char b[3];
    for (size_t k = 0; k < ggml_nbytes(t); ++k) {
      std::snprintf(b, 3, "%02x", ((unsigned char*)t->data)[k]);
      hex += b;
    }
    std::vector<size_t> shape;
    for (int d = ggml_n_dims(t) - 1; d >= 0; --d) shape.push_back(t->ne[d]);
    if (name != w["name"].get<std::string>() || (int)t->type != w["type"].get<int>() ||
        hex != w["raw_hex"].get<std::string>() || shape != w["shape"].get<std::vector<size_t>>()) {
      std::printf("tensor %s differs\n", name.c_str());
      bad++;
    }
  }
  std::printf("ggml's gguf reader: %lld keys, %lld tensors (data loaded), %d mismatches\n", (long long)n_kv,
              (long long)nt, bad);
  gguf_free(ctx);
  ggml_free(gctx);
  return bad != 0;
}

// libFuzzer target: a safetensors file (header JSON, dtypes, shapes, offsets) loaded lazily, then every
// tensor read. Every input must load or throw wick::Error; never crash, hang or read outside the file.
// Build and run: tests/fuzz/run_fuzz.sh safetensors BUILD
#include "fuzz_common.hpp"
#include "wick/error.hpp"
#include "wick/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("model.safetensors", data, size);
  try {
    for (auto& [name, t] : wick::load_safetensors(path)) {
      if (t.numel() <= (1 << 16)) (void)t.to_dtype(wick::DType::F32).sum_all();
    }
  } catch (const wick::Error&) {
  }
  return 0;
}

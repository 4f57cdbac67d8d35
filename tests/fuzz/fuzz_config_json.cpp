// libFuzzer target: a Hugging Face config.json read into a model config (every key, type and size check).
// Every input must parse or throw wick::Error; never crash or hang. Build and run:
// tests/fuzz/run_fuzz.sh config_json BUILD
#include "fuzz_common.hpp"
#include "model_impl.hpp"
#include "wick/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("config.json", data, size);
  try {
    (void)wick::llm::detail::config_from_hf(path);
  } catch (const wick::Error&) {
  }
  return 0;
}

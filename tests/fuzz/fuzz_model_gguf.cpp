// libFuzzer target: what Model::load does with a GGUF before it touches the weights (the header and
// metadata read, the model config and its checks, the tensor table, the architecture's required tensors in
// every layer). Every input must load that far or throw wick::Error; never crash, hang, or allocate out of
// proportion to its size (ASan + UBSan, -rss_limit_mb). Build and run: tests/fuzz/run_fuzz.sh model_gguf BUILD
#include "archs.hpp"
#include "fuzz_common.hpp"
#include "model_impl.hpp"
#include "wick/error.hpp"
#include "wick/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("model.gguf", data, size);
  try {
    const wick::GGUFFile f = wick::GGUFFile::open(path);
    const wick::llm::ModelConfig c = wick::llm::detail::config_from_gguf(f, path);
    auto src = wick::llm::detail::open_gguf_weights(f, path);
    wick::llm::detail::check_required_tensors(wick::llm::detail::arch_info(c.arch), c, *src);
  } catch (const wick::Error&) {
  }
  return 0;
}

// libFuzzer target: Tokenizer::load of a tokenizer.json, then encode and decode. The input's first line is
// the text to tokenize, the rest the JSON (so the fuzzer mutates both). Every input must work or throw
// wick::Error; never crash or hang. Build and run: tests/fuzz/run_fuzz.sh tokenizer_json BUILD
#include <cstring>

#include "fuzz_common.hpp"
#include "wick/error.hpp"
#include "wick/llm/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const void* nl = std::memchr(data, '\n', size);
  const size_t cut = nl != nullptr ? static_cast<size_t>(static_cast<const uint8_t*>(nl) - data) : 0;
  const std::string text(reinterpret_cast<const char*>(data), cut);
  const size_t json_at = nl != nullptr ? cut + 1 : 0;
  const std::string path = fuzz::write_file("tokenizer.json", data + json_at, size - json_at);
  try {
    const wick::llm::Tokenizer t = wick::llm::Tokenizer::load(path);
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = t.encode(text.empty() ? std::string("Hello world 123 \xC3\xA9!") : text, special,
                                                special);
      for (int32_t id : ids)
        if (id < 0 || static_cast<size_t>(id) >= t.vocab_size()) __builtin_trap();
      (void)t.decode(ids, special);
    }
  } catch (const wick::Error&) {
  }
  return 0;
}

// libFuzzer target: a tokenizer from a GGUF's tokenizer.ggml.* metadata, then encode (text with special
// tokens, invalid UTF-8, NULs, a long repeat) and decode of what it gave and of every id. Every input must
// work or throw wick::Error; never crash or hang. Build and run: tests/fuzz/run_fuzz.sh tokenizer_gguf BUILD
#include "fuzz_common.hpp"
#include "wick/error.hpp"
#include "wick/gguf.hpp"
#include "wick/llm/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("vocab.gguf", data, size);
  try {
    const wick::GGUFFile f = wick::GGUFFile::open(path);
    const wick::llm::Tokenizer t = wick::llm::Tokenizer::from_gguf(f);
    std::string text = "Hello world's  123!! <s></s><|im_end|> \xC3\xA9\xE4\xB8\x80 a\xFF" "b\n\n\t";
    text.push_back('\0');
    text.append(300, 'a');
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = t.encode(text, special, special);
      for (int32_t id : ids)
        if (id < 0 || static_cast<size_t>(id) >= t.vocab_size()) __builtin_trap();
      (void)t.decode(ids, special);
    }
    std::vector<int32_t> all;
    for (size_t id = 0; id < t.vocab_size() && id < 4096; ++id) all.push_back(static_cast<int32_t>(id));
    (void)t.decode(all, false);
  } catch (const wick::Error&) {
  }
  return 0;
}

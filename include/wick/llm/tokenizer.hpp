#pragma once
// Text <-> token ids for LLMs: SentencePiece-style (GGUF "llama") and byte-level BPE (GGUF "gpt2"),
// loaded from GGUF tokenizer.ggml.* metadata or a Hugging Face tokenizer.json. Ids match llama.cpp.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wick {
class GGUFFile;
}

namespace wick::llm {

struct TokenizerData;  // the vocabulary and rules (src/llm)

// Copies share one immutable vocabulary (cheap); every method is const and safe to call from several threads.
class Tokenizer {
 public:
  // From tokenizer.ggml.* (model "llama" = SPM, "gpt2" = byte-level BPE; pre = pre-tokenizer name).
  // Malformed metadata is wick::Error naming the key.
  static Tokenizer from_gguf(const wick::GGUFFile& f);
  // A .gguf file, a tokenizer.json (tokenizer_config.json beside it is read too), or a directory
  // holding a tokenizer.json.
  static Tokenizer load(const std::string& path);

  // add_special: BOS/EOS as the metadata says. parse_special: text like "<|im_end|>" becomes its
  // control token id instead of being tokenized as plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = false) const;
  // skip_special: control tokens (bos, eos, ...) produce no text. The space the encoder put in front
  // (SentencePiece's prefix) is dropped, and spaces are cleaned up (" ." -> ".") where the vocabulary
  // says so, as llama.cpp and Hugging Face decode.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  std::string token_bytes(int32_t id) const;  // the raw bytes this token stands for (decoded piece)
  size_t vocab_size() const;
  int32_t bos_id() const;  // -1 when absent
  int32_t eos_id() const;  // -1 when absent
  bool add_bos() const;    // as the metadata says
  bool add_eos() const;
  bool is_eog(int32_t id) const;      // end of generation: eos, eot, eom, <|im_end|>, <|eot_id|>, ...
  bool is_special(int32_t id) const;  // a control or unknown token (what skip_special leaves out)
  std::optional<int32_t> find(std::string_view token) const;  // exact token text -> id
  const std::string& token_text(int32_t id) const;            // the vocabulary entry as stored
  const std::string& chat_template() const;                   // "" when the file has none
  const std::string& model_kind() const;                      // "llama" or "gpt2"
  const std::string& pre() const;  // GGUF pre-tokenizer name ("default" when none), or "tokenizer.json"

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerData> d) : d_(std::move(d)) {}
  std::shared_ptr<const TokenizerData> d_;
};

// UTF-8-safe streaming: push ids, get only complete UTF-8 text; flush() returns what is held back
// (an incomplete sequence at the end of generation, as is). Pieces are token_bytes() (no leading-space
// stripping: the stream continues a prompt); skip_special drops control tokens' text.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& t, bool skip_special = true);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer* t_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace wick::llm

#pragma once
// Pre-tokenizers and normalizers (internal to src/llm): the text splitting that runs before BPE / SentencePiece
// merges. Built from a GGUF `tokenizer.ggml.pre` name (llama.cpp's regex lists per LLAMA_VOCAB_PRE_TYPE_*) or from a
// tokenizer.json "pre_tokenizer" / "normalizer" object.
//
// For part TOK: hold a PreTokenizer and a Normalizer by value (cheap to copy; compiled regexes are shared).
// Encoding one section of text (the text between special tokens):
//   std::string t = normalize(norm, section);                // tokenizer.json only; GGUF BPE has no normalizer
//   for (const std::string& piece : pre_tokenize(pre, t, is_first_section)) bpe(piece)...
// Pieces are never empty. When byte_level() is true the pieces are already mapped through byte_to_unicode
// (GPT-2 byte-level form, e.g. "Ġworld"), ready for vocab lookup; otherwise they are raw UTF-8 text (Metaspace
// pieces use its replacement character, e.g. "▁Hello").
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "regex.hpp"

namespace wick::llm {

// How a split keeps the delimiter (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit, Punctuation, Bert };
  Kind kind = Kind::Split;
  // Split: the pattern (a literal String pattern is compiled as an escaped regex).
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::Isolated;  // Split, Punctuation
  bool invert = false;                               // Split
  // ByteLevel: prepend ' ' to a piece not starting with one; split with the GPT-2 regex first; map bytes.
  bool add_prefix_space = false;
  bool use_regex = true;
  // Digits
  bool individual_digits = false;
  // Metaspace: ' ' -> replacement; prepend replacement per prepend_scheme ("always", "first", "never"); split
  // before each replacement when split is true.
  std::string replacement = "\xE2\x96\x81";  // U+2581
  std::string prepend_scheme = "always";
  bool split = true;
};

struct PreTokenizer {
  std::string name;  // GGUF pre name, or "tokenizer.json"
  std::vector<PreTokenizerStep> steps;

  // From a GGUF tokenizer.ggml.pre value ("" means "default", as llama.cpp). byte_level adds llama.cpp's final
  // byte encoding (true for BPE vocabularies; names whose vocab is raw UTF-8, e.g. "gemma4", never byte-encode).
  // Unknown names are a wick::Error listing gguf_names().
  static PreTokenizer from_gguf(std::string_view pre, bool byte_level = true);
  // From tokenizer.json's "pre_tokenizer" value (JSON text or parsed; null gives an empty PreTokenizer that
  // returns the whole text as one piece). Unsupported types are a wick::Error naming the type.
  static PreTokenizer from_json(std::string_view json_text);
  static PreTokenizer from_json(const nlohmann::json& j);
  // (Text overloads spelled out: a const char* or std::string would otherwise be ambiguous with nlohmann::json.)
  static PreTokenizer from_json(const char* json_text) { return from_json(std::string_view(json_text)); }
  static PreTokenizer from_json(const std::string& json_text) { return from_json(std::string_view(json_text)); }
  static std::vector<std::string> gguf_names();

  bool byte_level() const;  // whether pieces come back in GPT-2 byte-level form
  bool empty() const { return steps.empty(); }
};

// Splits text (UTF-8; invalid bytes are kept as they are) into pieces. first_section: whether text starts the input
// (Metaspace's prepend_scheme "first" prepends only there).
std::vector<std::string> pre_tokenize(const PreTokenizer& p, std::string_view text, bool first_section = true);
// The same pieces, handed to f one by one as they are made (a long text's pieces never all held at once).
void pre_tokenize_each(const PreTokenizer& p, std::string_view text, bool first_section,
                       const std::function<void(std::string_view)>& f);

struct NormalizerStep {
  enum class Kind { NFC, NFD, Lowercase, Prepend, Replace, Strip };
  Kind kind = Kind::NFC;
  std::string text;                              // Prepend: what to prepend; Replace: the replacement (content)
  std::shared_ptr<const Regex> regex;            // Replace: the pattern (String patterns compiled as escaped regexes)
  bool strip_left = false, strip_right = false;  // Strip
};

struct Normalizer {
  std::vector<NormalizerStep> steps;
  // From tokenizer.json's "normalizer" value: NFC, NFD, Lowercase, Prepend, Replace, Strip, Sequence (or null).
  static Normalizer from_json(std::string_view json_text);
  static Normalizer from_json(const nlohmann::json& j);
  static Normalizer from_json(const char* json_text) { return from_json(std::string_view(json_text)); }
  static Normalizer from_json(const std::string& json_text) { return from_json(std::string_view(json_text)); }
  bool empty() const { return steps.empty(); }
};

std::string normalize(const Normalizer& n, std::string_view text);

// Parses tokenizer JSON (tokenizer.json and the files beside it). Arrays and objects nested deeper than
// kMaxJsonDepth are an Error before parsing, so no later walk over the value can exhaust the stack; invalid
// JSON is an Error naming `where`.
constexpr size_t kMaxJsonDepth = 512;
nlohmann::json parse_json_limited(std::string_view text, const std::string& where);

// Escapes a literal string so that Regex matches it exactly (for tokenizer.json {"String": ...} patterns).
std::string regex_escape(std::string_view literal);

}  // namespace wick::llm

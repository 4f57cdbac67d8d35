#pragma once
// The tokenizer's internal data (shared by tokenizer.cpp and tokenizer_load.cpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "pretokenize.hpp"
#include "wick/llm/tokenizer.hpp"

namespace wick::llm {

// Token attributes (bits), as llama.cpp's llama_token_attr; GGUF's token_type maps onto them.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

enum class TokKind { Spm, Bpe };

struct TokenizerData {
  TokKind kind = TokKind::Spm;
  std::string model_kind;  // "llama" / "gpt2"
  std::string pre = "default";
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> score_rank;  // SPM: the merge priority of each id, 0 for the highest score
  std::vector<uint32_t> attrs;
  TokenMap token_to_id;
  TokenMap bpe_ranks;  // key: left + '\xff' + right (0xFF never occurs in UTF-8)

  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1, pad = -1;
  std::unordered_set<int32_t> eog;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;   // SPM: a space before the text (and after each special token)
  bool escape_whitespace = false;  // BPE over U+2581-escaped text (llama-hf style tokenizer.json)
  bool byte_level = false;         // BPE over GPT-2's byte->unicode map
  bool unescape_pieces = false;    // BPE: decoded pieces turn U+2581 into spaces (SentencePiece-style)
  bool clean_spaces = false;       // decode: HF's clean_up_tokenization_spaces
  bool ignore_merges = false;      // BPE: a whole pre-token that is in the vocab is taken as is
  std::string chat_template;

  // Special/user-defined tokens split out of the text before tokenizing, longest first.
  std::vector<int32_t> special_cache;
  // token_bytes() of each id (llama.cpp's token_to_piece with special = true).
  std::vector<std::string> pieces;
  // Which adjacent character pairs some merge could join: a hashed bit per pair that occurs inside a token
  // (SPM) or a merge's result (BPE). A pair whose bit is clear is never joined, so the text on either side
  // merges on its own; collisions only set more bits, which is safe.
  std::vector<uint64_t> joinable;
  bool may_join(std::string_view a, std::string_view b) const;

  // BPE: the pre-tokenizer (empty: the whole text is one word) and the normalizer (tokenizer.json).
  PreTokenizer pre_tok;
  Normalizer norm;

  int32_t lookup(std::string_view s) const {
    auto it = token_to_id.find(s);
    return it == token_to_id.end() ? -1 : it->second;
  }
  int32_t rank(std::string_view a, std::string_view b) const;
  int32_t byte_token(uint8_t b) const;  // the token for one byte (<0xXX>, or its GPT-2 char), -1 if none

  // Fills token_to_id, special_cache, eog, pieces and joinable once tokens/attrs/ids/merges are set.
  void finalize();
};

}  // namespace wick::llm

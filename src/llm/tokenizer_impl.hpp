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
  // Merges keyed by the two tokens' ids: the rank (BPE: the merge's; SPM: the joined token's score rank) and
  // the id of the result (-1 when left + right is not a token). An open-addressing table: hashing two ids
  // instead of the joined text made tokenizing 2-3x faster (bench_tokenize, qwen2 vocabulary).
  struct PairMerge {
    int32_t rank = -1, result = -1;
  };
  PairMerge pair_merge(int32_t a, int32_t b) const {
    if (pair_keys.empty()) return {};
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> pair_shift;; i = (i + 1) & (pair_keys.size() - 1)) {
      if (pair_keys[i] == key) return pair_vals[i];
      if (pair_keys[i] == kNoPair) return {};
    }
  }
  static constexpr uint64_t kNoPair = ~uint64_t{0};
  std::vector<uint64_t> pair_keys;
  std::vector<PairMerge> pair_vals;
  unsigned pair_shift = 64;
  int32_t byte_token(uint8_t b) const;  // the token for one byte (<0xXX>, or its GPT-2 char), -1 if none

  // Fills token_to_id, special_cache, eog, pieces and joinable once tokens/attrs/ids/merges are set.
  void finalize();
};

}  // namespace wick::llm

#include "pretokenize.hpp"

#include <nlohmann/json.hpp>

#include "unicode.hpp"
#include "wick/error.hpp"

namespace wick::llm {

namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

// llama.cpp's pre-tokenizer regexes per tokenizer.ggml.pre name (src/llama-vocab.cpp, llm_tokenizer_bpe; these
// patterns are the models' own, as in their tokenizer.json, with llama.cpp's (?i:..) rewritten to [sS] classes).
// Each regex splits every piece the previous ones produced. byte_encode: whether llama.cpp maps the pieces to GPT-2
// byte-level form (false for vocabularies of raw UTF-8, e.g. Gemma 4).
struct GgufPreset {
  std::vector<const char*> names;
  std::vector<const char*> regexes;
  bool byte_encode;
};

const std::vector<GgufPreset>& gguf_presets() {
  static const std::vector<GgufPreset> presets = {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"jais-2"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})"},
       true},
      {{"dbrx", "smaug-bpe"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"deepseek-llm"},
       {R"([\r\n])",
        R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)",
        R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N}+)"},
       true},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {R"(\p{N}{1,3})", R"([一-龥぀-ゟ゠-ヿ]+)",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"spark2_5"},
       {R"(\p{N}{1,3})", R"([一-龥぀-ゟ゠-ヿ]+)",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)",
        R"(\p{N})"},
       true},
      {{"youtu"},
       {R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)",
        R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"deepseek-coder"},
       {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N})"},
       true},
      {{"falcon"},
       {R"([\p{P}\$\+<=>\^~\|`]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"([0-9][0-9][0-9])"},
       true},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {R"(\p{N})", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"},
       true},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
        "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion",
        "granite-docling"},
       {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"},
       true},
      {{"stablelm2", "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "hunyuan", "solar-open"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"qwen35"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {R"( ?[^(\s|.,!?…。，、।۔،)]+)"}, true},
      {{"glm4", "chatglm-bpe"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"viking"}, {R"( ?[^(\s|.,!?…。，、।۔،)]+)", R"(\p{N})"}, true},
      {{"tekken"},
       {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"chameleon"},
       {R"(<sentinel:[0-9]+>)", R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)", R"(([\t\n]|    |  ))", R"(\p{N})",
        R"([\p{P}!-/:-@\[-`{-~])", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"},
       true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
       {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"granite-embed-multi-97m"},
       {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"tiny_aya", "cohere2moe"}, {R"(\d{1,3}(?=(?:\d{3})*\b))", R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}, true},
      {{"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}, true},
      {{"bailingmoe", "bailingmoe2", "llada-moe"},
       {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"},
       true},
      {{"seed-coder"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"ufakzeka"}, {R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}, true},
      {{"grok-2"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"laguna"},
       {R"([^\n]+|[\n]+)",
        R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"exaone-moe"},
       {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"},
       true},
      {{"gemma4", "granite-embed-multi-311m"}, {R"([^\n]+|[\n]+)"}, false},
      {{"sarvam-moe"}, {R"([^\n]+|[\n]+)"}, false},
      {{"minicpm5"},
       {R"(\p{N}{1,3})",
        R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"whitespace"}, {R"(\S+)"}, false},
      {{"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"(\p{N}+)", R"([0-9][0-9][0-9])"},
       true},
  };
  return presets;
}

// GPT-2's pattern, used by ByteLevel(use_regex=true) (tokenizers' byte_level.rs).
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::shared_ptr<const Regex> compile_cached_gpt2() {
  static const std::shared_ptr<const Regex> re = std::make_shared<const Regex>(kGpt2Pattern);
  return re;
}

// One part of a piece: [begin, end) bytes, and whether it was a match of the split pattern.
struct Part {
  size_t begin, end;
  bool match;
};

// Hugging Face's NormalizedString::split: the parts of a text of n bytes given the pattern's matches, arranged by
// behavior; empty pieces are dropped by the caller.
std::vector<std::pair<size_t, size_t>> arrange(const Ranges& matches, size_t n, SplitBehavior behavior, bool invert) {
  std::vector<Part> parts;
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev != n) parts.push_back({prev, n, false});
  if (invert)
    for (Part& p : parts) p.match = !p.match;

  std::vector<std::pair<size_t, size_t>> out;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Part& p : parts)
        if (!p.match) out.emplace_back(p.begin, p.end);
      break;
    case SplitBehavior::Isolated:
      for (const Part& p : parts) out.emplace_back(p.begin, p.end);
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.match && !prev_match && !out.empty())
          out.back().second = p.end;
        else
          out.emplace_back(p.begin, p.end);
        prev_match = p.match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !prev_match && !out.empty())
          out.back().first = it->begin;
        else
          out.emplace_back(it->begin, it->end);
        prev_match = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::Contiguous: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.match == prev_match && !out.empty())
          out.back().second = p.end;
        else
          out.emplace_back(p.begin, p.end);
        prev_match = p.match;
      }
      break;
    }
  }
  return out;
}

void emit_parts(const std::string& piece, const std::vector<std::pair<size_t, size_t>>& parts,
                std::vector<std::string>& out) {
  for (const auto& [b, e] : parts)
    if (e > b) out.push_back(piece.substr(b, e - b));
}

// Matches of a code point predicate, one per code point (as tokenizers' `impl Pattern for Fn(char) -> bool`).
template <typename Pred>
Ranges char_matches(const std::string& s, Pred pred) {
  Ranges m;
  for (size_t pos = 0; pos < s.size();) {
    const size_t b = pos;
    const uint32_t cp = utf8_decode(s, pos);
    if (pred(cp)) m.emplace_back(b, pos);
  }
  return m;
}

bool bert_punctuation(uint32_t cp) {
  // tokenizers' bert.rs: ASCII punctuation (which includes $ + < = > ^ ` | ~) or Unicode P*.
  const bool ascii_punct =
      (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  return ascii_punct || is_punctuation(cp);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos || from.empty()) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

void apply_step(const PreTokenizerStep& st, std::vector<std::string>& pieces, bool first_section) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  using K = PreTokenizerStep::Kind;
  for (size_t idx = 0; idx < pieces.size(); ++idx) {
    std::string& piece = pieces[idx];
    switch (st.kind) {
      case K::Split:
        emit_parts(piece, arrange(st.regex->find_all(piece), piece.size(), st.behavior, st.invert), out);
        break;
      case K::ByteLevel: {
        if (st.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
        std::vector<std::string> parts;
        if (st.use_regex) {
          emit_parts(piece,
                     arrange(compile_cached_gpt2()->find_all(piece), piece.size(), SplitBehavior::Isolated, false),
                     parts);
        } else if (!piece.empty()) {
          parts.push_back(piece);
        }
        for (const std::string& p : parts) out.push_back(byte_level_encode(p));
        break;
      }
      case K::Digits:
        emit_parts(piece,
                   arrange(char_matches(piece, [](uint32_t c) { return is_number(c); }), piece.size(),
                           st.individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false),
                   out);
        break;
      case K::Metaspace: {
        std::string s = replace_all(piece, " ", st.replacement);
        const bool starts = s.compare(0, st.replacement.size(), st.replacement) == 0;
        const bool prepend =
            st.prepend_scheme == "always" || (st.prepend_scheme == "first" && first_section && idx == 0);
        if (prepend && !starts) s.insert(0, st.replacement);
        if (!st.split) {
          if (!s.empty()) out.push_back(std::move(s));
          break;
        }
        Ranges m;
        for (size_t p = s.find(st.replacement); p != std::string::npos && !st.replacement.empty();
             p = s.find(st.replacement, p + st.replacement.size()))
          m.emplace_back(p, p + st.replacement.size());
        emit_parts(s, arrange(m, s.size(), SplitBehavior::MergedWithNext, false), out);
        break;
      }
      case K::Whitespace: {
        static const Regex re(R"(\w+|[^\w\s]+)");
        emit_parts(piece, arrange(re.find_all(piece), piece.size(), SplitBehavior::Removed, true), out);
        break;
      }
      case K::WhitespaceSplit:
        emit_parts(piece, arrange(char_matches(piece, is_whitespace), piece.size(), SplitBehavior::Removed, false),
                   out);
        break;
      case K::Punctuation:
        emit_parts(piece, arrange(char_matches(piece, bert_punctuation), piece.size(), st.behavior, false), out);
        break;
      case K::Bert: {
        std::vector<std::string> words;
        emit_parts(piece, arrange(char_matches(piece, is_whitespace), piece.size(), SplitBehavior::Removed, false),
                   words);
        for (const std::string& w : words)
          emit_parts(w, arrange(char_matches(w, bert_punctuation), w.size(), SplitBehavior::Isolated, false), out);
        break;
      }
    }
  }
  pieces = std::move(out);
}

[[noreturn]] void json_error(const std::string& what, const nlohmann::json& j) {
  std::string text = j.dump();
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  throw Error(ErrorKind::Unsupported, "tokenizer.json: " + what + " in " + text);
}

std::string json_type(const nlohmann::json& j, const char* where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    json_error(std::string(where) + " without a string \"type\"", j);
  return j["type"].get<std::string>();
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& dflt) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_string()) json_error(std::string("\"") + key + "\" is not a string", j);
  return j[key].get<std::string>();
}

bool json_bool(const nlohmann::json& j, const char* key, bool dflt) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) json_error(std::string("\"") + key + "\" is not a boolean", j);
  return j[key].get<bool>();
}

// {"String": "..."} or {"Regex": "..."} -> compiled regex.
std::shared_ptr<const Regex> json_pattern(const nlohmann::json& j) {
  if (!j.contains("pattern") || !j["pattern"].is_object()) json_error("missing \"pattern\" object", j);
  const nlohmann::json& p = j["pattern"];
  if (p.contains("String") && p["String"].is_string())
    return std::make_shared<const Regex>(regex_escape(p["String"].get<std::string>()));
  if (p.contains("Regex") && p["Regex"].is_string())
    return std::make_shared<const Regex>(p["Regex"].get<std::string>());
  json_error("\"pattern\" is neither {\"String\": ..} nor {\"Regex\": ..}", j);
}

SplitBehavior json_behavior(const nlohmann::json& j, SplitBehavior dflt) {
  const std::string b = json_string(j, "behavior", "");
  if (b.empty()) return dflt;
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  json_error("unknown split behavior \"" + b +
                 "\" (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)",
             j);
}

void add_pre_steps(const nlohmann::json& j, std::vector<PreTokenizerStep>& steps) {
  if (j.is_null()) return;
  const std::string type = json_type(j, "pre_tokenizer");
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep st;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      json_error("Sequence without a \"pretokenizers\" array", j);
    for (const auto& sub : j["pretokenizers"]) add_pre_steps(sub, steps);
    return;
  } else if (type == "Split") {
    st.kind = K::Split;
    st.regex = json_pattern(j);
    st.behavior = json_behavior(j, SplitBehavior::Isolated);
    st.invert = json_bool(j, "invert", false);
  } else if (type == "ByteLevel") {
    st.kind = K::ByteLevel;
    st.add_prefix_space = json_bool(j, "add_prefix_space", true);
    st.use_regex = json_bool(j, "use_regex", true);
  } else if (type == "Digits") {
    st.kind = K::Digits;
    st.individual_digits = json_bool(j, "individual_digits", false);
  } else if (type == "Metaspace") {
    st.kind = K::Metaspace;
    st.replacement = json_string(j, "replacement", "\xE2\x96\x81");
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      st.prepend_scheme = json_string(j, "prepend_scheme", "always");
      if (st.prepend_scheme != "always" && st.prepend_scheme != "first" && st.prepend_scheme != "never")
        json_error("unknown Metaspace prepend_scheme \"" + st.prepend_scheme + "\" (always, first, never)", j);
    } else {
      st.prepend_scheme = json_bool(j, "add_prefix_space", true) ? "always" : "never";  // older files
    }
    st.split = json_bool(j, "split", true);
  } else if (type == "Whitespace") {
    st.kind = K::Whitespace;
  } else if (type == "WhitespaceSplit") {
    st.kind = K::WhitespaceSplit;
  } else if (type == "Punctuation") {
    st.kind = K::Punctuation;
    st.behavior = json_behavior(j, SplitBehavior::Isolated);
  } else if (type == "BertPreTokenizer") {
    st.kind = K::Bert;
  } else if (type == "CharDelimiterSplit") {
    st.kind = K::Split;
    st.regex = std::make_shared<const Regex>(regex_escape(json_string(j, "delimiter", " ")));
    st.behavior = SplitBehavior::Removed;
  } else {
    json_error("unsupported pre_tokenizer type \"" + type +
                   "\" (supported: Sequence, Split, ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit, "
                   "Punctuation, BertPreTokenizer, CharDelimiterSplit)",
               j);
  }
  steps.push_back(std::move(st));
}

void add_norm_steps(const nlohmann::json& j, std::vector<NormalizerStep>& steps) {
  if (j.is_null()) return;
  const std::string type = json_type(j, "normalizer");
  using K = NormalizerStep::Kind;
  NormalizerStep st;
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      json_error("Sequence without a \"normalizers\" array", j);
    for (const auto& sub : j["normalizers"]) add_norm_steps(sub, steps);
    return;
  } else if (type == "NFC") {
    st.kind = K::NFC;
  } else if (type == "NFD") {
    st.kind = K::NFD;
  } else if (type == "Lowercase") {
    st.kind = K::Lowercase;
  } else if (type == "Prepend") {
    st.kind = K::Prepend;
    st.text = json_string(j, "prepend", "");
  } else if (type == "Replace") {
    st.kind = K::Replace;
    st.regex = json_pattern(j);
    st.text = json_string(j, "content", "");
  } else if (type == "Strip") {
    st.kind = K::Strip;
    st.strip_left = json_bool(j, "strip_left", true);
    st.strip_right = json_bool(j, "strip_right", true);
  } else {
    json_error("unsupported normalizer type \"" + type +
                   "\" (supported: Sequence, NFC, NFD, Lowercase, Prepend, Replace, Strip)",
               j);
  }
  steps.push_back(std::move(st));
}

nlohmann::json parse_json(std::string_view text, const char* what) {
  return parse_json_limited(text, std::string("tokenizer.json: the ") + what);
}

}  // namespace

nlohmann::json parse_json_limited(std::string_view text, const std::string& where) {
  // Brackets inside strings do not count; what is not JSON at all is left to the parser's own message.
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw Error(ErrorKind::Io, where + " nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) +
                                       " levels (at byte " + std::to_string(i) + "); no tokenizer file does");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Io, where + " is not valid JSON: " + e.what());
  }
}

PreTokenizer PreTokenizer::from_gguf(std::string_view pre, bool byte_level) {
  const std::string name = pre.empty() ? "default" : std::string(pre);
  for (const GgufPreset& p : gguf_presets()) {
    for (const char* n : p.names) {
      if (name != n) continue;
      PreTokenizer t;
      t.name = name;
      for (const char* re : p.regexes) {
        PreTokenizerStep st;
        st.kind = PreTokenizerStep::Kind::Split;
        st.regex = std::make_shared<const Regex>(re);
        t.steps.push_back(std::move(st));
      }
      if (byte_level && p.byte_encode) {
        PreTokenizerStep st;
        st.kind = PreTokenizerStep::Kind::ByteLevel;
        st.add_prefix_space = false;
        st.use_regex = false;
        t.steps.push_back(std::move(st));
      }
      return t;
    }
  }
  std::string list;
  for (const std::string& n : gguf_names()) list += (list.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::Unsupported, "tokenizer: GGUF pre-tokenizer tokenizer.ggml.pre = \"" + name +
                                          "\" is not supported by wick (supported: " + list +
                                          "); re-convert the model with a supported tokenizer or add its regexes to "
                                          "src/llm/pretokenize.cpp");
}

std::vector<std::string> PreTokenizer::gguf_names() {
  std::vector<std::string> names;
  for (const GgufPreset& p : gguf_presets())
    for (const char* n : p.names) names.emplace_back(n);
  return names;
}

PreTokenizer PreTokenizer::from_json(std::string_view json_text) {
  return from_json(parse_json(json_text, "pre_tokenizer"));
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer t;
  t.name = "tokenizer.json";
  add_pre_steps(j, t.steps);
  return t;
}

bool PreTokenizer::byte_level() const {
  for (const PreTokenizerStep& s : steps)
    if (s.kind == PreTokenizerStep::Kind::ByteLevel) return true;
  return false;
}

namespace {

// Runs steps[i..] on one piece, depth first, and hands each final piece to f, in the order the steps applied one
// after the other over every piece would give. A long text's pieces are never all in memory at once: 10 MB of
// short words made hundreds of MB of piece lists, and their page faults dominated bench_tokenize at 10 MB.
// is_first: whether this piece is the first of its step's input (Metaspace's prepend_scheme "first").
void run_steps(const PreTokenizer& p, size_t i, std::string piece, bool first_section, bool is_first,
               const std::function<void(std::string_view)>& f) {
  if (i == p.steps.size()) {
    f(piece);
    return;
  }
  const PreTokenizerStep& st = p.steps[i];
  bool first = is_first;
  auto next = [&](std::string child) {
    run_steps(p, i + 1, std::move(child), first_section, first, f);
    first = false;
  };
  if (st.kind == PreTokenizerStep::Kind::Split && st.behavior == SplitBehavior::Isolated && !st.invert) {
    size_t prev = 0;  // the matches and the text between them, each a piece, as they are found
    st.regex->for_each_match(piece, [&](size_t b, size_t e) {
      if (b > prev) next(piece.substr(prev, b - prev));
      if (e > b) next(piece.substr(b, e - b));
      prev = e;
    });
    if (piece.size() > prev) next(piece.substr(prev));
    return;
  }
  std::vector<std::string> one{std::move(piece)};
  apply_step(st, one, first_section && is_first);
  for (std::string& c : one) next(std::move(c));
}

}  // namespace

void pre_tokenize_each(const PreTokenizer& p, std::string_view text, bool first_section,
                       const std::function<void(std::string_view)>& f) {
  if (!text.empty()) run_steps(p, 0, std::string(text), first_section, true, f);
}

std::vector<std::string> pre_tokenize(const PreTokenizer& p, std::string_view text, bool first_section) {
  std::vector<std::string> pieces;
  pre_tokenize_each(p, text, first_section, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

Normalizer Normalizer::from_json(std::string_view json_text) { return from_json(parse_json(json_text, "normalizer")); }

Normalizer Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  add_norm_steps(j, n.steps);
  return n;
}

std::string normalize(const Normalizer& n, std::string_view text) {
  std::string s(text);
  using K = NormalizerStep::Kind;
  for (const NormalizerStep& st : n.steps) {
    switch (st.kind) {
      case K::NFC:
        s = nfc(s);
        break;
      case K::NFD:
        s = nfd(s);
        break;
      case K::Lowercase:
        // tokenizers lowercases each char with Rust's full mapping, which differs from the simple one only for
        // U+0130 (-> "i" U+0307).
        s = to_lower(replace_all(s, "\xC4\xB0", "i\xCC\x87"));
        break;
      case K::Prepend:
        if (!s.empty()) s.insert(0, st.text);  // tokenizers prepends only to non-empty text
        break;
      case K::Replace: {
        std::string out;
        size_t prev = 0;
        for (const auto& [b, e] : st.regex->find_all(s)) {
          out.append(s, prev, b - prev);
          out.append(st.text);
          prev = e;
        }
        out.append(s, prev, std::string::npos);
        s = std::move(out);
        break;
      }
      case K::Strip: {
        size_t b = 0, e = s.size();
        size_t pos = 0;
        if (st.strip_left) {
          while (pos < s.size()) {
            size_t next = pos;
            if (!is_whitespace(utf8_decode(s, next))) break;
            pos = next;
          }
          b = pos;
        }
        if (st.strip_right) {
          // Walk forward, remembering where the last run of whitespace started.
          size_t run = s.size();
          bool in_run = false;
          for (size_t q = b; q < s.size();) {
            const size_t start = q;
            const bool ws = is_whitespace(utf8_decode(s, q));
            if (ws && !in_run) run = start;
            in_run = ws;
          }
          e = in_run ? run : s.size();
        }
        s = s.substr(b, e > b ? e - b : 0);
        break;
      }
    }
  }
  return s;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace wick::llm

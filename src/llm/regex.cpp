// The pre-tokenizer's regular expressions on PCRE2 (regex.hpp: the syntax and where it departs from PCRE2's).
//
// PCRE2 took the place of a hand-written backtracking engine (git show 2188808:src/llm/regex.cpp) by
// measurement, AMD EPYC, 2 cores shared with other jobs, Debian 12, GCC 12 -O2, PCRE2 10.42 JIT, 2026-12-07:
// - the same matches on 232,000 random texts (58 patterns: every llama.cpp list in pretokenize.cpp plus edge
//   cases; letters, digits, marks, CJK, emoji, U+180E, invalid bytes), and every tokenizer test unchanged;
// - llama3's split pattern alone, MB/s of thread CPU time, best of 3, 1 MB: license text 11.0 -> 66.8,
//   spaces 5.9 -> 24.7, newlines 6.0 -> 406, "a " 13.9 -> 41.8, ". " 11.0 -> 38.0, emoji 83 -> 484;
// - whole tokenizer (build/bench_tokenize tests/fixtures/vocab/ggml-vocab-llama-bpe.gguf --sizes 1m,10m,
//   the two builds alternated twice), CPU MB/s old -> new, best of 4: license 9.6 -> 10.9 (1 MB) and
//   5.3 -> 6.9 (10 MB); spaces 4.4 -> 3.9 (within the runs' spread: 3.0-4.4 old, 3.8-3.9 new; a third
//   alternation gave 1.6-1.7 old, 1.9-2.6 new) and 1.2 -> 1.5; newlines 5.0 -> 4.9 and 1.2 -> 1.7; "a "
//   10.7 -> 10.9 and 1.4 -> 2.0; emoji 18.0 -> 18.7 and 8.6 -> 17.0. The rest of a 10 MB run is the BPE merges.
// Oniguruma 6.9.8 (Hugging Face's engine) measured 1.4-2x the old engine on the same patterns, PCRE2 6-7x.
#include "regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "unicode.hpp"
#include "wick/error.hpp"

namespace wick::llm {

namespace {

// The pattern as error messages show it: hostile patterns can be huge.
std::string shown(std::string_view pattern) {
  if (pattern.size() <= 200) return std::string(pattern);
  return std::string(pattern.substr(0, 200)) + "...(" + std::to_string(pattern.size()) + " bytes)";
}

size_t code_points_before(std::string_view s, size_t byte) {
  size_t n = 0;
  for (size_t pos = 0; pos < byte && pos < s.size(); pos += utf8_len_at(s, pos)) ++n;
  return n;
}

[[noreturn]] void syntax_error(std::string_view pattern, size_t byte, const std::string& what) {
  throw Error(ErrorKind::Unsupported, "regex: " + what + " at code point " +
                                          std::to_string(code_points_before(pattern, byte)) + " of pattern \"" +
                                          shown(pattern) + "\" (supported syntax: see src/llm/regex.hpp)");
}

// UTS #18's \w (Oniguruma, Rust, tokenizers), as the members of a class.
constexpr std::string_view kWordItems = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control})";
constexpr size_t kMaxNesting = 200;  // groups and nested classes; PCRE2's own limit is 250

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Rewrites an Oniguruma-meaning pattern into PCRE2 syntax (regex.hpp lists the rewrites). src[k] is the byte of
// the pattern that out[k] came from, so PCRE2's error offsets point into the pattern the user wrote.
class Translator {
 public:
  explicit Translator(std::string_view p) : p_(p) {}

  std::string run(std::vector<size_t>& src) {
    while (i_ < p_.size()) {
      if (class_depth_ > 0) {
        in_class();
      } else {
        outside();
      }
    }
    if (class_depth_ > 0) syntax_error(p_, p_.size(), "missing ']'");
    src = std::move(src_);
    return std::move(out_);
  }

 private:
  void emit(std::string_view s, size_t from) {
    out_.append(s);
    src_.insert(src_.end(), s.size(), from);
  }
  void copy(size_t n) {
    for (size_t k = 0; k < n && i_ < p_.size(); ++k, ++i_) emit(p_.substr(i_, 1), i_);
  }
  char at(size_t k) const { return i_ + k < p_.size() ? p_[i_ + k] : '\0'; }
  void nest(size_t at_byte) {
    if (++depth_ > kMaxNesting) syntax_error(p_, at_byte, "nesting deeper than " + std::to_string(kMaxNesting));
  }

  // An escape both contexts share; returns false where the caller handles it.
  bool common_escape(char c, size_t start) {
    switch (c) {
      case 's':
        emit(R"(\p{White_Space})", start);
        break;
      case 'S':
        emit(R"(\P{White_Space})", start);
        break;
      case 'v':
        emit(R"(\x{0B})", start);
        break;
      case '0':
        emit(R"(\x{00})", start);
        break;
      case 'u': {
        for (size_t k = 2; k < 6; ++k)
          if (!is_hex(at(k))) syntax_error(p_, start, "\\u takes four hex digits");
        emit("\\x{" + std::string(p_.substr(i_ + 2, 4)) + "}", start);
        i_ += 6;
        return true;
      }
      case 'h':
      case 'H':
        syntax_error(p_, start, std::string("\\") + c + " (hex digits in Oniguruma; write [0-9a-fA-F])");
      case 'Q':
      case 'E':
        syntax_error(p_, start, std::string("\\") + c + " (quoting is not Oniguruma syntax; escape each character)");
      case 'p':
      case 'P':
      case 'x':
        // \p{..} and \x{..}: the braces belong to the escape.
        if (at(2) == '{') {
          const size_t close = p_.find('}', i_ + 3);
          if (close == std::string_view::npos) syntax_error(p_, start, std::string("\\") + c + "{ without '}'");
          copy(close + 1 - i_);
          return true;
        }
        copy(2);
        return true;
      default:
        return false;
    }
    i_ += 2;
    return true;
  }

  void outside() {
    const size_t start = i_;
    const char c = p_[i_];
    if (c == '\\') {
      if (i_ + 1 >= p_.size()) syntax_error(p_, start, "'\\' at the end");
      const char e = p_[i_ + 1];
      const std::string word = "[" + std::string(kWordItems) + "]";
      const std::string not_word = "[^" + std::string(kWordItems) + "]";
      if (e == 'w') {
        emit(word, start);
      } else if (e == 'W') {
        emit(not_word, start);
      } else if (e == 'b') {
        emit("(?:(?<=" + word + ")(?!" + word + ")|(?<!" + word + ")(?=" + word + "))", start);
      } else if (e == 'B') {
        emit("(?:(?<=" + word + ")(?=" + word + ")|(?<!" + word + ")(?!" + word + "))", start);
      } else if (common_escape(e, start)) {
        return;
      } else {
        copy(1);
        copy(utf8_len_at(p_, i_));  // the escaped character, whole
        return;
      }
      i_ += 2;
      return;
    }
    if (c == '[') {
      copy(1);
      if (at(0) == '^') copy(1);
      if (at(0) == ']') copy(1);  // a leading ']' is a member
      class_depth_ = 1;
      nest(start);
      return;
    }
    if (c == '(') {
      nest(start);
      if (at(1) == '?') {
        const char k = at(2);
        if (k == 'i' || k == '-' || (k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z')) {
          if (k != 'P') {  // (?P<name>..) is a named group
            size_t j = i_ + 2;
            while (j < p_.size() && p_[j] != ':' && p_[j] != ')') {
              if (p_[j] != 'i' && p_[j] != '-')
                syntax_error(p_, j, std::string("inline flag '") + p_[j] + "' (only i and -i are supported)");
              ++j;
            }
          }
        }
      }
      copy(1);
      return;
    }
    if (c == ')') {
      if (depth_ > 0) --depth_;
      copy(1);
      return;
    }
    if (c == '{' && at(1) == ',') {
      size_t j = i_ + 2;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') ++j;
      if (j > i_ + 2 && j < p_.size() && p_[j] == '}') {
        emit("{0,", start);
        i_ += 2;
        return;
      }
    }
    copy(1);
  }

  void in_class() {
    const size_t start = i_;
    const char c = p_[i_];
    if (c == '\\') {
      if (i_ + 1 >= p_.size()) syntax_error(p_, start, "'\\' at the end");
      const char e = p_[i_ + 1];
      if (e == 'w') {
        emit(kWordItems, start);
      } else if (e == 'W') {
        syntax_error(p_, start, "\\W inside a class (write the class without it, or use \\W outside)");
      } else if (common_escape(e, start)) {
        return;
      } else {
        copy(1);
        copy(utf8_len_at(p_, i_));
        return;
      }
      i_ += 2;
      return;
    }
    if (c == '&' && at(1) == '&') syntax_error(p_, start, "class intersection &&");
    if (c == '[') {
      if (at(1) == ':') syntax_error(p_, start, "POSIX class [:..:] (write the Unicode property, e.g. \\p{L})");
      if (at(1) == '^') syntax_error(p_, start, "a negated class inside a class");
      ++i_;  // a nested class: its members join this one
      ++class_depth_;
      nest(start);
      if (at(0) == ']') copy(1);
      return;
    }
    if (c == ']') {
      --class_depth_;
      --depth_;
      if (class_depth_ == 0) {
        copy(1);
      } else {
        ++i_;
      }
      return;
    }
    copy(utf8_len_at(p_, i_));
  }

  std::string_view p_;
  size_t i_ = 0, class_depth_ = 0, depth_ = 0;
  std::string out_;
  std::vector<size_t> src_;
};

// \w as UTS #18 for the digit-grouping paths below: Alphabetic | M | Nd | Pc | Join_Control. Alphabetic is L, Nl
// and Other_Alphabetic, whose members outside M are the circled / squared / negative Latin letters listed here.
bool is_word(uint32_t c) {
  if (c < 128) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  const Category cat = category(c);
  switch (cat) {
    case Category::Lu:
    case Category::Ll:
    case Category::Lt:
    case Category::Lm:
    case Category::Lo:
    case Category::Nl:
    case Category::Mn:
    case Category::Mc:
    case Category::Me:
    case Category::Nd:
    case Category::Pc:
      return true;
    default:
      break;
  }
  const std::pair<uint32_t, uint32_t> extra[] = {
      {0x200C, 0x200D}, {0x24B6, 0x24E9}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189}};
  for (const auto& r : extra)
    if (c >= r.first && c <= r.second) return true;
  return false;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

// Per-thread match state: compiled code is shared between threads, match data and the JIT stack are not.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchState() {
    if (data == nullptr || ctx == nullptr) throw Error(ErrorKind::OutOfMemory, "regex: out of memory for match data");
    if (jit != nullptr) pcre2_jit_stack_assign(ctx, nullptr, jit);
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit);
    pcre2_match_context_free(ctx);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

MatchState& match_state() {
  thread_local MatchState s;
  return s;
}

}  // namespace

struct Regex::Program {
  std::unique_ptr<pcre2_code, CodeDeleter> code;
  // Digit-grouping patterns whose matching is quadratic in the length of a digit run (each match looks ahead to
  // the run's end); find_all gives their exact matches directly, as llama.cpp hand-codes them too.
  enum class Special { None, DigitGroups, DigitSplitPoints } special = Special::None;
};

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
  std::vector<size_t> src;
  const std::string translated = Translator(pattern).run(src);
  auto prog = std::make_shared<Program>();
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  if (cctx == nullptr) throw Error(ErrorKind::OutOfMemory, "regex: out of memory compiling \"" + shown(pattern) + "\"");
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE err_at = 0;
  prog->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_at, cctx));
  pcre2_compile_context_free(cctx);
  if (!prog->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    const size_t at = err_at < src.size() ? src[err_at] : pattern.size();
    syntax_error(pattern, at, reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(prog->code.get(), PCRE2_JIT_COMPLETE);  // where JIT is unavailable, the interpreter runs
  if (pattern == R"(\d{1,3}(?=(?:\d{3})*\b))") prog->special = Program::Special::DigitGroups;  // tiny_aya
  if (pattern == R"((?=(\d{3})+(?!\d)))") prog->special = Program::Special::DigitSplitPoints;  // superbpe
  prog_ = std::move(prog);
}

namespace {

// The matches of the two Program::Special patterns, run by run of \d (Nd) digits: \d{1,3}(?=(?:\d{3})*\b) needs a
// word boundary where the run ends (inside it there is none), and then groups the run in threes from the right;
// (?=(\d{3})+(?!\d)) matches empty where a positive multiple of three digits remain.
std::vector<std::pair<size_t, size_t>> special_matches(Regex::Program::Special kind, std::string_view text) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offs;
  for (size_t pos = 0; pos < text.size();) {
    offs.push_back(pos);
    cps.push_back(utf8_decode(text, pos));
  }
  offs.push_back(text.size());
  const size_t end = cps.size();
  std::vector<std::pair<size_t, size_t>> out;
  auto digit = [&](size_t k) { return category(cps[k]) == Category::Nd; };
  for (size_t i = 0; i < end;) {
    if (!digit(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < end && digit(j)) ++j;
    if (kind == Regex::Program::Special::DigitGroups) {
      if (j == end || !is_word(cps[j])) {
        size_t p = i, first = (j - i) % 3 == 0 ? 3 : (j - i) % 3;
        out.emplace_back(offs[p], offs[p + first]);
        for (p += first; p < j; p += 3) out.emplace_back(offs[p], offs[p + 3]);
      }
    } else {
      for (size_t p = i; p < j; ++p)
        if ((j - p) % 3 == 0) out.emplace_back(offs[p], offs[p]);
    }
    i = j;
  }
  return out;
}

// text with each byte of an invalid sequence replaced by U+FFFD; at[k] is the offset in text of fixed's byte k
// (and at[fixed.size()] == text.size()).
std::string replace_invalid(std::string_view text, std::vector<size_t>& at) {
  std::string fixed;
  fixed.reserve(text.size() + 16);
  at.clear();
  at.reserve(text.size() + 16);
  for (size_t pos = 0; pos < text.size();) {
    const size_t before = pos;
    const uint32_t cp = utf8_decode(text, pos);
    const size_t len = pos - before;
    if (cp == kReplacementChar && len == 1) {
      fixed.append("\xEF\xBF\xBD");
      at.insert(at.end(), 3, before);
    } else {
      fixed.append(text.substr(before, len));
      for (size_t k = 0; k < len; ++k) at.push_back(before + k);
    }
  }
  at.push_back(text.size());
  return fixed;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  for_each_match(text, [&](size_t b, size_t e) { out.emplace_back(b, e); });
  return out;
}

void Regex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& f) const {
  if (prog_->special != Program::Special::None) {
    for (const auto& [b, e] : special_matches(prog_->special, text)) f(b, e);
    return;
  }
  MatchState& ms = match_state();
  const pcre2_code* code = prog_->code.get();
  std::string fixed;
  std::vector<size_t> at;  // empty unless text had invalid UTF-8
  std::string_view subject = text;
  uint32_t check = 0;  // the first call checks the UTF-8 (PCRE2's own rules); later calls skip it
  size_t pos = 0, last_end = std::string_view::npos;
  uint64_t budget = kStepsBase + kStepsPerByte * static_cast<uint64_t>(text.size());
  while (pos <= subject.size()) {
    int rc;
    uint64_t limit = std::min<uint64_t>(16, budget);
    for (;;) {
      pcre2_set_match_limit(ms.ctx, static_cast<uint32_t>(limit));
      rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), pos, check, ms.data,
                       ms.ctx);
      if (rc != PCRE2_ERROR_MATCHLIMIT || limit >= budget || limit >= UINT32_MAX) break;
      limit = std::min<uint64_t>({limit * 2, budget, UINT32_MAX});
    }
    budget -= limit;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21 && at.empty()) {
      fixed = replace_invalid(text, at);
      subject = fixed;
      continue;  // pos is 0: nothing matched yet
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      const bool limit = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
                         rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT;
      throw Error(ErrorKind::Argument,
                  "regex: " + std::string(limit ? "backtracking limit exceeded" : "match failed") + " (" +
                      reinterpret_cast<const char*>(msg) + ") matching pattern \"" + shown(pattern_) +
                      "\" against a text of " + std::to_string(text.size()) +
                      " bytes" + (limit ? " (catastrophic backtracking; simplify the pattern)" : ""));
    }
    check = PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ms.data);
    const size_t b = ov[0], e = ov[1];
    if (b == e && b == last_end) {  // no empty match where the last one ended: search on from the next character
      if (b >= subject.size()) break;
      pos = b + utf8_len_at(subject, b);
      continue;
    }
    if (at.empty()) {
      f(b, e);
    } else {
      f(at[b], at[e]);
    }
    last_end = e;
    if (e > b) {
      pos = e;
    } else if (b < subject.size()) {
      pos = b + utf8_len_at(subject, b);
    } else {
      break;
    }
  }
}

std::vector<std::pair<size_t, size_t>> find_all(std::string_view pattern, std::string_view text) {
  return Regex(pattern).find_all(text);
}

}  // namespace wick::llm

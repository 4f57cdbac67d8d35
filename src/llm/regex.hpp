#pragma once
// The pre-tokenizer's regular expressions (internal to src/llm): the split patterns of llama.cpp and of Hugging
// Face tokenizer.json files, matched by PCRE2 (UTF and Unicode properties on, JIT where the CPU has it) with the
// meaning Oniguruma gives them (the engine Hugging Face tokenizers runs) where the two engines differ.
//
// Syntax: PCRE2's, with these rewritten before compiling:
//   \w \W \b \B   UTS #18 word characters: Alphabetic, M, Nd, Pc, Join_Control (PCRE2's \w is L, N and '_')
//   \s \S         White_Space (PCRE2's \s also takes U+180E)
//   \v \0 \uHHHH  the code points VT, NUL, U+HHHH (in PCRE2 \v is a class and \u an error)
//   {,m}          {0,m} (PCRE2 10.42 reads it as text)
//   [a[bc]]       a nested class is the union of its members
//   $             the end of the text only; \Z the end or before a final newline
// Errors (wick::Error naming the pattern and the code point), where Oniguruma means something PCRE2 would read
// otherwise without a word: class intersection &&, a negated nested class, \W inside a class, POSIX [:classes:]
// (Oniguruma's are other Unicode sets), \h \H (hex digits in Oniguruma), \Q \E, inline flags other than i.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wick::llm {

class Regex {
 public:
  explicit Regex(std::string_view pattern);  // compiles; wick::Error on bad or unsupported syntax
  const std::string& pattern() const { return pattern_; }

  // Non-overlapping leftmost matches in text, as [begin, end) byte offsets, in order. Empty matches are included
  // (a split at that point), but never at the end of the previous match, and the search always moves forward.
  // Each byte of an invalid UTF-8 sequence is matched as one U+FFFD (a symbol, So) of one byte.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // The same matches, handed to f(begin, end) in order as they are found (no vector of them all).
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& f) const;

  // Backtracking budget per find_all call, in PCRE2's match-limit units: kStepsBase + kStepsPerByte * length.
  // Exceeding it is a wick::Error (catastrophic or quadratic backtracking), never a hang. Each match attempt
  // runs under a limit starting at 16 and doubled until it suffices, and is charged that limit (at most twice
  // what it used), so the budget bounds the whole call; PCRE2 reports no count of its own.
  static constexpr uint64_t kStepsBase = uint64_t{1} << 20;
  static constexpr uint64_t kStepsPerByte = 1024;

  struct Program;  // compiled form (regex.cpp)

 private:
  std::string pattern_;
  std::shared_ptr<const Program> prog_;
};

// Convenience: Regex(pattern).find_all(text).
std::vector<std::pair<size_t, size_t>> find_all(std::string_view pattern, std::string_view text);

}  // namespace wick::llm

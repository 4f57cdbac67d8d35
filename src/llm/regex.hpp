#pragma once
// A small backtracking regex engine over Unicode code points, for the pre-tokenizer patterns of llama.cpp and
// Hugging Face tokenizer.json files (internal to src/llm).
//
// Syntax: literals (UTF-8 in the pattern), escapes \s \S \d \D \w \W \b \B \r \n \t \f \v \0 \xHH \x{H..} \uHHHH and
// escaped punctuation, \p{..} / \P{..} / \pL with general categories (L Lu Ll Lt Lm Lo LC M Mn Mc Me N Nd Nl No
// P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn), classes [..] with negation, ranges, escapes,
// \p and nested classes inside, '.', groups ( ) (?: ) (?i: ) (?-i: ) (?i) (captures match but are not reported),
// alternation |, quantifiers ? * + {n} {n,} {n,m} {,m} (a '{' starting none of them is a literal), greedy, lazy
// (suffix ?) or possessive (suffix +), atomic groups (?> ), lookahead (?= ) (?! ), anchors ^ $ (start / end of
// the text searched, not of lines) \A \z \Z.
// Not supported (wick::Error naming the pattern and the position): lookbehind, backreferences, scripts such as
// \p{Han}, POSIX [:classes:], class intersection &&.
// Semantics follow Oniguruma/Rust with Unicode on: \s is White_Space, \d is Nd, \w is UTS #18's word class
// (Alphabetic, M, Nd, Pc, Join_Control); (?i) compares simple case mappings and simple case folding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wick::llm {

class Regex {
 public:
  explicit Regex(std::string_view pattern);  // parses and compiles; wick::Error on bad or unsupported syntax
  const std::string& pattern() const { return pattern_; }

  // Non-overlapping leftmost matches in text, as [begin, end) byte offsets, in order. Empty matches are included
  // (a split at that point), but never at the end of the previous match, and the search always moves forward.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // The same over code points cps[begin, end): offsets are code point indices into cps. The text outside
  // [begin, end) is invisible (lookahead and $ see end as the end of the text).
  std::vector<std::pair<size_t, size_t>> find_all(const std::vector<uint32_t>& cps, size_t begin, size_t end) const;
  // Whether the whole of cps[begin, end) matches (some path of the pattern, not only the preferred one).
  bool full_match(const std::vector<uint32_t>& cps, size_t begin, size_t end) const;

  // Backtracking budget per find_all call: kStepsBase + kStepsPerChar * length. Exceeding it is a wick::Error
  // (catastrophic backtracking), never a hang.
  static constexpr uint64_t kStepsBase = 1u << 20;
  static constexpr uint64_t kStepsPerChar = 4096;

  struct Program;  // compiled form (regex.cpp)

 private:
  std::string pattern_;
  std::shared_ptr<const Program> prog_;
};

// Convenience: Regex(pattern).find_all(text).
std::vector<std::pair<size_t, size_t>> find_all(std::string_view pattern, std::string_view text);

}  // namespace wick::llm

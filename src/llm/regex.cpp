// The pre-tokenizer's regex engine (regex.hpp: syntax, semantics, the code-point API).
//
// Against the maintained engines, measured by bench/tokenize_regex.cpp (`ninja -C build
// bench_tokenize_regex && build/bench_tokenize_regex --reps 5`, from the repository root; AMD EPYC,
// 2 cores shared with other jobs, Debian 12, GCC 12 -O3, 2026-12-07; MB/s of the thread's CPU time,
// best of 5, over mixed text with 33% non-ASCII bytes):
//
//   pattern  MB   this engine  PCRE2 10.42 JIT (UTF, UCP)  Oniguruma 6.9.8 (UTF-8, Ruby syntax)
//   gpt2      1           8.8                        81.3                                  16.0
//   llama3    1          12.3                        82.4                                  17.5
//   qwen2     1          12.0                        74.9                                  16.2
//   gpt2     10           9.1                        23.0                                  11.7
//   llama3   10          11.0                        28.7                                  13.2
//   qwen2    10           9.7                        25.0                                  11.2
//
// On these three split patterns both libraries give the same matches as this engine on the 138 test
// strings of tests/fixtures/vocab and on 1 MB of the text. Both are faster, so either may replace
// this engine once every tokenizer test (tests/test_llm_pretokenize, _tokenizer, _vocab) passes on
// it unchanged; what such a port must carry over: the code-point API (find_all over a code-point
// range, full_match), the syntax errors this engine reports, \w as UTS #18 (PCRE2 10.42's \w under
// UCP is L, N and '_' only), and Unicode 14 as in unicode_data.cpp (utf8proc 2.8 is Unicode 15).
#include "regex.hpp"

#include <algorithm>
#include <array>

#include "unicode.hpp"
#include "wick/error.hpp"

namespace wick::llm {

namespace {

// One code point matcher: a class, an escape like \s or \p{L}, a literal, or '.'.
struct CharSet {
  bool negate = false;
  bool icase = false;
  bool space = false;       // White_Space
  bool any_but_nl = false;  // '.'
  uint32_t cat_mask = 0;    // bit i: Category i
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::vector<CharSet> subs;        // items matched as they are (\S, \P{L}, nested classes)
  std::array<uint64_t, 2> ascii{};  // match() for code points < 128, filled by finalize()

  bool contains_raw(uint32_t c, Category cat) const {
    if (any_but_nl && c != '\n') return true;
    if (space && is_whitespace(c)) return true;
    if (cat_mask & (1u << static_cast<unsigned>(cat))) return true;
    for (const auto& r : ranges)
      if (c >= r.first && c <= r.second) return true;
    for (const CharSet& s : subs)
      if (s.match_slow(c, cat)) return true;
    return false;
  }
  bool match_slow(uint32_t c, Category cat) const {
    bool in = contains_raw(c, cat);
    if (!in && icase) {
      // Any case variant of c in the set (literals were widened by their own variants when parsed).
      for (const uint32_t v : {to_lower(c), to_upper(c), case_fold(c)}) {
        if (v != c && contains_raw(v, category(v))) {
          in = true;
          break;
        }
      }
    }
    return in != negate;
  }
  bool match(uint32_t c, Category cat) const {
    if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
    return match_slow(c, cat);
  }
  void finalize() {
    for (CharSet& s : subs) s.finalize();
    ascii = {};
    for (uint32_t c = 0; c < 128; ++c)
      if (match_slow(c, category(c))) ascii[c >> 6] |= uint64_t{1} << (c & 63);
  }
};

enum class AssertKind { Begin, End, EndOrFinalNewline, WordBoundary, NotWordBoundary };

struct Node {
  enum Kind { Empty, Set, Concat, Alt, Repeat, LookAhead, Atomic, Assert } kind = Empty;
  int set = -1;
  std::vector<std::unique_ptr<Node>> kids;
  size_t min = 0, max = 0;  // Repeat; max == kInf for unbounded
  enum Mode { Greedy, Lazy } mode = Greedy;
  bool negate = false;  // LookAhead
  AssertKind assert_kind = AssertKind::Begin;
};
constexpr size_t kInf = static_cast<size_t>(-1);
constexpr size_t kMaxRepeat = 1000;

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Empty:
    case Node::LookAhead:
    case Node::Assert:
      return true;
    case Node::Set:
      return false;
    case Node::Concat:
      return std::all_of(n.kids.begin(), n.kids.end(), [](const auto& k) { return nullable(*k); });
    case Node::Alt:
      return std::any_of(n.kids.begin(), n.kids.end(), [](const auto& k) { return nullable(*k); });
    case Node::Repeat:
      return n.min == 0 || nullable(*n.kids[0]);
    case Node::Atomic:
      return nullable(*n.kids[0]);
  }
  return true;
}

}  // namespace

namespace {
// The pattern as error messages show it: hostile patterns can be huge.
std::string shown(std::string_view pattern) {
  if (pattern.size() <= 200) return std::string(pattern);
  return std::string(pattern.substr(0, 200)) + "...(" + std::to_string(pattern.size()) + " bytes)";
}
}  // namespace

enum class Op : uint8_t { Char, Split, Jmp, Match, Assert, Look, NotLook, Atomic, Mark, Check };

struct Inst {
  Op op;
  uint32_t x = 0,
           y = 0;  // Char: set; Split: preferred x, then y; Jmp: x; Look/Atomic: sub-program x; Mark/Check: slot x
  AssertKind assert_kind = AssertKind::Begin;
};

struct Regex::Program {
  std::vector<CharSet> sets;
  std::vector<Inst> code;  // main program at 0; sub-programs (lookahead, atomic) after it, each ending in Match
  uint32_t n_slots = 0;
  // Digit-grouping patterns whose backtracking is quadratic in the length of a digit run; find_all gives their
  // exact matches directly (as llama.cpp hand-codes them too). The compiled code still validates the pattern.
  enum class Special { None, DigitGroups, DigitSplitPoints } special = Special::None;
};

namespace {

// \w as UTS #18 (Oniguruma, Rust, tokenizers): Alphabetic | M | Nd | Pc | Join_Control. Alphabetic is L, Nl and
// Other_Alphabetic, whose members outside M are the circled / squared / negative Latin letters listed here.
const std::pair<uint32_t, uint32_t> kWordExtra[] = {
    {0x200C, 0x200D}, {0x24B6, 0x24E9}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189}};
uint32_t word_mask() {
  static const uint32_t mask = [] {
    uint32_t m = 0;
    for (Category c : {Category::Lu, Category::Ll, Category::Lt, Category::Lm, Category::Lo, Category::Nl, Category::Mn,
                       Category::Mc, Category::Me, Category::Nd, Category::Pc})
      m |= 1u << static_cast<unsigned>(c);
    return m;
  }();
  return mask;
}

// cats holds Cn for ASCII (the sets test ASCII by bitmap), so ASCII is decided here.
bool is_word(uint32_t c, Category cat) {
  if (c < 128) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  if ((word_mask() >> static_cast<unsigned>(cat)) & 1) return true;
  for (const auto& r : kWordExtra)
    if (c >= r.first && c <= r.second) return true;
  return false;
}

class Parser {
 public:
  Parser(std::string_view pattern, Regex::Program& prog)
      : pattern_(pattern), cps_(utf8_to_codepoints(pattern)), prog_(prog) {}

  std::unique_ptr<Node> parse() {
    bool icase = false;
    auto n = parse_alt(icase);
    if (i_ < cps_.size()) fail("unmatched ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::Unsupported, "regex: " + what + " at code point " + std::to_string(i_) + " of pattern \"" +
                                            shown(pattern_) + "\" (supported syntax: see src/llm/regex.hpp)");
  }
  bool at_end() const { return i_ >= cps_.size(); }
  uint32_t peek(size_t k = 0) const { return i_ + k < cps_.size() ? cps_[i_ + k] : 0xFFFFFFFF; }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }

  int add_set(CharSet s) {
    s.finalize();
    prog_.sets.push_back(std::move(s));
    return static_cast<int>(prog_.sets.size() - 1);
  }
  std::unique_ptr<Node> set_node(CharSet s) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Set;
    n->set = add_set(std::move(s));
    return n;
  }

  // A one-code-point set; under (?i) it also holds the literal's own case variants, so that e.g. (?i:ſ) matches
  // 's' (whose variants do not include ſ).
  static CharSet literal(uint32_t c, bool icase) {
    CharSet s;
    s.icase = icase;
    s.ranges.emplace_back(c, c);
    if (icase)
      for (const uint32_t v : {to_lower(c), to_upper(c), case_fold(c)})
        if (v != c) s.ranges.emplace_back(v, v);
    return s;
  }

  std::unique_ptr<Node> parse_alt(bool icase) {
    std::vector<std::unique_ptr<Node>> alts;
    alts.push_back(parse_concat(icase));
    while (eat('|')) alts.push_back(parse_concat(icase));
    if (alts.size() == 1) return std::move(alts[0]);
    auto n = std::make_unique<Node>();
    n->kind = Node::Alt;
    n->kids = std::move(alts);
    return n;
  }

  // icase is shared with later branches of the same group, so an inline (?i) reaches to the group's end.
  std::unique_ptr<Node> parse_concat(bool& icase) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Concat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      // Inline flags (?i) / (?-i) with no group body.
      if (peek() == '(' && peek(1) == '?' && (peek(2) == 'i' || peek(2) == '-')) {
        size_t save = i_;
        i_ += 2;
        bool on = !eat('-');
        if (eat('i') && eat(')')) {
          icase = on;
          continue;
        }
        i_ = save;
      }
      auto atom = parse_atom(icase);
      if (!atom) continue;
      n->kids.push_back(parse_quantifiers(std::move(atom)));
    }
    if (n->kids.size() == 1) return std::move(n->kids[0]);
    return n;
  }

  // Whether cps_[i..] is a {n}, {n,}, {n,m} or {,m} quantifier; any other '{' is a literal (as Oniguruma).
  bool quantifier_at(size_t i) const {
    if (i >= cps_.size() || cps_[i] != '{') return false;
    auto digits = [&](size_t& k) {
      const size_t s = k;
      while (k < cps_.size() && cps_[k] >= '0' && cps_[k] <= '9') ++k;
      return k > s;
    };
    size_t k = i + 1;
    const bool lo = digits(k);
    bool hi = false;
    if (k < cps_.size() && cps_[k] == ',') {
      ++k;
      hi = digits(k);
    }
    return (lo || hi) && k < cps_.size() && cps_[k] == '}';
  }

  bool parse_number(size_t& v) {
    if (!(peek() >= '0' && peek() <= '9')) return false;
    v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 100000) fail("repeat count too large");
      ++i_;
    }
    return true;
  }

  std::unique_ptr<Node> parse_quantifiers(std::unique_ptr<Node> atom) {
    for (;;) {
      size_t mn, mx;
      const size_t start = i_;
      if (eat('?')) {
        mn = 0, mx = 1;
      } else if (eat('*')) {
        mn = 0, mx = kInf;
      } else if (eat('+')) {
        mn = 1, mx = kInf;
      } else if (quantifier_at(i_)) {
        ++i_;
        if (!parse_number(mn)) mn = 0;  // {,m}
        mx = mn;
        if (eat(',')) {
          if (!parse_number(mx)) mx = kInf;
        }
        if (!eat('}')) fail("unterminated {n,m}");
        if (mx != kInf && mx < mn) fail("{n,m} with m < n");
        if ((mx != kInf && mx > kMaxRepeat) || mn > kMaxRepeat)
          fail("repeat count above " + std::to_string(kMaxRepeat));
      } else {
        return atom;
      }
      if (atom->kind == Node::Assert || atom->kind == Node::LookAhead) {
        i_ = start;
        fail("quantifier on an assertion");
      }
      auto r = std::make_unique<Node>();
      r->kind = Node::Repeat;
      r->min = mn;
      r->max = mx;
      r->kids.push_back(std::move(atom));
      if (eat('?')) {
        r->mode = Node::Lazy;
      } else if (eat('+')) {  // possessive: x*+ == (?>x*)
        auto a = std::make_unique<Node>();
        a->kind = Node::Atomic;
        a->kids.push_back(std::move(r));
        r = std::move(a);
      }
      atom = std::move(r);
    }
  }

  std::unique_ptr<Node> assert_node(AssertKind k) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Assert;
    n->assert_kind = k;
    return n;
  }

  std::unique_ptr<Node> parse_atom(bool icase) {
    const uint32_t c = peek();
    if (c == '(') return parse_group(icase);
    if (c == '[') {
      ++i_;
      return set_node(parse_class(icase));
    }
    if (c == '.') {
      ++i_;
      CharSet s;
      s.any_but_nl = true;
      return set_node(std::move(s));
    }
    if (c == '^') {
      ++i_;
      return assert_node(AssertKind::Begin);
    }
    if (c == '$') {
      ++i_;
      return assert_node(AssertKind::End);
    }
    if (c == '*' || c == '+' || c == '?') fail("quantifier with nothing to repeat");
    if (c == '{' && quantifier_at(i_)) fail("'{n}' with nothing to repeat");
    if (c == '\\') {
      ++i_;
      if (at_end()) fail("trailing backslash");
      const uint32_t e = peek();
      switch (e) {
        case 'b':
          ++i_;
          return assert_node(AssertKind::WordBoundary);
        case 'B':
          ++i_;
          return assert_node(AssertKind::NotWordBoundary);
        case 'A':
          ++i_;
          return assert_node(AssertKind::Begin);
        case 'z':
          ++i_;
          return assert_node(AssertKind::End);
        case 'Z':
          ++i_;
          return assert_node(AssertKind::EndOrFinalNewline);
        default:
          break;
      }
      CharSet s = parse_escape(icase);
      return set_node(std::move(s));
    }
    ++i_;
    return set_node(literal(c, icase));
  }

  // Groups and classes nest by recursion: bound the depth so a hostile pattern cannot exhaust the stack.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("nesting deeper than " + std::to_string(kMaxDepth));
    }
    ~DepthGuard() { --p.depth_; }
  };
  static constexpr size_t kMaxDepth = 200;

  std::unique_ptr<Node> parse_group(bool icase) {
    DepthGuard guard(*this);
    const size_t open = i_;
    ++i_;  // '('
    std::unique_ptr<Node> body;
    auto wrap = [&](Node::Kind k, bool negate) {
      auto n = std::make_unique<Node>();
      n->kind = k;
      n->negate = negate;
      n->kids.push_back(parse_alt(icase));
      return n;
    };
    if (eat('?')) {
      if (eat(':')) {
        body = parse_alt(icase);
      } else if (eat('=')) {
        body = wrap(Node::LookAhead, false);
      } else if (eat('!')) {
        body = wrap(Node::LookAhead, true);
      } else if (eat('>')) {
        body = wrap(Node::Atomic, false);
      } else if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
        fail("lookbehind is not supported");
      } else if (peek() == '<' || (peek() == 'P' && peek(1) == '<')) {  // named group: matched, not captured
        eat('P');
        while (!at_end() && peek() != '>') ++i_;
        if (!eat('>')) fail("unterminated group name");
        body = parse_alt(icase);
      } else if (peek() == 'i' || peek() == '-') {
        bool on = !eat('-');
        if (!eat('i')) fail("unsupported inline flag (only i)");
        if (!eat(':')) fail("expected ':' after inline flags");
        body = parse_alt(on);
      } else {
        fail("unsupported group syntax '(?'");
      }
    } else {
      body = parse_alt(icase);  // a capture group; captures are not reported
    }
    if (!eat(')')) {
      i_ = open;
      fail("unterminated group");
    }
    return body;
  }

  uint32_t parse_hex(size_t min_digits, size_t max_digits) {
    uint32_t v = 0;
    size_t n = 0;
    while (n < max_digits) {
      const uint32_t c = peek();
      int d = -1;
      if (c >= '0' && c <= '9')
        d = static_cast<int>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<int>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<int>(c - 'A' + 10);
      if (d < 0) break;
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
      ++n;
    }
    if (n < min_digits) fail("bad hex escape");
    if (v > 0x10FFFF) fail("code point above U+10FFFF");
    return v;
  }

  uint32_t category_mask(const std::string& name) {
    static const std::pair<const char*, const char*> groups[] = {
        {"L", "Lu Ll Lt Lm Lo"},
        {"LC", "Lu Ll Lt"},
        {"L&", "Lu Ll Lt"},
        {"M", "Mn Mc Me"},
        {"N", "Nd Nl No"},
        {"P", "Pc Pd Ps Pe Pi Pf Po"},
        {"S", "Sm Sc Sk So"},
        {"Z", "Zs Zl Zp"},
        {"C", "Cc Cf Cs Co Cn"},
        {"Letter", "Lu Ll Lt Lm Lo"},
        {"Mark", "Mn Mc Me"},
        {"Number", "Nd Nl No"},
        {"Punctuation", "Pc Pd Ps Pe Pi Pf Po"},
        {"Symbol", "Sm Sc Sk So"},
        {"Separator", "Zs Zl Zp"},
        {"Other", "Cc Cf Cs Co Cn"},
    };
    std::string list = name;
    for (const auto& g : groups)
      if (name == g.first) list = g.second;
    uint32_t mask = 0;
    for (size_t p = 0; p < list.size();) {
      size_t q = list.find(' ', p);
      if (q == std::string::npos) q = list.size();
      const std::string one = list.substr(p, q - p);
      bool found = false;
      for (size_t k = 0; k < kCategoryCount; ++k) {
        if (one == category_name(static_cast<Category>(k))) {
          mask |= 1u << k;
          found = true;
        }
      }
      if (!found) fail("unknown Unicode property \\p{" + name + "} (general categories only)");
      p = q + 1;
    }
    return mask;
  }

  // After the backslash. Returns the set of one escape (icase applied to literals).
  CharSet parse_escape(bool icase) {
    const uint32_t e = peek();
    ++i_;
    CharSet s;
    auto lit = [&](uint32_t c) { return literal(c, icase); };
    switch (e) {
      case 's':
        s.space = true;
        return s;
      case 'S':
        s.space = true;
        s.negate = true;
        return s;
      case 'd':
        s.cat_mask = 1u << static_cast<unsigned>(Category::Nd);
        return s;
      case 'D':
        s.cat_mask = 1u << static_cast<unsigned>(Category::Nd);
        s.negate = true;
        return s;
      case 'w':
      case 'W':
        s.cat_mask = word_mask();
        s.ranges.assign(std::begin(kWordExtra), std::end(kWordExtra));
        s.negate = e == 'W';
        return s;
      case 'p':
      case 'P': {
        std::string name;
        if (eat('{')) {
          bool neg = eat('^');
          while (!at_end() && peek() != '}') {
            if (peek() >= 128) fail("bad property name");
            name += static_cast<char>(peek());
            ++i_;
          }
          if (!eat('}')) fail("unterminated \\p{");
          s.negate = neg;
        } else {
          if (at_end() || peek() >= 128) fail("bad \\p");
          name = static_cast<char>(peek());
          ++i_;
        }
        s.cat_mask = category_mask(name);
        if (e == 'P') s.negate = !s.negate;
        return s;
      }
      case 'n':
        return lit('\n');
      case 'r':
        return lit('\r');
      case 't':
        return lit('\t');
      case 'f':
        return lit('\f');
      case 'v':
        return lit('\v');
      case 'a':
        return lit(0x07);
      case 'e':
        return lit(0x1B);
      case '0':
        return lit(0);
      case 'x':
        if (eat('{')) {
          const uint32_t v = parse_hex(1, 6);
          if (!eat('}')) fail("unterminated \\x{");
          return lit(v);
        }
        return lit(parse_hex(2, 2));
      case 'u':
        return lit(parse_hex(4, 4));
      default:
        break;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
      --i_;
      fail(std::string("unsupported escape \\") + static_cast<char>(e));
    }
    return lit(e);  // escaped punctuation or any other non-alphanumeric code point
  }

  // After '['. Reads through the closing ']'.
  CharSet parse_class(bool icase) {
    DepthGuard guard(*this);
    const size_t open = i_ - 1;
    CharSet s;
    s.icase = icase;
    if (eat('^')) s.negate = true;
    bool first = true;
    for (;;) {
      if (at_end()) {
        i_ = open;
        fail("unterminated [ class");
      }
      uint32_t c = peek();
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (c == '[') {
        if (peek(1) == ':') fail("POSIX classes [:name:] are not supported");
        ++i_;
        s.subs.push_back(parse_class(icase));
        continue;
      }
      if (c == '&' && peek(1) == '&') fail("class intersection && is not supported");
      uint32_t lo;
      if (c == '\\') {
        ++i_;
        if (at_end()) fail("trailing backslash");
        const uint32_t e = peek();
        if (e == 'b') {  // backspace inside a class
          ++i_;
          lo = 0x08;
        } else {
          CharSet item = parse_escape(false);
          const bool single = !item.negate && !item.space && item.cat_mask == 0 && item.subs.empty() &&
                              item.ranges.size() == 1 && item.ranges[0].first == item.ranges[0].second;
          if (!single) {
            item.icase = false;  // classes like \p{Lu} are not widened by case folding of the whole set
            s.subs.push_back(std::move(item));
            continue;
          }
          lo = item.ranges[0].first;
        }
      } else {
        ++i_;
        lo = c;
      }
      // A range lo-hi (a '-' before ']' is a literal).
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++i_;
        uint32_t hi = peek();
        if (hi == '\\') {
          ++i_;
          if (at_end()) fail("trailing backslash");
          CharSet item = parse_escape(false);
          if (item.negate || item.space || item.cat_mask != 0 || item.ranges.size() != 1) fail("bad range end");
          hi = item.ranges[0].first;
        } else if (hi == '[') {
          fail("bad range end");
        } else {
          ++i_;
        }
        if (hi < lo) fail("range out of order");
        s.ranges.emplace_back(lo, hi);
      } else {
        s.ranges.emplace_back(lo, lo);
      }
    }
    return s;
  }

  std::string pattern_;
  std::vector<uint32_t> cps_;
  Regex::Program& prog_;
  size_t i_ = 0;
  size_t depth_ = 0;
};

class Compiler {
 public:
  Compiler(Regex::Program& p, std::string_view pattern) : p_(p), pattern_(pattern) {}

  // Emits main program then pending sub-programs.
  void compile(const Node& root) {
    emit(root);
    p_.code.push_back({Op::Match});
    while (!pending_.empty()) {
      auto [node, inst] = pending_.back();
      pending_.pop_back();
      p_.code[inst].x = static_cast<uint32_t>(p_.code.size());
      emit(*node);
      p_.code.push_back({Op::Match});
    }
  }

 private:
  uint32_t here() const { return static_cast<uint32_t>(p_.code.size()); }
  static constexpr size_t kMaxProgram = size_t{1} << 20;
  size_t add(Inst in) {
    if (p_.code.size() >= kMaxProgram)
      throw Error(ErrorKind::Unsupported, "regex: pattern \"" + shown(pattern_) + "\" expands to more than " +
                                              std::to_string(kMaxProgram) +
                                              " instructions (nested repeat counts); simplify it");
    p_.code.push_back(in);
    return p_.code.size() - 1;
  }

  // x* (greedy or lazy), with an empty-iteration guard when x can match empty.
  void star(const Node& x, bool lazy) {
    const size_t split = add({Op::Split});
    const uint32_t body = here();
    const bool guard = nullable(x);
    uint32_t slot = 0;
    if (guard) {
      slot = p_.n_slots++;
      add({Op::Mark, slot});
    }
    emit(x);
    if (guard) add({Op::Check, slot});
    add({Op::Jmp, static_cast<uint32_t>(split)});
    const uint32_t exit = here();
    p_.code[split].x = lazy ? exit : body;
    p_.code[split].y = lazy ? body : exit;
  }

  void emit(const Node& n) {
    switch (n.kind) {
      case Node::Empty:
        return;
      case Node::Set:
        add({Op::Char, static_cast<uint32_t>(n.set)});
        return;
      case Node::Concat:
        for (const auto& k : n.kids) emit(*k);
        return;
      case Node::Alt: {
        std::vector<size_t> jumps;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (i + 1 < n.kids.size()) {
            const size_t split = add({Op::Split});
            p_.code[split].x = here();
            emit(*n.kids[i]);
            jumps.push_back(add({Op::Jmp}));
            p_.code[split].y = here();
          } else {
            emit(*n.kids[i]);
          }
        }
        for (size_t j : jumps) p_.code[j].x = here();
        return;
      }
      case Node::Assert: {
        Inst in{Op::Assert};
        in.assert_kind = n.assert_kind;
        add(in);
        return;
      }
      case Node::LookAhead:
        pending_.emplace_back(n.kids[0].get(), add({n.negate ? Op::NotLook : Op::Look}));
        return;
      case Node::Atomic:
        pending_.emplace_back(n.kids[0].get(), add({Op::Atomic}));
        return;
      case Node::Repeat: {
        const Node& x = *n.kids[0];
        const bool lazy = n.mode == Node::Lazy;
        for (size_t i = 0; i < n.min; ++i) emit(x);
        if (n.max == kInf) {
          star(x, lazy);
        } else {
          std::vector<size_t> splits;
          for (size_t i = n.min; i < n.max; ++i) {
            splits.push_back(add({Op::Split}));
            p_.code[splits.back()].x = here();
            emit(x);
          }
          for (size_t s : splits) {
            p_.code[s].y = here();
            if (lazy) std::swap(p_.code[s].x, p_.code[s].y);
          }
        }
        return;
      }
    }
  }

  Regex::Program& p_;
  std::string_view pattern_;
  std::vector<std::pair<const Node*, size_t>> pending_;
};

// Runs a program over cps[begin, end) (categories precomputed in cats).
class Vm {
 public:
  Vm(const Regex::Program& p, const std::string& pattern, const uint32_t* cps, const Category* cats, size_t begin,
     size_t end, uint64_t step_limit)
      : p_(p),
        pattern_(pattern),
        cps_(cps),
        cats_(cats),
        begin_(begin),
        end_(end),
        limit_(step_limit),
        slots_(p.n_slots, kNoPos) {}

  // Leftmost-first match of the program at pc starting exactly at pos; end position in out.
  // need_end: only a match reaching the end of the text counts (full_match); sub-programs never need it.
  bool run(uint32_t pc0, size_t pos0, size_t& out, bool need_end = false) {
    const size_t base = stack_.size();
    stack_.push_back({pc0, pos0, false});
    while (stack_.size() > base) {
      Frame f = stack_.back();
      stack_.pop_back();
      if (f.restore) {
        slots_[f.pc] = f.pos;
        continue;
      }
      uint32_t pc = f.pc;
      size_t pos = f.pos;
      for (;;) {
        if (++steps_ > limit_) too_many_steps();
        const Inst& in = p_.code[pc];
        bool ok = true;
        switch (in.op) {
          case Op::Char:
            ok = pos < end_ && p_.sets[in.x].match(cps_[pos], cats_[pos]);
            if (ok) ++pos, ++pc;
            break;
          case Op::Split:
            stack_.push_back({in.y, pos, false});
            pc = in.x;
            break;
          case Op::Jmp:
            pc = in.x;
            break;
          case Op::Match:
            if (need_end && pos != end_) {
              ok = false;
              break;
            }
            out = pos;
            stack_.resize(base);  // drops pending alternatives (their slot restores are not needed)
            return true;
          case Op::Assert:
            ok = check_assert(in.assert_kind, pos);
            ++pc;
            break;
          case Op::Look:
          case Op::NotLook: {
            size_t ignored;
            const bool found = run(in.x, pos, ignored);
            ok = found == (in.op == Op::Look);
            ++pc;
            break;
          }
          case Op::Atomic: {
            size_t e;
            ok = run(in.x, pos, e);
            if (ok) pos = e, ++pc;
            break;
          }
          case Op::Mark:
            stack_.push_back({in.x, slots_[in.x], true});
            slots_[in.x] = pos;
            ++pc;
            break;
          case Op::Check:
            ok = slots_[in.x] != pos;  // an iteration that matched nothing ends the loop
            ++pc;
            break;
        }
        if (!ok) break;
      }
    }
    return false;
  }

 private:
  struct Frame {
    uint32_t pc;
    size_t pos;
    bool restore;
  };
  static constexpr size_t kNoPos = static_cast<size_t>(-1);

  [[noreturn]] void too_many_steps() const {
    throw Error(ErrorKind::Argument, "regex: backtracking limit of " + std::to_string(limit_) +
                                         " steps exceeded matching pattern \"" + shown(pattern_) +
                                         "\" against a text of " + std::to_string(end_ - begin_) +
                                         " code points (catastrophic backtracking; simplify the pattern)");
  }

  bool word_at(size_t pos) const { return pos >= begin_ && pos < end_ && is_word(cps_[pos], cats_[pos]); }

  bool check_assert(AssertKind k, size_t pos) const {
    switch (k) {
      case AssertKind::Begin:
        return pos == begin_;
      case AssertKind::End:
        return pos == end_;
      case AssertKind::EndOrFinalNewline:
        return pos == end_ || (pos + 1 == end_ && cps_[pos] == '\n');
      case AssertKind::WordBoundary:
      case AssertKind::NotWordBoundary: {
        const bool b = (pos > begin_ && word_at(pos - 1)) != word_at(pos);
        return b == (k == AssertKind::WordBoundary);
      }
    }
    return false;
  }

  const Regex::Program& p_;
  const std::string& pattern_;
  const uint32_t* cps_;
  const Category* cats_;
  size_t begin_, end_;
  uint64_t limit_;
  uint64_t steps_ = 0;
  std::vector<size_t> slots_;
  std::vector<Frame> stack_;
};

uint64_t step_limit(size_t n) { return Regex::kStepsBase + Regex::kStepsPerChar * static_cast<uint64_t>(n); }

std::vector<Category> categories_of(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::vector<Category> cats(cps.size());
  for (size_t i = begin; i < end; ++i) cats[i] = cps[i] < 128 ? Category::Cn : category(cps[i]);  // ASCII: bitmap
  return cats;
}

}  // namespace

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
  auto prog = std::make_shared<Program>();
  Parser parser(pattern, *prog);
  std::unique_ptr<Node> root = parser.parse();
  Compiler(*prog, pattern).compile(*root);
  if (pattern == R"(\d{1,3}(?=(?:\d{3})*\b))") prog->special = Program::Special::DigitGroups;  // tiny_aya
  if (pattern == R"((?=(\d{3})+(?!\d)))") prog->special = Program::Special::DigitSplitPoints;  // superbpe
  prog_ = std::move(prog);
}

namespace {

// The matches of the two Program::Special patterns over cps[begin, end), run by run of \d (Nd) digits [i, j):
// \d{1,3}(?=(?:\d{3})*\b) needs a word boundary where the run ends (inside it there is none), and then groups
// the run in threes from the right; (?=(\d{3})+(?!\d)) matches empty where a positive multiple of three digits
// remain.
std::vector<std::pair<size_t, size_t>> special_matches(Regex::Program::Special kind, const std::vector<uint32_t>& cps,
                                                       size_t begin, size_t end) {
  std::vector<std::pair<size_t, size_t>> out;
  auto digit = [&](size_t k) { return category(cps[k]) == Category::Nd; };
  for (size_t i = begin; i < end;) {
    if (!digit(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < end && digit(j)) ++j;
    if (kind == Regex::Program::Special::DigitGroups) {
      const bool boundary = j == end || !is_word(cps[j], category(cps[j]));
      if (boundary) {
        size_t p = i, first = (j - i) % 3 == 0 ? 3 : (j - i) % 3;
        out.emplace_back(p, p + first);
        for (p += first; p < j; p += 3) out.emplace_back(p, p + 3);
      }
    } else {
      for (size_t p = i; p < j; ++p)
        if ((j - p) % 3 == 0) out.emplace_back(p, p);
    }
    i = j;
  }
  return out;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::find_all(const std::vector<uint32_t>& cps, size_t begin,
                                                       size_t end) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (begin > end || end > cps.size())
    throw Error(ErrorKind::Index, "regex: find_all range [" + std::to_string(begin) + ", " + std::to_string(end) +
                                      ") outside a text of " + std::to_string(cps.size()) + " code points");
  if (prog_->special != Program::Special::None) return special_matches(prog_->special, cps, begin, end);
  const std::vector<Category> cats = categories_of(cps, begin, end);
  Vm vm(*prog_, pattern_, cps.data(), cats.data(), begin, end, step_limit(end - begin));
  size_t pos = begin;
  size_t last_end = static_cast<size_t>(-1);
  while (pos <= end) {
    size_t e;
    if (vm.run(0, pos, e) && !(e == pos && pos == last_end)) {
      out.emplace_back(pos, e);
      last_end = e;
      pos = e > pos ? e : pos + 1;
    } else {
      ++pos;
    }
  }
  return out;
}

bool Regex::full_match(const std::vector<uint32_t>& cps, size_t begin, size_t end) const {
  const std::vector<Category> cats = categories_of(cps, begin, end);
  Vm vm(*prog_, pattern_, cps.data(), cats.data(), begin, end, step_limit(end - begin));
  size_t e;
  return vm.run(0, begin, e, /*need_end=*/true);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  // Decode keeping each code point's byte offset, so invalid bytes (U+FFFD, one byte each) map back exactly.
  std::vector<uint32_t> cps;
  std::vector<size_t> offs;
  cps.reserve(text.size());
  offs.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    offs.push_back(pos);
    cps.push_back(utf8_decode(text, pos));
  }
  offs.push_back(text.size());
  auto m = find_all(cps, 0, cps.size());
  for (auto& [b, e] : m) b = offs[b], e = offs[e];
  return m;
}

std::vector<std::pair<size_t, size_t>> find_all(std::string_view pattern, std::string_view text) {
  return Regex(pattern).find_all(text);
}

}  // namespace wick::llm

// The regexes and the pre-tokenizers (src/llm/regex.hpp, pretokenize.hpp). Short cases are worked by hand
// from the patterns (the comment says why); the broad check compares every GGUF pre name against
// tests/fixtures/pretokenize.json, written by tests/fixtures/gen_pretokenize.py with Python's third-party `regex`
// module running llama.cpp's own regex lists (read from llama.cpp's source) on llama.cpp's vocab test strings.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/pretokenize.hpp"
#include "llm/regex.hpp"
#include "wick/error.hpp"

using namespace wick::llm;
using Pieces = std::vector<std::string>;
using Spans = std::vector<std::pair<size_t, size_t>>;

namespace {

Pieces gguf(const char* name, std::string_view text) {
  return pre_tokenize(PreTokenizer::from_gguf(name, /*byte_level=*/false), text);
}

Pieces json_pre(const char* json, std::string_view text, bool first = true) {
  return pre_tokenize(PreTokenizer::from_json(json), text, first);
}

// Runs f, expecting a wick::Error whose message contains every needle.
template <typename F>
void expect_error(F f, std::initializer_list<const char*> needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const wick::Error& e) {
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(LlmRegex, LiteralsQuantifiersAlternation) {
  EXPECT_EQ(find_all("a+", "caaab a"), (Spans{{1, 4}, {6, 7}}));
  EXPECT_EQ(find_all("ab|a", "aab"), (Spans{{0, 1}, {1, 3}}));  // leftmost-first, not longest
  EXPECT_EQ(find_all(R"(\p{N}{1,3})", "12345"), (Spans{{0, 3}, {3, 5}}));
  EXPECT_EQ(find_all("a{2}", "aaaaa"), (Spans{{0, 2}, {2, 4}}));
  EXPECT_EQ(find_all("a{2,}", "a aaa"), (Spans{{2, 5}}));
  EXPECT_EQ(find_all("a+?", "aaa"), (Spans{{0, 1}, {1, 2}, {2, 3}}));  // lazy
  EXPECT_EQ(find_all("a++a", "aaa"), Spans{});                         // possessive never gives one back
  EXPECT_EQ(find_all("(?>a*)a", "aaa"), Spans{});                      // atomic group
  EXPECT_EQ(find_all("(?:ab)+", "ababa"), (Spans{{0, 4}}));
  EXPECT_EQ(find_all("colou?r", "color colour"), (Spans{{0, 5}, {6, 12}}));
  EXPECT_EQ(find_all(R"(\.\$\x41\u00e9)", ".$A\xC3\xA9"), (Spans{{0, 5}}));
  EXPECT_EQ(find_all(".", "a\nb"), (Spans{{0, 1}, {2, 3}}));  // '.' skips newlines
}

TEST(LlmRegex, ClassesAndUnicodeProperties) {
  // "héllo 中文 123": h(0) é(1-2) l l o(5) ' '(6) 中(7-9) 文(10-12) ' '(13) 1 2 3(14-16)
  const std::string t = "h\xC3\xA9llo \xE4\xB8\xAD\xE6\x96\x87 123";
  EXPECT_EQ(find_all(R"(\p{L}+)", t), (Spans{{0, 6}, {7, 13}}));
  EXPECT_EQ(find_all(R"(\pN+)", t), (Spans{{14, 17}}));
  EXPECT_EQ(find_all(R"([^\s\p{L}]+)", t), (Spans{{14, 17}}));
  EXPECT_EQ(find_all(R"(\P{L}+)", t), (Spans{{6, 7}, {13, 17}}));
  EXPECT_EQ(find_all(R"(\p{Lu})", "aBcD"), (Spans{{1, 2}, {3, 4}}));
  EXPECT_EQ(find_all("[a-c-]+", "xa-cbz"), (Spans{{1, 5}}));  // a trailing '-' is literal
  EXPECT_EQ(find_all("[^a-c]+", "abxyc"), (Spans{{2, 4}}));
  EXPECT_EQ(find_all(R"([\]\\]+)", "a]\\b"), (Spans{{1, 3}}));
  EXPECT_EQ(find_all(R"(\d+)", "x\xD9\xA3\xD9\xA4 7"), (Spans{{1, 5}, {6, 7}}));  // Arabic-Indic digits are Nd
  EXPECT_EQ(find_all(R"(\w+)", "a_1 \xCC\x81"), (Spans{{0, 3}, {4, 6}}));         // \w takes marks (U+0301)
  // \s is White_Space: NBSP (C2 A0) is in, U+200B (E2 80 8B) is not.
  EXPECT_EQ(find_all(R"(\s)", "\xC2\xA0\xE2\x80\x8B"), (Spans{{0, 2}}));
}

TEST(LlmRegex, CaseInsensitive) {
  EXPECT_EQ(find_all("(?i:ab)", "AB aB xb"), (Spans{{0, 2}, {3, 5}}));
  // An inline (?i) reaches to the end of its group, later branches included (as Perl and Oniguruma).
  EXPECT_EQ(find_all("(?i)'s|x", "'S X x"), (Spans{{0, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(find_all("(?i:a)a", "AA Aa"), (Spans{{3, 5}}));  // the flag ends with its group
  EXPECT_EQ(find_all("(?i:[a-c])+", "AbC d"), (Spans{{0, 3}}));
  EXPECT_EQ(find_all("(?i:\xCF\x83)", "\xCE\xA3"), (Spans{{0, 2}}));  // σ matches Σ
  // Case folding as Oniguruma: U+017F (long s, C5 BF) folds to 's'; U+212A KELVIN SIGN (E2 84 AA) lowers to 'k'.
  EXPECT_EQ(find_all("(?i:'s)", "'\xC5\xBF 'S"), (Spans{{0, 3}, {4, 6}}));
  EXPECT_EQ(find_all("(?i:\xC5\xBF)", "s S"), (Spans{{0, 1}, {2, 3}}));
  EXPECT_EQ(find_all("(?i:[k])", "\xE2\x84\xAA"), (Spans{{0, 3}}));
  EXPECT_EQ(find_all(R"((?i:[\x41-\x43]+))", "abcd"), (Spans{{0, 3}}));
}

TEST(LlmRegex, LookaheadAndAnchors) {
  // \s+(?!\S): "a   b  " -> the run before 'b' gives back its last space; the run at the end is whole.
  EXPECT_EQ(find_all(R"(\s+(?!\S))", "a   b  "), (Spans{{1, 3}, {5, 7}}));
  EXPECT_EQ(find_all("a(?=b)", "ab ac a"), (Spans{{0, 1}}));
  EXPECT_EQ(find_all("a(?!b)", "ab ac a"), (Spans{{3, 4}, {6, 7}}));  // lookahead at the end of the text
  EXPECT_EQ(find_all(R"(\s+$)", "a  b  "), (Spans{{4, 6}}));
  EXPECT_EQ(find_all("^a", "aaa"), (Spans{{0, 1}}));
  // Digits in groups of three from the right: 1234567 -> 1 234 567 (the lookahead needs 3k digits then \b).
  EXPECT_EQ(find_all(R"(\d{1,3}(?=(?:\d{3})*\b))", "1234567"), (Spans{{0, 1}, {1, 4}, {4, 7}}));
  EXPECT_EQ(find_all(R"(\bab)", "ab cab ab"), (Spans{{0, 2}, {7, 9}}));
}

TEST(LlmRegex, DigitGroupingFastPathsEqualTheGeneralEngine) {
  // tiny_aya's and superbpe's patterns take a linear path (the general engine is quadratic on long digit runs);
  // the same patterns spelled with an extra group run through the general engine and must agree.
  const Regex fast_groups(R"(\d{1,3}(?=(?:\d{3})*\b))"), slow_groups(R"((?:\d{1,3})(?=(?:\d{3})*\b))");
  const Regex fast_points(R"((?=(\d{3})+(?!\d)))"), slow_points(R"((?=(?:\d{3})+(?!\d)))");
  const char* alphabet[] = {"1",           "2", "0", "a", " ", "_", ".", "\xD9\xA3" /* Arabic-Indic 3 */,
                            "\xE2\x85\xAB" /* Nl */};
  uint64_t state = 7;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string t;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const size_t len = (state >> 33) % 24;
    for (size_t k = 0; k < len; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      t += alphabet[(state >> 33) % 9];
    }
    ASSERT_EQ(fast_groups.find_all(t), slow_groups.find_all(t)) << t;
    ASSERT_EQ(fast_points.find_all(t), slow_points.find_all(t)) << t;
  }
  EXPECT_EQ(fast_points.find_all("1234567"), (Spans{{1, 1}, {4, 4}}));  // split before 234 and 567
  const std::string digits(300000, '7');  // linear: the general engine would exceed its step budget here
  EXPECT_EQ(fast_groups.find_all(digits).size(), 100000u);
}

TEST(LlmRegex, BraceWithoutCountIsLiteral) {
  EXPECT_EQ(find_all("a{", "a{"), (Spans{{0, 2}}));
  EXPECT_EQ(find_all("{x}", "{x}"), (Spans{{0, 3}}));
  EXPECT_EQ(find_all("a{,2}", "aaa"), (Spans{{0, 2}, {2, 3}}));  // {,m} is {0,m}; no empty match where the last one ended
  EXPECT_EQ(find_all("a{,x}", "a{,x}"), (Spans{{0, 5}}));         // not a count: text
}

TEST(LlmRegex, OnigurumaMeaningWherePcre2Differs) {
  // U+180E MONGOLIAN VOWEL SEPARATOR (E1 A0 8E) is Cf, not White_Space; PCRE2's own \s takes it.
  EXPECT_EQ(find_all(R"(\s+)", " \xE1\xA0\x8E "), (Spans{{0, 1}, {4, 5}}));
  EXPECT_EQ(find_all(R"(\S+)", " \xE1\xA0\x8E "), (Spans{{1, 4}}));
  // \w: marks (U+0301), Nl (U+2165 ROMAN NUMERAL SIX), circled letters (U+24B6) yes; No (U+00B2 superscript two) no.
  EXPECT_EQ(find_all(R"(\w+)", "a\xCC\x81\xE2\x85\xA5\xE2\x92\xB6\xC2\xB2"), (Spans{{0, 9}}));
  EXPECT_EQ(find_all(R"(\W+)", "a\xC2\xB2 b"), (Spans{{1, 4}}));
  EXPECT_EQ(find_all(R"([^\w\s]+)", "ab,\xC2\xB2 c"), (Spans{{2, 5}}));
  // \b between a letter and a combining mark is no boundary (both word characters); PCRE2's \b would split there.
  EXPECT_EQ(find_all(R"(\b)", "e\xCC\x81 x"), (Spans{{0, 0}, {3, 3}, {4, 4}, {5, 5}}));
  EXPECT_EQ(find_all(R"(\B)", "ab"), (Spans{{1, 1}}));
  EXPECT_EQ(find_all(R"(\v|\0|\u00e9)", "\x0B\n\xC3\xA9"), (Spans{{0, 1}, {2, 4}}));
  EXPECT_EQ(find_all(std::string_view("\\0", 2), std::string_view("a\0b", 3)), (Spans{{1, 2}}));
  EXPECT_EQ(find_all("[a[bc]]+", "xabcax"), (Spans{{1, 5}}));  // a nested class joins its parent
  EXPECT_EQ(find_all("a$", "a\na"), (Spans{{2, 3}}));           // $ is the end of the text only
  EXPECT_EQ(find_all(R"(a\Z)", "a\n"), (Spans{{0, 1}}));        // \Z also before a final newline
  // Oniguruma has these too: lookbehind and scripts.
  EXPECT_EQ(find_all("(?<=a)b", "ab cb"), (Spans{{1, 2}}));
  EXPECT_EQ(find_all(R"(\p{Han}+)", "x\xE4\xB8\x80\xE4\xBA\x8Cy"), (Spans{{1, 7}}));
}

TEST(LlmRegex, EmptyMatchesNeverLoop) {
  EXPECT_EQ(find_all("x*", "ab"), (Spans{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(find_all("(a*)*", "aab"), (Spans{{0, 2}, {3, 3}}));  // no empty match where the last one ended
  EXPECT_EQ(find_all("(?:a?)+b", "aab"), (Spans{{0, 3}}));       // a nullable loop body stops on no progress
  EXPECT_EQ(find_all("(?=a)", "aba"), (Spans{{0, 0}, {2, 2}}));
  EXPECT_EQ(find_all("", ""), (Spans{{0, 0}}));
}

TEST(LlmRegex, MalformedUtf8NeverCrashes) {
  // Each invalid byte is one U+FFFD code point of one byte, so offsets stay byte-exact.
  EXPECT_EQ(find_all(R"(\p{L}+)",
                     "\xFF"
                     "ab\xC3"),
            (Spans{{1, 3}}));
  EXPECT_EQ(find_all(".", "\xC3("), (Spans{{0, 1}, {1, 2}}));
  EXPECT_EQ(find_all(R"([^\s\p{L}\p{N}]+)", "a\x80\x80 b"), (Spans{{1, 3}}));  // U+FFFD is So
  const Pieces p = gguf("llama-bpe", "x\xE4\xB8 \xF0\x9F");
  std::string joined;
  for (const auto& s : p) joined += s;
  EXPECT_EQ(joined, "x\xE4\xB8 \xF0\x9F");  // nothing lost or added
}

TEST(LlmRegex, UnsupportedSyntaxIsAnError) {
  // Bad syntax, and syntax whose Oniguruma meaning PCRE2 would read otherwise (regex.hpp).
  for (const char* bad : {"[[:alpha:]]", "{2}", "(ab", R"(\k)", "*a", "[a&&b]", "a)", "[abc", "x{5,2}", "[a[^b]]",
                          R"([\W])", R"(\h)", R"(\Hx)", R"(\Qa\E)", "(?m)a", "(?x:a )", R"(\u12)", "\\"}) {
    expect_error([&] { Regex r(bad); }, {"regex", "pattern", bad});
  }
  expect_error([] { Regex r("ab[a&&b]"); }, {"at code point 4"});  // the position of "&&"
  expect_error([] { Regex r("\xC3\xA9(x"); }, {"at code point 3"});
  // Hostile patterns: deep nesting and repeat counts that multiply are errors, not stack or memory exhaustion.
  expect_error([] { Regex r(std::string(100000, '(') + std::string(100000, ')')); }, {"nesting deeper"});
  expect_error([] { Regex r(std::string(100000, '[')); }, {"nesting deeper"});
  expect_error([] { Regex r("((a{1000}){1000}){1000}"); }, {"regex", "too large"});
}

TEST(LlmRegex, CatastrophicBacktrackingIsAnErrorNotAHang) {
  const std::string text(40, 'a');  // (a|a)*\d on 40 a's without a digit: 2^40 paths
  expect_error([&] { find_all(R"((a|a)*\d)", text); }, {"backtracking limit", R"((a|a)*\d)"});
}

TEST(LlmRegex, LongInputsAreLinear) {
  // One match per run; the budget (4096 steps per code point) would throw long before a quadratic blowup here.
  const std::string spaces(200000, ' '), letters(200000, 'a');
  EXPECT_EQ(find_all(R"(\s+(?!\S)|\s+)", spaces), (Spans{{0, 200000}}));
  EXPECT_EQ(find_all(R"([^\r\n\p{L}\p{N}]?\p{L}+)", letters), (Spans{{0, 200000}}));
}

TEST(LlmPreTokenize, Gpt2) {
  // 's is a contraction; "  123": the first space is left alone by \s+(?!\S) (giving back the space before '1'),
  // then " 123" is ` ?\p{N}+`; "!!" is ` ?[^\s\p{L}\p{N}]+`.
  EXPECT_EQ(gguf("gpt-2", "Hello world's  123!!"), (Pieces{"Hello", " world", "'s", " ", " 123", "!!"}));
  EXPECT_EQ(gguf("mpt", "Hello world's  123!!"), gguf("gpt-2", "Hello world's  123!!"));
}

TEST(LlmPreTokenize, Llama3) {
  // 'VE via '[vV][eE]; " " before digits matches nothing else than \s+; digits in threes; "\n\n" via \s*[\r\n]+.
  EXPECT_EQ(gguf("llama-bpe", "I'VE 12345 apples\n\n"), (Pieces{"I", "'VE", " ", "123", "45", " apples", "\n\n"}));
  // A non-letter, non-digit char joins the letters after it: "(hi" is [^\r\n\p{L}\p{N}]?\p{L}+.
  EXPECT_EQ(gguf("llama3", "(hi) x"), (Pieces{"(hi", ")", " x"}));
  EXPECT_EQ(gguf("dbrx", "I'VE 12345"), gguf("llama-bpe", "I'VE 12345"));
}

TEST(LlmPreTokenize, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(gguf("qwen2", "abc 2024"), (Pieces{"abc", " ", "2", "0", "2", "4"}));
}

TEST(LlmPreTokenize, StarcoderFamilyIsolatesDigitsFirst) {
  // \p{N} first: "x=", "1", "2"; then the GPT-2 regex splits "x=" into "x", "=".
  for (const char* name : {"starcoder", "refact", "command-r", "smollm"})
    EXPECT_EQ(gguf(name, "x=12"), (Pieces{"x", "=", "1", "2"})) << name;
}

TEST(LlmPreTokenize, Falcon) {
  // Punctuation/symbol runs first ("+"), then the GPT-2 regex, then [0-9]{3} inside " 1234" -> " ", "123", "4".
  EXPECT_EQ(gguf("falcon", "a+b 1234"), (Pieces{"a", "+", "b", " ", "123", "4"}));
}

TEST(LlmPreTokenize, Deepseek) {
  // deepseek-coder: [\r\n] first isolates the newline.
  EXPECT_EQ(gguf("deepseek-coder", "a\nb"), (Pieces{"a", "\n", "b"}));
  // deepseek-llm: Latin letters, then CJK run "世界", then digits; the lone space stays between.
  EXPECT_EQ(gguf("deepseek-llm",
                 "Hello \xE4\xB8\x96\xE7\x95\x8C"
                 "123"),
            (Pieces{"Hello", " ", "\xE4\xB8\x96\xE7\x95\x8C", "123"}));
}

TEST(LlmPreTokenize, Gpt4oAndTekkenSplitCamelCase) {
  // Upper* lower+ then an optional contraction: "Hello" | "World's".
  EXPECT_EQ(gguf("gpt-4o", "HelloWorld's 12345"), (Pieces{"Hello", "World's", " ", "123", "45"}));
  EXPECT_EQ(gguf("tekken", "HelloWorld 12"), (Pieces{"Hello", "World", " ", "1", "2"}));
}

TEST(LlmPreTokenize, DefaultAndEmptyName) {
  EXPECT_EQ(gguf("default", "a,b"), (Pieces{"a", ",", "b"}));
  EXPECT_EQ(gguf("", "a,b"), (Pieces{"a", ",", "b"}));  // llama.cpp's fallback
  EXPECT_EQ(gguf("default", ""), Pieces{});
}

TEST(LlmPreTokenize, ByteLevelOutput) {
  const PreTokenizer p = PreTokenizer::from_gguf("gpt-2");
  EXPECT_TRUE(p.byte_level());
  EXPECT_EQ(pre_tokenize(p, "Hi there\n"), (Pieces{"Hi", "\xC4\xA0there", "\xC4\x8A"}));  // Ġthere, Ċ
  EXPECT_FALSE(PreTokenizer::from_gguf("gemma4").byte_level());  // raw UTF-8 vocab, as llama.cpp
}

TEST(LlmPreTokenize, UnknownGgufNameListsSupportedOnes) {
  expect_error([] { PreTokenizer::from_gguf("no-such-pre"); }, {"no-such-pre", "llama-bpe", "qwen2", "tekken"});
}

TEST(LlmPreTokenize, AllGgufNamesMatchTheRegexOracle) {
  std::ifstream f(std::string(WICK_FIXTURES) + "/pretokenize.json");
  ASSERT_TRUE(f) << "missing tests/fixtures/pretokenize.json";
  const nlohmann::json j = nlohmann::json::parse(f);
  const auto& texts = j["texts"];
  size_t checked = 0;
  for (const auto& [name, splits] : j["splits"].items()) {
    const PreTokenizer p = PreTokenizer::from_gguf(name, false);
    ASSERT_EQ(splits.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const Pieces want = splits[i].get<Pieces>();
      EXPECT_EQ(pre_tokenize(p, texts[i].get<std::string>()), want) << name << " on text " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 5000u);
}

TEST(LlmPreTokenize, JsonLlama3Sequence) {
  // Llama 3's tokenizer.json: Split on its regex (with (?i:..)), then ByteLevel without the regex.
  const char* json = R"({"type":"Sequence","pretokenizers":[
    {"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior":"Isolated","invert":false},
    {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})";
  EXPECT_EQ(json_pre(json, "Hello world'S 1234"), (Pieces{"Hello", "\xC4\xA0world", "'S", "\xC4\xA0", "123", "4"}));
  EXPECT_TRUE(PreTokenizer::from_json(json).byte_level());
}

TEST(LlmPreTokenize, JsonByteLevelWithPrefixSpace) {
  // GPT-2's tokenizer.json: ByteLevel(add_prefix_space) splits with its own regex; the prefix space makes "Ġ".
  EXPECT_EQ(json_pre(R"({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true})", "Hello world"),
            (Pieces{"\xC4\xA0Hello", "\xC4\xA0world"}));
  EXPECT_EQ(json_pre(R"({"type":"ByteLevel","add_prefix_space":false})", "Hello world"),
            (Pieces{"Hello", "\xC4\xA0world"}));
}

TEST(LlmPreTokenize, JsonMetaspace) {
  const std::string bar = "\xE2\x96\x81";  // U+2581
  const char* first = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true})";
  EXPECT_EQ(json_pre(first, "Hello world"), (Pieces{bar + "Hello", bar + "world"}));
  EXPECT_EQ(json_pre(first, "Hello world", /*first=*/false), (Pieces{"Hello", bar + "world"}));
  const char* nosplit = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":false})";
  EXPECT_EQ(json_pre(nosplit, "a b"), (Pieces{bar + "a" + bar + "b"}));
  const char* old = R"({"type":"Metaspace","replacement":"▁","add_prefix_space":false})";  // pre-0.19 files
  EXPECT_EQ(json_pre(old, "a b"), (Pieces{"a", bar + "b"}));
}

TEST(LlmPreTokenize, JsonSplitBehaviors) {
  auto split = [](const char* pattern, const char* behavior, bool invert = false) {
    return std::string(R"({"type":"Split","pattern":)") + pattern + R"(,"behavior":")" + behavior + R"(","invert":)" +
           (invert ? "true" : "false") + "}";
  };
  EXPECT_EQ(json_pre(split(R"({"String":" "})", "Removed").c_str(), "a b  c"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(json_pre(split(R"({"String":"-"})", "MergedWithPrevious").c_str(), "a-b-"), (Pieces{"a-", "b-"}));
  EXPECT_EQ(json_pre(split(R"({"String":"-"})", "MergedWithNext").c_str(), "a-b"), (Pieces{"a", "-b"}));
  EXPECT_EQ(json_pre(split(R"({"String":"-"})", "Contiguous").c_str(), "a--b"), (Pieces{"a", "--", "b"}));
  EXPECT_EQ(json_pre(split(R"({"String":"-"})", "Isolated").c_str(), "a--b"), (Pieces{"a", "-", "-", "b"}));
  EXPECT_EQ(json_pre(split(R"({"String":"."})", "Isolated").c_str(), "a.b"), (Pieces{"a", ".", "b"}));  // literal
  EXPECT_EQ(json_pre(split(R"({"Regex":"\\d+"})", "Removed", true).c_str(), "ab12cd3"), (Pieces{"12", "3"}));
}

TEST(LlmPreTokenize, JsonOtherTypes) {
  EXPECT_EQ(json_pre(R"({"type":"Digits","individual_digits":true})", "a123"), (Pieces{"a", "1", "2", "3"}));
  EXPECT_EQ(json_pre(R"({"type":"Digits","individual_digits":false})", "a123b"), (Pieces{"a", "123", "b"}));
  EXPECT_EQ(json_pre(R"({"type":"Whitespace"})", "Hello, world!"), (Pieces{"Hello", ",", "world", "!"}));
  EXPECT_EQ(json_pre(R"({"type":"WhitespaceSplit"})", "Hello, world!"), (Pieces{"Hello,", "world!"}));
  EXPECT_EQ(json_pre(R"({"type":"Punctuation","behavior":"Isolated"})", "a.b"), (Pieces{"a", ".", "b"}));
  EXPECT_EQ(json_pre(R"({"type":"BertPreTokenizer"})", "Hi, you"), (Pieces{"Hi", ",", "you"}));
  EXPECT_EQ(json_pre("null", "as is"), (Pieces{"as is"}));
  expect_error([] { PreTokenizer::from_json(R"({"type":"UnicodeScripts"})"); }, {"UnicodeScripts", "supported"});
  expect_error([] { PreTokenizer::from_json(R"J({"type":"Split","pattern":{"Regex":"[a&&b]"}})J"); }, {"intersection"});
  expect_error([] { PreTokenizer::from_json("{not json"); }, {"not valid JSON"});
}

TEST(LlmNormalize, JsonNormalizers) {
  const std::string bar = "\xE2\x96\x81";
  // Llama 2's tokenizer.json: Prepend "▁" then replace spaces with "▁"; nothing is prepended to empty text.
  const Normalizer spm = Normalizer::from_json(R"({"type":"Sequence","normalizers":[
      {"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]})");
  EXPECT_EQ(normalize(spm, "Hi there"), bar + "Hi" + bar + "there");
  EXPECT_EQ(normalize(spm, ""), "");
  EXPECT_EQ(normalize(Normalizer::from_json(R"({"type":"NFC"})"), "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalize(Normalizer::from_json(R"({"type":"NFD"})"), "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize(Normalizer::from_json(R"({"type":"Lowercase"})"), "\xC4\xB0"), "i\xCC\x87");  // Rust's full İ
  EXPECT_EQ(normalize(Normalizer::from_json(R"({"type":"Lowercase"})"),
                      "\xC3\x80"
                      "B"),
            "\xC3\xA0"
            "b");
  EXPECT_EQ(
      normalize(Normalizer::from_json(R"({"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "})"), "a \t\n b"),
      "a b");
  EXPECT_EQ(normalize(Normalizer::from_json(R"({"type":"Strip","strip_left":true,"strip_right":true})"),
                      " \xE3\x80\x80x y\t "),
            "x y");
  EXPECT_EQ(normalize(Normalizer::from_json(R"({"type":"Strip","strip_left":false,"strip_right":true})"), " x "), " x");
  EXPECT_TRUE(Normalizer::from_json("null").empty());
  expect_error([] { Normalizer::from_json(R"({"type":"NFKC"})"); }, {"NFKC", "supported"});
}

// Unicode layer of the tokenizers (src/llm/unicode.hpp). Expected categories, case mappings, combining classes and
// NFC forms were looked up with Python 3.11's unicodedata (Unicode 14.0.0) when this test was written and pasted
// here as literals; UTF-8 byte values are from RFC 3629; the GPT-2 byte map facts (space -> U+0120 'Ġ',
// newline -> U+010A 'Ċ') are those every byte-level BPE vocab shows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm/unicode.hpp"

using namespace wick::llm;

namespace {
std::vector<uint32_t> cps(std::string_view s) { return utf8_to_codepoints(s); }
std::string u8(std::initializer_list<uint32_t> l) { return codepoints_to_utf8(std::vector<uint32_t>(l)); }
}  // namespace

TEST(LlmUnicode, DecodesValidUtf8) {
  // "aé中🦙": 1, 2, 3 and 4 byte sequences.
  EXPECT_EQ(cps("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{0x61, 0xE9, 0x4E2D, 0x1F999}));
  EXPECT_EQ(cps(""), std::vector<uint32_t>{});
  EXPECT_EQ(utf8_len_at("\xF0\x9F\xA6\x99", 0), 4u);
}

TEST(LlmUnicode, InvalidBytesBecomeReplacementOneByteEach) {
  const uint32_t R = kReplacementChar;
  EXPECT_EQ(cps("\x80"), (std::vector<uint32_t>{R}));                       // lone continuation
  EXPECT_EQ(cps("a\xE4\xB8"), (std::vector<uint32_t>{'a', R, R}));          // truncated at the end
  EXPECT_EQ(cps("\xC0\x80"), (std::vector<uint32_t>{R, R}));                // overlong NUL
  EXPECT_EQ(cps("\xED\xA0\x80"), (std::vector<uint32_t>{R, R, R}));         // UTF-16 surrogate D800
  EXPECT_EQ(cps("\xF5\x80\x80\x80"), (std::vector<uint32_t>{R, R, R, R}));  // above U+10FFFF
  EXPECT_EQ(cps("\xE4"
                "a"),
            (std::vector<uint32_t>{R, 'a'}));  // bad continuation keeps the next char
  // A view that ends inside a sequence must not read the bytes after it.
  const std::string buf = "x\xF0\x9F\xA6\x99";
  EXPECT_EQ(cps(std::string_view(buf).substr(0, 3)), (std::vector<uint32_t>{'x', R, R}));
}

TEST(LlmUnicode, EncodesAndFindsCompletePrefix) {
  EXPECT_EQ(utf8_encode(0xE9), "\xC3\xA9");
  EXPECT_EQ(utf8_encode(0x1F999), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(utf8_encode(0xD800), "\xEF\xBF\xBD");  // surrogates are not encodable: U+FFFD
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\x80"), 3u);  // a stray continuation will never complete: pass it on
  EXPECT_EQ(utf8_complete_prefix("ab\xC0"), 3u);  // C0 starts no valid sequence
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

TEST(LlmUnicode, GeneralCategories) {
  const std::pair<uint32_t, const char*> expected[] = {
      {'A', "Lu"},      {'a', "Ll"},     {0x01C5, "Lt"},   {0x02B0, "Lm"},  {0x4E2D, "Lo"}, {0x0301, "Mn"},
      {0x0903, "Mc"},   {0x20DD, "Me"},  {0x0663, "Nd"},   {0x216B, "Nl"},  {0x00BD, "No"}, {'_', "Pc"},
      {'-', "Pd"},      {'(', "Ps"},     {')', "Pe"},      {0x00AB, "Pi"},  {0x00BB, "Pf"}, {'!', "Po"},
      {'+', "Sm"},      {'$', "Sc"},     {'^', "Sk"},      {0x1F999, "So"}, {' ', "Zs"},    {0x2028, "Zl"},
      {0x2029, "Zp"},   {0x00, "Cc"},    {0x200B, "Cf"},   {0xD800, "Cs"},  {0xE000, "Co"}, {0x0378, "Cn"},
      {0x10FFFF, "Cn"}, {0xF0000, "Co"}, {0x110000, "Cn"},
  };
  for (const auto& [cp, name] : expected) EXPECT_STREQ(category_name(category(cp)), name) << std::hex << cp;
  EXPECT_TRUE(is_letter(0x4E2D));
  EXPECT_TRUE(is_number(0x216B));
  EXPECT_TRUE(is_mark(0x0903));
  EXPECT_TRUE(is_punctuation(0x00AB));
  EXPECT_TRUE(is_symbol('$'));
  EXPECT_FALSE(is_letter('1'));
  EXPECT_STREQ(unicode_version(), "14.0.0");
}

TEST(LlmUnicode, WhiteSpaceIsThePropListSet) {
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    EXPECT_TRUE(is_whitespace(cp)) << std::hex << cp;
  // U+001C..1F are str.isspace() in Python but not White_Space; U+200B (zero width space) is Cf; U+180E left.
  for (uint32_t cp : {0x1Cu, 0x1Fu, 0x200Bu, 0x180Eu, 0x61u, 0x2060u})
    EXPECT_FALSE(is_whitespace(cp)) << std::hex << cp;
}

TEST(LlmUnicode, SimpleLowercase) {
  EXPECT_EQ(to_lower('A'), uint32_t{'a'});
  EXPECT_EQ(to_lower(0x03A3), 0x03C3u);        // Σ -> σ
  EXPECT_EQ(to_lower(0x0130), uint32_t{'i'});  // İ: simple mapping (the full one is i + U+0307)
  EXPECT_EQ(to_lower(0x01C5), 0x01C6u);        // ǅ -> ǆ
  EXPECT_EQ(to_lower(0xFF21), 0xFF41u);        // fullwidth A
  EXPECT_EQ(to_lower(0x10400), 0x10428u);      // Deseret
  EXPECT_EQ(to_lower(0x4E2D), 0x4E2Du);
  EXPECT_EQ(to_lower(std::string("\xC3\x80"
                                 "B\xFF")),
            "\xC3\xA0"
            "b\xFF");  // ÀB -> àb, the invalid byte kept
}

TEST(LlmUnicode, CombiningClasses) {
  EXPECT_EQ(combining_class('a'), 0);
  EXPECT_EQ(combining_class(0x0301), 230);
  EXPECT_EQ(combining_class(0x0323), 220);
  EXPECT_EQ(combining_class(0x093C), 7);
}

TEST(LlmUnicode, Nfc) {
  const std::pair<std::string, std::string> cases[] = {
      {u8({'e', 0x301}), u8({0xE9})},                      // compose
      {u8({0x1100, 0x1161, 0x11A8}), u8({0xAC01})},        // Hangul L V T
      {u8({0xAC00, 0x11A8}), u8({0xAC01})},                // Hangul LV + T
      {u8({0x212B}), u8({0xC5})},                          // singleton ANGSTROM SIGN -> Å
      {u8({0x344}), u8({0x308, 0x301})},                   // non-starter decomposition, excluded
      {u8({'e', 0x302, 0x323}), u8({0x1EC7})},             // reorder (220 before 230), then compose
      {u8({0x958}), u8({0x915, 0x93C})},                   // composition exclusion
      {u8({'a', 0x301, 0x301}), u8({0xE1, 0x301})},        // second acute is blocked
      {u8({0x1E0B, 0x323}), u8({0x1E0D, 0x307})},          // recomposes around the reordered dot below
      {u8({'A', 0x30A, 0x301}), u8({0x1FA})},              // two-step composition
      {u8({'q', 0x307, 0x323}), u8({'q', 0x323, 0x307})},  // reorder only
      {"plain ascii", "plain ascii"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(nfc(in), out);
  EXPECT_EQ(nfd(u8({0x1E0B, 0x323})), u8({'d', 0x323, 0x307}));
  EXPECT_EQ(nfd(u8({0xAC01})), u8({0x1100, 0x1161, 0x11A8}));
}

TEST(LlmUnicode, Gpt2ByteMap) {
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_unicode(0), 0x100u);
  EXPECT_EQ(byte_to_unicode(0x7F), 0x121u);  // the 34th unprintable byte after the 33 of 0x00..0x20
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);  // the last one (soft hyphen)
  EXPECT_EQ(byte_to_unicode('A'), uint32_t{'A'});
  EXPECT_EQ(byte_to_unicode(0xE9), 0xE9u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(unicode_to_byte(' '), -1);
  EXPECT_EQ(unicode_to_byte(0x144), -1);
  EXPECT_EQ(byte_level_encode("Hello world\n"), "Hello\xC4\xA0world\xC4\x8A");
  std::string back;
  EXPECT_TRUE(byte_level_decode("Hello\xC4\xA0world\xC4\x8A", back));
  EXPECT_EQ(back, "Hello world\n");
  // Every byte string (invalid UTF-8 included) survives the round trip.
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string round;
  EXPECT_TRUE(byte_level_decode(byte_level_encode(all), round));
  EXPECT_EQ(round, all);
  std::string bad;
  EXPECT_FALSE(byte_level_decode("a b", bad));  // a raw space is not in the map's image
}

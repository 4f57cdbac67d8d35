#pragma once
// Unicode support for the tokenizers (internal to src/llm): UTF-8 coding, general categories, White_Space, simple
// lowercase, NFC, and GPT-2's byte <-> code point map. Tables come from scripts/gen_unicode_data.py (Python's
// unicodedata; the Unicode version is in unicode_data.cpp's header and unicode_version()).
// Against utf8proc (libutf8proc-dev 2.8.0, Unicode 15.0), one thread, 1 MB of the license text with accents, Hangul
// and combining marks mixed in (AMD EPYC, Debian 12, GCC 12 -O2, 2026-12-07): NFC 31.5 MB/s here, 52.2 there, the
// same output; lowercase 229 MB/s here, 154 there (utf8proc_tolower per code point: it has no string lowercase);
// the same categories, lowercase and combining classes wherever both are assigned (4,489 code points are new in
// Unicode 15). The tables stay: the Lowercase normalizer would be slower, and Debian 12's PCRE2 (regex.cpp) speaks
// Unicode 14 as they do, where utf8proc would call 4,489 code points letters that the split patterns do not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wick::llm {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at s[pos] and advances pos past it. A byte that does not start a valid sequence
// (bad lead, truncated, bad continuation, overlong, surrogate, > U+10FFFF) gives U+FFFD and advances pos by exactly
// one byte, as llama.cpp does. Never reads past s.size(). Precondition: pos < s.size().
uint32_t utf8_decode(std::string_view s, size_t& pos);
// Byte length of the sequence utf8_decode would consume at s[pos] (1 for an invalid byte).
size_t utf8_len_at(std::string_view s, size_t pos);
std::vector<uint32_t> utf8_to_codepoints(std::string_view s);
// Appends cp as UTF-8; cp > U+10FFFF or a surrogate is written as U+FFFD.
void utf8_append(std::string& out, uint32_t cp);
std::string utf8_encode(uint32_t cp);
std::string codepoints_to_utf8(const std::vector<uint32_t>& cps);
// Length of the longest prefix of s that is complete UTF-8 text, i.e. s.size() minus the bytes of a trailing
// sequence that is valid so far but cut short (for streaming decoders).
size_t utf8_complete_prefix(std::string_view s);

// Unicode general category (two-letter value). Cn covers unassigned code points.
enum class Category : uint8_t {
  Cn,
  Lu,
  Ll,
  Lt,
  Lm,
  Lo,
  Mn,
  Mc,
  Me,
  Nd,
  Nl,
  No,
  Pc,
  Pd,
  Ps,
  Pe,
  Pi,
  Pf,
  Po,
  Sm,
  Sc,
  Sk,
  So,
  Zs,
  Zl,
  Zp,
  Cc,
  Cf,
  Cs,
  Co,
};
constexpr size_t kCategoryCount = 30;
Category category(uint32_t cp);
const char* category_name(Category c);  // "Lu", ...
// Major class of a category: 'L', 'M', 'N', 'P', 'S', 'Z' or 'C'.
char category_major(Category c);
inline bool is_letter(uint32_t cp) { return category_major(category(cp)) == 'L'; }
inline bool is_number(uint32_t cp) { return category_major(category(cp)) == 'N'; }
inline bool is_mark(uint32_t cp) { return category_major(category(cp)) == 'M'; }
inline bool is_punctuation(uint32_t cp) { return category_major(category(cp)) == 'P'; }
inline bool is_symbol(uint32_t cp) { return category_major(category(cp)) == 'S'; }
// The White_Space property (PropList.txt): \t-\r, space, U+0085, U+00A0, U+1680, U+2000-200A, U+2028/9, U+202F,
// U+205F, U+3000. This is what \s means in the regexes (Oniguruma / Rust / llama.cpp agree on it).
bool is_whitespace(uint32_t cp);
// Simple (1:1) lowercase mapping from UnicodeData.txt; a code point without one maps to itself.
uint32_t to_lower(uint32_t cp);
std::string to_lower(std::string_view s);  // per code point, simple mapping
// Canonical combining class (0 for starters).
uint8_t combining_class(uint32_t cp);
// Normalization forms (canonical only). Invalid UTF-8 bytes become U+FFFD.
std::string nfc(std::string_view s);
std::string nfd(std::string_view s);
std::vector<uint32_t> nfc(const std::vector<uint32_t>& cps);
std::vector<uint32_t> nfd(const std::vector<uint32_t>& cps);
const char* unicode_version();

// GPT-2 byte-level BPE's map of the 256 byte values onto printable code points (bytes_to_unicode() in GPT-2's
// encoder.py): '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map to themselves, the other 68 bytes to U+0100 + n in
// byte order.
uint32_t byte_to_unicode(uint8_t b);
// Inverse of byte_to_unicode; -1 when cp is not in the map's image.
int unicode_to_byte(uint32_t cp);
// Maps every byte of s through byte_to_unicode and returns the UTF-8 of the result ("Hello world" -> "HelloĠworld").
std::string byte_level_encode(std::string_view s);
// Inverse of byte_level_encode; false (out left partial) when s holds a code point outside the map.
bool byte_level_decode(std::string_view s, std::string& out);

}  // namespace wick::llm

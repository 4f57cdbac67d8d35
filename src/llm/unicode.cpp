#include "unicode.hpp"

#include <algorithm>
#include <array>

#include "unicode_data.hpp"

namespace wick::llm {

namespace {

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Decodes at s[pos]; returns the length (0 when the bytes there are not a valid sequence).
size_t decode_at(std::string_view s, size_t pos, uint32_t& cp) {
  const size_t n = s.size() - pos;
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (excludes overlongs, surrogates, > U+10FFFF)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len) return 0;
  const auto b1 = static_cast<uint8_t>(s[pos + 1]);
  if (b1 < lo || b1 > hi) return 0;
  cp = (cp << 6) | (b1 & 0x3F);
  for (size_t i = 2; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (!is_cont(b)) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  return len;
}

// Hangul syllable constants (Unicode 3.12, conjoining jamo behavior).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Value of a packed (start << 8 | value) change-point table at cp.
uint8_t packed_lookup(const uint32_t* table, size_t size, uint32_t cp) {
  // Last entry whose start <= cp.
  const uint32_t key = (cp << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(table, table + size, key);
  if (it == table) return 0;
  return static_cast<uint8_t>(*(it - 1) & 0xFF);
}

uint32_t case_lookup(const data::CaseRun* runs, size_t size, uint32_t cp) {
  // Runs are sorted by first and do not overlap; find the last run starting at or before cp.
  const data::CaseRun* it =
      std::upper_bound(runs, runs + size, cp, [](uint32_t v, const data::CaseRun& r) { return v < r.first; });
  if (it == runs) return cp;
  const data::CaseRun& r = *(it - 1);
  const uint32_t off = cp - r.first;
  if (off % r.stride != 0 || off / r.stride >= r.count) return cp;
  return static_cast<uint32_t>(static_cast<int64_t>(cp) + r.delta);
}

const data::Decomposition* find_decomp(uint32_t cp) {
  const data::Decomposition* end = data::kDecomp + data::kDecompSize;
  const data::Decomposition* it =
      std::lower_bound(data::kDecomp, end, cp, [](const data::Decomposition& d, uint32_t v) { return d.cp < v; });
  return (it != end && it->cp == cp) ? it : nullptr;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xC0) {  // nothing below U+00C0 decomposes
    out.push_back(cp);
    return;
  }
  const data::Decomposition* d = find_decomp(cp);
  if (d == nullptr) {
    out.push_back(cp);
    return;
  }
  decompose(d->first, out);
  if (d->second != 0) decompose(d->second, out);
}

struct CompositionTable {
  std::vector<std::pair<uint64_t, uint32_t>> pairs;  // (first << 21 | second) -> composite, sorted
  CompositionTable() {
    for (size_t i = 0; i < data::kDecompSize; ++i) {
      const data::Decomposition& d = data::kDecomp[i];
      if (d.composes) pairs.emplace_back((uint64_t{d.first} << 21) | d.second, d.cp);
    }
    std::sort(pairs.begin(), pairs.end());
  }
};

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  static const CompositionTable table;
  const uint64_t key = (uint64_t{a} << 21) | b;
  auto it = std::lower_bound(table.pairs.begin(), table.pairs.end(), std::make_pair(key, uint32_t{0}));
  return (it != table.pairs.end() && it->first == key) ? it->second : 0;
}

struct ByteMaps {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // image is inside [0, 0x144)
  ByteMaps() {
    from_cp.fill(-1);
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : 0x100 + n++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteMaps& byte_maps() {
  static const ByteMaps m;
  return m;
}

}  // namespace

uint32_t utf8_decode(std::string_view s, size_t& pos) {
  uint32_t cp = 0;
  const size_t len = decode_at(s, pos, cp);
  if (len == 0) {
    ++pos;
    return kReplacementChar;
  }
  pos += len;
  return cp;
}

size_t utf8_len_at(std::string_view s, size_t pos) {
  uint32_t cp = 0;
  const size_t len = decode_at(s, pos, cp);
  return len == 0 ? 1 : len;
}

std::vector<uint32_t> utf8_to_codepoints(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(utf8_decode(s, pos));
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

std::string codepoints_to_utf8(const std::vector<uint32_t>& cps) {
  std::string s;
  s.reserve(cps.size());
  for (uint32_t cp : cps) utf8_append(s, cp);
  return s;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last 3 bytes can hold a sequence that is cut short.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if (is_cont(b)) continue;
    size_t need = 0;
    if (b >= 0xC2 && b <= 0xDF)
      need = 2;
    else if (b >= 0xE0 && b <= 0xEF)
      need = 3;
    else if (b >= 0xF0 && b <= 0xF4)
      need = 4;
    if (need > back) {
      // Incomplete only if what is there is a valid start of that sequence.
      std::string padded(s.substr(n - back));
      // Pad with the smallest continuation bytes valid in that position and check it decodes.
      const auto b0 = static_cast<uint8_t>(padded[0]);
      while (padded.size() < need) {
        uint8_t c = 0x80;
        if (padded.size() == 1 && b0 == 0xE0) c = 0xA0;
        if (padded.size() == 1 && b0 == 0xF0) c = 0x90;
        padded += static_cast<char>(c);
      }
      uint32_t cp = 0;
      if (decode_at(padded, 0, cp) == need) return n - back;
    }
    return n;
  }
  return n;
}

Category category(uint32_t cp) {
  if (cp > 0x10FFFF) return Category::Cn;
  return static_cast<Category>(packed_lookup(data::kCategoryRanges, data::kCategoryRangesSize, cp));
}

const char* category_name(Category c) {
  static const char* const names[kCategoryCount] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                                    "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                                    "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
  const auto i = static_cast<size_t>(c);
  return i < kCategoryCount ? names[i] : "??";
}

char category_major(Category c) { return category_name(c)[0]; }

bool is_whitespace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  return case_lookup(data::kLowerRuns, data::kLowerRunsSize, cp);
}

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = utf8_decode(s, pos);
    if (cp == kReplacementChar && pos - start == 1 && static_cast<uint8_t>(s[start]) >= 0x80) {
      out += s[start];  // keep an invalid byte as it is
      continue;
    }
    utf8_append(out, to_lower(cp));
  }
  return out;
}

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300 || cp > 0x10FFFF) return 0;
  return packed_lookup(data::kCccRanges, data::kCccRangesSize, cp);
}

std::vector<uint32_t> nfd(const std::vector<uint32_t>& cps) {
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) decompose(cp, out);
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < out.size();) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(j),
                       [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return out;
}

std::vector<uint32_t> nfc(const std::vector<uint32_t>& cps) {
  const std::vector<uint32_t> d = nfd(cps);
  std::vector<uint32_t> out;
  out.reserve(d.size());
  std::ptrdiff_t starter = -1;  // index in out of the last starter
  int last_cc = 0;              // class of the last character appended after that starter
  for (uint32_t cp : d) {
    const int cc = combining_class(cp);
    if (starter >= 0) {
      const bool adjacent = static_cast<std::ptrdiff_t>(out.size()) - 1 == starter;
      const bool blocked = !adjacent && (last_cc == 0 || last_cc >= cc);
      if (!blocked) {
        const uint32_t c = compose(out[static_cast<size_t>(starter)], cp);
        if (c != 0) {
          out[static_cast<size_t>(starter)] = c;
          continue;
        }
      }
    }
    if (cc == 0) {
      starter = static_cast<std::ptrdiff_t>(out.size());
      last_cc = 0;
    } else {
      last_cc = cc;
    }
    out.push_back(cp);
  }
  return out;
}

namespace {
bool all_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}
}  // namespace

std::string nfc(std::string_view s) {
  if (all_ascii(s)) return std::string(s);
  return codepoints_to_utf8(nfc(utf8_to_codepoints(s)));
}

std::string nfd(std::string_view s) {
  if (all_ascii(s)) return std::string(s);
  return codepoints_to_utf8(nfd(utf8_to_codepoints(s)));
}

const char* unicode_version() { return data::kUnicodeVersion; }

uint32_t byte_to_unicode(uint8_t b) { return byte_maps().to_cp[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 324 ? byte_maps().from_cp[cp] : -1; }

std::string byte_level_encode(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  for (char c : s) utf8_append(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

bool byte_level_decode(std::string_view s, std::string& out) {
  for (size_t pos = 0; pos < s.size();) {
    const int b = unicode_to_byte(utf8_decode(s, pos));
    if (b < 0) return false;
    out += static_cast<char>(b);
  }
  return true;
}

}  // namespace wick::llm

// Pre-tokenizer regex speed and agreement: wick's own engine (src/llm/regex.cpp) against PCRE2 (JIT,
// UTF + UCP) and Oniguruma (UTF-8, Ruby syntax, as Hugging Face tokenizers uses it), on the GPT-2,
// llama3 and qwen2 split patterns of src/llm/pretokenize.cpp.
//
//   bench_tokenize_regex [--mb N ...] [--reps N] [--fixtures DIR]
//
// 1. Agreement: every engine's matches (byte ranges) on each test string of the llama.cpp vocab
//    fixtures (DIR/*.inp, default tests/fixtures/vocab) and on the whole 1 MB text; a mismatch is
//    printed with the first differing match.
// 2. Speed: find_all over N MB (default 1 and 10) of mixed text, best of --reps (default 3), MB/s
//    of this thread's CPU time (the engines run single-threaded; CPU time ignores other jobs).
//    The text cycles through the repository's docs, the fixture strings, and generated words in
//    Latin, Cyrillic, Greek, CJK, Hangul, Arabic, Devanagari, emoji, digits, punctuation and
//    runs of spaces, tabs and newlines (about a quarter of its bytes non-ASCII).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <oniguruma.h>
#include <pcre2.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "llm/regex.hpp"

namespace {

using Matches = std::vector<std::pair<size_t, size_t>>;

struct Pattern {
  const char* name;
  const char* re;
};
// As src/llm/pretokenize.cpp spells them (GPT-2 with the final \s+ its ByteLevel step adds).
const Pattern kPatterns[] = {
    {"gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
    {"llama3",
     R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"qwen2",
     R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
};

// This thread's CPU time: on a shared machine, wall time would measure the other jobs too.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "bench_tokenize_regex: %s\n", m.c_str());
  std::exit(1);
}

// The length of the UTF-8 sequence starting with byte c (1 for a stray byte).
size_t utf8_len(unsigned char c) { return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

struct Engine {
  const char* name;
  std::function<Matches(const std::string&)> find_all;
};

Engine wick_engine(const char* re) {
  auto r = std::make_shared<wick::llm::Regex>(re);
  return {"wick", [r](const std::string& t) { return r->find_all(t); }};
}

Engine pcre2_engine(const char* re) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                                   &off, nullptr);
  if (!code) die(std::string("pcre2_compile failed for ") + re);
  if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) die("pcre2_jit_compile failed");
  std::shared_ptr<pcre2_code> c(code, pcre2_code_free);
  return {"pcre2-jit", [c](const std::string& t) {
            Matches out;
            pcre2_match_data* md = pcre2_match_data_create_from_pattern(c.get(), nullptr);
            const auto* s = reinterpret_cast<PCRE2_SPTR>(t.data());
            size_t pos = 0;
            while (pos <= t.size()) {
              // The text is checked once (below); each later call skips the UTF check.
              const int rc = pcre2_jit_match(c.get(), s, t.size(), pos, pos ? PCRE2_NO_UTF_CHECK : 0, md, nullptr);
              if (rc < 0) break;
              const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
              out.emplace_back(ov[0], ov[1]);
              pos = ov[1] > ov[0] ? ov[1] : ov[1] + (ov[1] < t.size() ? utf8_len(t[ov[1]]) : 1);
            }
            pcre2_match_data_free(md);
            return out;
          }};
}

Engine onig_engine(const char* re) {
  regex_t* reg = nullptr;
  OnigErrorInfo einfo;
  const auto* p = reinterpret_cast<const OnigUChar*>(re);
  if (onig_new(&reg, p, p + std::strlen(re), ONIG_OPTION_CAPTURE_GROUP, ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &einfo) !=
      ONIG_NORMAL)
    die(std::string("onig_new failed for ") + re);
  std::shared_ptr<regex_t> r(reg, onig_free);
  return {"oniguruma", [r](const std::string& t) {
            Matches out;
            OnigRegion* region = onig_region_new();
            const auto* s = reinterpret_cast<const OnigUChar*>(t.data());
            const OnigUChar* end = s + t.size();
            size_t pos = 0;
            while (pos <= t.size()) {
              const int rc = onig_search(r.get(), s, end, s + pos, end, region, ONIG_OPTION_NONE);
              if (rc < 0) break;
              const size_t b = size_t(region->beg[0]), e = size_t(region->end[0]);
              out.emplace_back(b, e);
              pos = e > b ? e : e + (e < t.size() ? utf8_len(t[e]) : 1);
            }
            onig_region_free(region, 1);
            return out;
          }};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> fixture_strings(const std::string& dir) {
  std::vector<std::string> out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".inp") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string s = read_file(f);
    size_t b = 0;
    for (size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + sep.size()) out.push_back(s.substr(b, e - b));
    if (b < s.size()) out.push_back(s.substr(b));
  }
  if (out.empty()) die("no .inp strings under " + dir);
  return out;
}

// Words of several scripts, digits, punctuation and white space, from a fixed seed.
std::string generated_text(size_t bytes) {
  static const char* const kWords[] = {
      "the",        "Hello",      "world's",  "don't",    "I'LL",    "Äpfel",   "naïve", "façade",   "Straße",
      "über",       "нещо",       "Бълга",    "привет",   "Ελλάδα",  "λόγος",   "東京",  "日本語",   "中文字符",
      "한국어",     "안녕하세요", "مرحبا",    "العربية",  "हिन्दी",   "नमस्ते",    "🦙",  "🦙🦙", "😀",
      "3.14159",    "1943",       "12345678", "٣٤٥",      "x²",      "½",       "Ⅻ",     "(foo)",    "[bar]",
      "a+b=c",      "--",         "...",      "!!!",      "«quote»", "“smart”", "—",     "e-mail",   "C++",
      "snake_case", "CamelCase",  "ǅemal",    "ǈubljana", "ſt"};
  static const char* const kSpaces[] = {" ",  " ",    " ",   " ",    "  ",     "\t",
                                        "\n", "\n\n", "   ", "\r\n", "\u3000", "\u00a0"};
  std::mt19937 rng(12345);
  std::string s;
  while (s.size() < bytes) {
    s += kWords[rng() % (sizeof(kWords) / sizeof(*kWords))];
    s += kSpaces[rng() % (sizeof(kSpaces) / sizeof(*kSpaces))];
  }
  return s;
}

// About n bytes of s from byte at, both ends moved back to a code point's start (valid UTF-8 stays valid).
std::string utf8_substr(const std::string& s, size_t at, size_t n) {
  auto start = [&](size_t i) {
    while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    return std::min(i, s.size());
  };
  const size_t b = start(at), e = start(at + n);
  return s.substr(b, e > b ? e - b : 0);
}

// Mixed text of about `bytes` bytes, valid UTF-8.
std::string corpus(size_t bytes, const std::vector<std::string>& fixtures) {
  std::string docs;
  for (const char* f : {"README.md", "docs/ARCHITECTURE.md", "docs/performance.md", "bench/README.md"})
    if (std::filesystem::exists(f)) docs += read_file(f);
  std::string fx;
  for (const auto& s : fixtures) fx += s + "\n";
  const std::string gen = generated_text(64 << 10);
  std::string out;
  for (size_t i = 0; out.size() < bytes; ++i) {
    out += utf8_substr(docs, (i * 4096) % std::max<size_t>(docs.size(), 1), 4096);
    out += fx;
    out += utf8_substr(gen, (i * 8192) % gen.size(), 8192);
  }
  return utf8_substr(out, 0, bytes);
}

// Match i as [begin,end) "text", bytes outside printable ASCII as \xHH.
std::string show(const std::string& t, const Matches& m, size_t i) {
  if (i >= m.size()) return "(none)";
  char head[64];  // (snprintf, not operator+: GCC 12 -O3 reports a false -Wrestrict there)
  std::snprintf(head, sizeof(head), "[%zu,%zu) \"", m[i].first, m[i].second);
  std::string s = head;
  for (size_t j = m[i].first; j < std::min(m[i].second, m[i].first + 24); ++j) {
    const auto c = static_cast<unsigned char>(t[j]);
    char buf[8];
    std::snprintf(buf, sizeof(buf), c >= 0x20 && c < 0x7F ? "%c" : "\\x%02X", c);
    s += buf;
  }
  return s + "\"";
}

// The first index where a and b differ, or npos.
size_t first_difference(const Matches& a, const Matches& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    if (i >= a.size() || i >= b.size() || a[i] != b[i]) return i;
  return std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> mbs;
  int reps = 3;
  std::string dir = "tests/fixtures/vocab";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc)
      mbs.push_back(size_t(std::atoi(argv[++i])));
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--fixtures" && i + 1 < argc)
      dir = argv[++i];
    else
      die("usage: bench_tokenize_regex [--mb N ...] [--reps N] [--fixtures DIR] (run from the repository root)");
  }
  if (mbs.empty()) mbs = {1, 10};
  onig_initialize(std::array<OnigEncoding, 1>{ONIG_ENCODING_UTF8}.data(), 1);

  const std::vector<std::string> fixtures = fixture_strings(dir);
  const std::string one_mb = corpus(1 << 20, fixtures);
  size_t non_ascii = 0;
  for (unsigned char c : one_mb) non_ascii += c >= 0x80;
  std::printf("text: %zu fixture strings; 1 MB of mixed text has %.0f%% non-ASCII bytes\n\n", fixtures.size(),
              100.0 * double(non_ascii) / double(one_mb.size()));

  std::printf("agreement with wick (matches as byte ranges)\n");
  for (const Pattern& p : kPatterns) {
    std::vector<Engine> engines = {wick_engine(p.re), pcre2_engine(p.re), onig_engine(p.re)};
    for (size_t e = 1; e < engines.size(); ++e) {
      size_t bad = 0;
      std::string first;
      for (const std::string& s : fixtures) {
        const Matches a = engines[0].find_all(s), b = engines[e].find_all(s);
        const size_t d = first_difference(a, b);
        if (d != std::string::npos && bad++ == 0)
          first = "\n    e.g. on \"" + s.substr(0, 40) + "\": wick " + show(s, a, d) + ", " + engines[e].name + " " +
                  show(s, b, d);
      }
      const Matches a = engines[0].find_all(one_mb), b = engines[e].find_all(one_mb);
      const size_t d = first_difference(a, b);
      if (d != std::string::npos)
        first += "\n    on the 1 MB text at match " + std::to_string(d) + ": wick " + show(one_mb, a, d) + ", " +
                 engines[e].name + " " + show(one_mb, b, d);
      std::printf("  %-7s %-10s fixtures: %zu of %zu differ; 1 MB text: %s (%zu matches)%s\n", p.name, engines[e].name,
                  bad, fixtures.size(), d == std::string::npos ? "same" : "differs", a.size(), first.c_str());
    }
  }

  std::printf("\nfind_all speed, MB/s (best of %d)\n%-8s %6s %10s %10s %10s\n", reps, "pattern", "MB", "wick",
              "pcre2-jit", "oniguruma");
  for (size_t mb : mbs) {
    const std::string text = mb == 1 ? one_mb : corpus(mb << 20, fixtures);
    for (const Pattern& p : kPatterns) {
      std::printf("%-8s %6zu", p.name, mb);
      for (const Engine& e : {wick_engine(p.re), pcre2_engine(p.re), onig_engine(p.re)}) {
        double best = 1e30;
        size_t n = 0;
        for (int r = 0; r < reps; ++r) {
          const double t0 = cpu_seconds();
          n = e.find_all(text).size();
          best = std::min(best, cpu_seconds() - t0);
        }
        (void)n;
        std::printf(" %10.1f", double(text.size()) / double(1 << 20) / best);
      }
      std::printf("\n");
    }
  }
  onig_end();
  return 0;
}

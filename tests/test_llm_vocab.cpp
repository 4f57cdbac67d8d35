// Parity with llama.cpp's tokenizer test data (tests/fixtures/vocab, from llama.cpp's models/): every
// case of ggml-vocab-*.gguf.inp must encode to exactly the ids of .out, run as llama.cpp's
// tests/test-tokenizer-0.cpp runs them (add_special = false, parse_special = false). The .out ids were
// written by llama.cpp's test-tokenizer-0.py from the Hugging Face tokenizers.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "wick/error.hpp"
#include "wick/llm/tokenizer.hpp"

using wick::llm::Tokenizer;

namespace {

const std::string kDir = std::string(WICK_FIXTURES) + "/vocab/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// As test-tokenizer-0.cpp's read_tests: inputs split on "\n__ggml_vocab_test__\n", one .out line each.
std::vector<Case> read_cases(const std::string& inp, const std::string& outp) {
  const std::string vocab = outp;
  const std::string raw = slurp(kDir + inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(slurp(kDir + outp));
  std::vector<Case> cases;
  std::string line;
  size_t i = 0;
  while (std::getline(out, line)) {
    EXPECT_LT(i, inputs.size()) << vocab << ": more .out lines than inputs";
    if (i >= inputs.size()) break;
    Case c{inputs[i++], {}};
    std::istringstream ls(line);
    int32_t id;
    while (ls >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), inputs.size()) << vocab << ": input and output files have different numbers of tests";
  return cases;
}

std::vector<Case> read_cases(const std::string& vocab) { return read_cases(vocab + ".inp", vocab + ".out"); }

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

class VocabParity : public ::testing::TestWithParam<std::string> {};

void expect_llama_ids(const Tokenizer& tok, const std::string& vocab, const std::vector<Case>& cases) {
  size_t failed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<int32_t> got = tok.encode(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
    if (got != cases[i].ids) {
      ++failed;
      ADD_FAILURE() << vocab << " case " << i << " '" << cases[i].text << "'\n  expected: " << join(cases[i].ids)
                    << "\n  got:      " << join(got);
    }
  }
  EXPECT_EQ(failed, 0u) << "of " << cases.size() << " cases";
}

TEST_P(VocabParity, EncodesLikeLlamaCpp) {
  const std::string vocab = GetParam();
  Tokenizer tok = Tokenizer::load(kDir + vocab);
  std::vector<Case> cases = read_cases(vocab);
  ASSERT_GT(cases.size(), 10u);
  expect_llama_ids(tok, vocab, cases);
}

// Pieces of hundreds to thousands of characters (runs of one character or pattern), which the tokenizer merges
// with its bucketed queue instead of a heap: llama-tokenize's ids, written by gen_long_runs.sh.
TEST_P(VocabParity, LongRunsLikeLlamaCpp) {
  const std::string vocab = GetParam();
  Tokenizer tok = Tokenizer::load(kDir + vocab);
  std::vector<Case> cases = read_cases("long-runs.inp", "long-runs." + vocab.substr(0, vocab.size() - 5) + ".out");
  ASSERT_EQ(cases.size(), 24u);
  expect_llama_ids(tok, vocab, cases);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, VocabParity,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf",
                                           "ggml-vocab-phi-3.gguf", "ggml-vocab-qwen2.gguf"),
                         [](const auto& info) {
                           std::string n = info.param.substr(11, info.param.size() - 16);  // "ggml-vocab-" ... ".gguf"
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// llama.cpp's tests/test-tokenizer-1-spm.cpp: every token's text, re-encoded (parse_special) and decoded,
// gives that text back; so does every code point (bar surrogates, the unassigned planes 4-14 and U+2581).
TEST(VocabRoundTrip, LlamaSpmEveryTokenAndCodePoint) {
  Tokenizer tok = Tokenizer::load(kDir + "ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(tok.vocab_size(), 32000u);
  for (int32_t i = 0; i < static_cast<int32_t>(tok.vocab_size()); ++i) {
    std::string s = tok.decode({i});
    std::string back = tok.decode(tok.encode(s, false, true));
    ASSERT_EQ(back, s) << "token " << i;
  }
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x40000 && cp <= 0xE0000) || cp == 0x2581) continue;
    std::string s = utf8(cp);
    ASSERT_EQ(tok.decode(tok.encode(s, false, true)), s) << "code point " << cp;
  }
}

// Byte-level BPE cannot lose bytes: any code point round-trips (qwen2 does not clean up spaces).
TEST(VocabRoundTrip, Qwen2CodePoints) {
  Tokenizer tok = Tokenizer::load(kDir + "ggml-vocab-qwen2.gguf");
  for (uint32_t cp = 0; cp < 0x110000; cp += (cp < 0x10000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s = utf8(cp);
    ASSERT_EQ(tok.decode(tok.encode(s, false, false)), s) << "code point " << cp;
  }
}

// Arbitrary bytes (invalid UTF-8 included) never crash and come back exactly: SPM falls back to <0xXX>
// tokens, byte-level BPE maps every byte. Left out for SPM: 0xE2 (E2 96 81 is U+2581, which decodes to a
// space by design) and the space (escaped to E2 96 81 before splitting, so a truncated sequence in front
// swallows part of it: llama.cpp's SPM does the same). llama-bpe cleans up spaces on decode.
// llama.cpp's rule for invalid UTF-8 before BPE pre-tokenization (unicode_cpts_from_utf8): a lead byte
// followed by its continuation bytes is one character, an overlong one written back the short way
// (llama-tokenize gives "/" for C0 AF); any other byte becomes U+FFFD.
std::string llamacpp_replace_invalid(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (c < 0x80)
      n = 1;
    else if ((c & 0xE0) == 0xC0)
      n = 2;
    else if ((c & 0xF0) == 0xE0)
      n = 3;
    else if ((c & 0xF8) == 0xF0)
      n = 4;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      uint32_t cp = n == 1 ? c : c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      if (n == 2 && cp < 0x80) {
        out += static_cast<char>(cp);
      } else if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x800)) {
        out += static_cast<char>(cp < 0x80 ? cp : 0xC0 | (cp >> 6));
        if (cp >= 0x80) out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (n == 4 && cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out.append(s, i, n);
      }
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Invalid UTF-8 through a byte-level BPE vocabulary: each invalid byte is U+FFFD, as llama.cpp tokenizes it.
TEST(VocabInvalidUtf8, ReplacedAsLlamaCpp) {
  Tokenizer tok = Tokenizer::load(kDir + "ggml-vocab-qwen2.gguf");
  // llama.cpp's llama-tokenize on this vocabulary gives [64, 5691, 65] for "a\xffb" (5691: U+FFFD).
  EXPECT_EQ(tok.encode("a\xff"
                       "b",
                       false),
            (std::vector<int32_t>{64, 5691, 65}));
  EXPECT_EQ(tok.encode("a\xff"
                       "b",
                       false),
            tok.encode("a\xEF\xBF\xBD"
                       "b",
                       false));
  // A truncated sequence is one U+FFFD per byte; a stray continuation byte is one too.
  EXPECT_EQ(tok.encode("a\xe2\x96", false), tok.encode("a\xEF\xBF\xBD\xEF\xBF\xBD", false));
  EXPECT_EQ(tok.encode("\x80x\xc3", false), tok.encode("\xEF\xBF\xBDx\xEF\xBF\xBD", false));
  EXPECT_EQ(tok.decode(tok.encode("a\xff"
                                  "b",
                                  false)),
            "a\xEF\xBF\xBD"
            "b");
  // SentencePiece keeps the bytes (byte fallback), as llama.cpp's SPM tokenizer does.
  Tokenizer spm = Tokenizer::load(kDir + "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm.decode(spm.encode("a\xff"
                                  "b",
                                  false)),
            "a\xff"
            "b");
}

// SentencePiece on invalid UTF-8 takes as many bytes as the lead byte's high four bits say (0xF8-0xFF: four),
// then falls back to bytes where that is no token. Expected ids: llama.cpp's llama-tokenize --ids on
// ggml-vocab-llama-spm.gguf, on each text as a file (bench/tokenize_vs_llamacpp.sh runs the same comparison).
TEST(VocabInvalidUtf8, SentencePieceSplitsAsLlamaCpp) {
  Tokenizer spm = Tokenizer::load(kDir + "ggml-vocab-llama-spm.gguf");
  const std::pair<std::string, std::vector<int32_t>> cases[] = {
      {"a\xff"
       "b c",
       {1, 263, 258, 101, 229, 153, 132, 29883}},
      {"x\xf8"
       "yz\xfe",
       {1, 921, 251, 124, 125, 257}},
      {"\xe4\xb8 q", {1, 29871, 231, 187, 229, 153, 132, 29939}},
      {"ab\xc3", {1, 633, 198}},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(spm.encode(text, true), want) << text;
  // Byte-level BPE: overlong forms are the code point they spell (llama-tokenize on ggml-vocab-qwen2.gguf).
  Tokenizer bpe = Tokenizer::load(kDir + "ggml-vocab-qwen2.gguf");
  EXPECT_EQ(bpe.encode("\xc0\xaf", false), (std::vector<int32_t>{14}));  // "/"
  EXPECT_EQ(bpe.encode("\xf0\x80\x80\xaf", false), (std::vector<int32_t>{14}));
  EXPECT_EQ(bpe.encode("ok \xc1\xbf end", false), (std::vector<int32_t>{562, 220, 221, 835}));
  EXPECT_EQ(bpe.encode("\xf0\x8d\xa0\x80", false), (std::vector<int32_t>{169, 63219}));  // a surrogate's bytes
}

TEST(VocabRoundTrip, RandomBytes) {
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned char>(state >> 56);
  };
  for (const char* v : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"}) {
    Tokenizer tok = Tokenizer::load(kDir + v);
    const bool spm = tok.model_kind() == "llama";
    for (int rep = 0; rep < 200; ++rep) {
      std::string s;
      const int n = 1 + rep % 40;
      while (static_cast<int>(s.size()) < n) {
        unsigned char c = next();
        if (spm && (c == 0xE2 || c == ' ')) continue;
        s.push_back(static_cast<char>(c));
      }
      // SentencePiece gives the bytes back; byte-level BPE gives U+FFFD for each invalid byte.
      ASSERT_EQ(tok.decode(tok.encode(s, false)), spm ? s : llamacpp_replace_invalid(s)) << v << " rep " << rep;
    }
  }
}

TEST(VocabMetadata, SpecialIdsAsTheFilesSay) {
  // Ids looked up in the vocabularies (llama.cpp prints them on load): <s>=1 </s>=2 for llama-spm,
  // <|begin_of_text|>=128000 <|end_of_text|>=128001 for llama-bpe, <|endoftext|>=151643 for qwen2.
  Tokenizer spm = Tokenizer::load(kDir + "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm.model_kind(), "llama");
  EXPECT_EQ(spm.bos_id(), 1);
  EXPECT_EQ(spm.eos_id(), 2);
  EXPECT_TRUE(spm.add_bos());
  EXPECT_TRUE(spm.is_eog(2));
  EXPECT_EQ(spm.token_text(1), "<s>");
  EXPECT_EQ(spm.encode("Hello", true).front(), 1);
  Tokenizer bpe = Tokenizer::load(kDir + "ggml-vocab-llama-bpe.gguf");
  EXPECT_EQ(bpe.model_kind(), "gpt2");
  EXPECT_EQ(bpe.pre(), "llama-bpe");
  EXPECT_EQ(bpe.token_text(bpe.bos_id()), "<|begin_of_text|>");
  EXPECT_TRUE(bpe.is_eog(*bpe.find("<|eot_id|>")));
  EXPECT_EQ(bpe.encode("<|eot_id|>", false, true), std::vector<int32_t>{*bpe.find("<|eot_id|>")});
  Tokenizer qwen = Tokenizer::load(kDir + "ggml-vocab-qwen2.gguf");
  EXPECT_EQ(qwen.pre(), "qwen2");
  EXPECT_TRUE(qwen.is_eog(*qwen.find("<|im_end|>")));
  EXPECT_TRUE(qwen.is_special(*qwen.find("<|im_end|>")));
  EXPECT_EQ(qwen.decode(qwen.encode("<|im_end|>", false, true), /*skip_special=*/true), "");
}

// One Tokenizer used from several threads at once (llama.cpp's test does the same) gives the same ids.
TEST(VocabThreads, ConcurrentEncodeAgrees) {
  Tokenizer tok = Tokenizer::load(kDir + "ggml-vocab-qwen2.gguf");
  const std::vector<Case> cases = read_cases("ggml-vocab-qwen2.gguf");
  std::vector<int> bad(4, 0);
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep)
        for (const Case& c : cases)
          if (tok.encode(c.text, false) != c.ids) ++bad[t];
    });
  for (auto& x : th) x.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// Performance: a 100 KB text encodes well under a second (no quadratic copies).
TEST(VocabSpeed, HundredKilobytes) {
  std::string text;
  const std::vector<Case> cases = read_cases("ggml-vocab-llama-bpe.gguf");
  while (text.size() < 100000)
    for (const Case& c : cases) text += c.text + "\n";
  for (const char* v : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"}) {
    Tokenizer tok = Tokenizer::load(kDir + v);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok.encode(text, false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 1.0) << v << ": " << text.size() << " bytes took " << s << " s";
    EXPECT_GT(ids.size(), text.size() / 8);
    std::printf("%s: %zu bytes -> %zu tokens in %.1f ms\n", v, text.size(), ids.size(), s * 1e3);
    // One 100 KB word (a single pre-token, a single SPM fragment) and 100 KB of one 4-byte emoji.
    for (const std::string& unit : {std::string("a"), std::string("\xF0\x9F\xA6\x99")}) {
      std::string one;
      while (one.size() < 100000) one += unit;
      t0 = std::chrono::steady_clock::now();
      ids = tok.encode(one, false);
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(s, 1.0) << v << ": 100 KB of '" << unit << "' took " << s << " s";
      EXPECT_EQ(tok.decode(ids), one) << v;
    }
  }
}

}  // namespace

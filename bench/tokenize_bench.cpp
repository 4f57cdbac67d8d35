// Tokenizer speed against input size: MB/s of Tokenizer::encode at 10 KB, 1 MB and 10 MB of
// generated text, so that a super-linear path shows as a falling rate.
//
//   bench_tokenize VOCAB [--text NAME ...] [--sizes 10k,1m,10m] [--reps N]
//   bench_tokenize VOCAB --file PATH [--reps N] [--ids OUT] [--bos]
//
// VOCAB: a .gguf (tokenizer.ggml.*) or a tokenizer.json (or its directory), as Tokenizer::load.
// Texts: "license" (tests/fixtures/llm/apache-2.0.txt repeated), and one unit repeated: "spaces",
// "newlines", "a", "dots", "pattern" ("ab. " repeated), "emoji" (a 4-byte character). Default: all.
// Each row is the best of --reps runs (default 3) on one thread, in wall time and in the thread's
// CPU time (which other jobs on a shared machine do not inflate); the load average is printed before
// and after. --file tokenizes that file's bytes as they are (bench/tokenize_vs_llamacpp.sh); --ids writes the
// ids as "[a, b, ...]" (llama-tokenize --ids's format) to OUT; --bos adds the vocabulary's BOS/EOS as
// llama-tokenize does.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wick/llm/tokenizer.hpp"

#ifndef WICK_FIXTURES
#define WICK_FIXTURES "tests/fixtures"
#endif

namespace {

std::string load_avg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::string repeat_to(const std::string& unit, size_t n) {
  std::string s;
  s.reserve(n + unit.size());
  while (s.size() < n) s += unit;
  s.resize(n);
  // Never end inside a multi-byte character.
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
  return s;
}

size_t parse_size(const std::string& s) {
  size_t n = std::stoull(s);
  char u = s.empty() ? ' ' : s.back();
  if (u == 'k' || u == 'K') n *= 1000;
  if (u == 'm' || u == 'M') n *= 1000 * 1000;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s VOCAB [--text NAME ...] [--sizes 10k,1m,10m] [--reps N]\n", argv[0]);
    return 2;
  }
  std::string license;
  {
    std::ifstream in(std::string(WICK_FIXTURES) + "/llm/apache-2.0.txt", std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    license = ss.str();
  }
  const std::vector<std::pair<std::string, std::string>> all = {
      {"license", license}, {"spaces", " "},     {"newlines", "\n"},           {"a", "a"},
      {"dots", "."},        {"pattern", "ab. "}, {"emoji", "\xF0\x9F\xA6\x99"}};
  std::vector<std::string> texts;
  std::vector<size_t> sizes = {10000, 1000000, 10000000};
  int reps = 3;
  std::string file, ids_out;
  bool bos = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--file" && i + 1 < argc) {
      file = argv[++i];
    } else if (a == "--ids" && i + 1 < argc) {
      ids_out = argv[++i];
    } else if (a == "--bos") {
      bos = true;
    } else if (a == "--text" && i + 1 < argc) {
      texts.push_back(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) sizes.push_back(parse_size(t));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 1;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    files.emplace_back(file.substr(file.find_last_of('/') + 1), ss.str());
    texts = {files[0].first};
    sizes = {0};  // the file as it is
  }
  if (texts.empty())
    for (const auto& t : all) texts.push_back(t.first);
  if (license.empty() && std::find(texts.begin(), texts.end(), "license") != texts.end()) {
    std::fprintf(stderr, "cannot read %s/llm/apache-2.0.txt\n", WICK_FIXTURES);
    return 1;
  }

  const wick::llm::Tokenizer tok = wick::llm::Tokenizer::load(argv[1]);
  std::printf("vocab %s (%zu tokens, %s), load %s\n", argv[1], tok.vocab_size(), tok.model_kind().c_str(),
              load_avg().c_str());
  std::printf("%-10s %10s %10s %10s %10s %10s %10s\n", "text", "bytes", "tokens", "wall ms", "wall MB/s", "cpu ms",
              "cpu MB/s");
  for (const std::string& name : texts) {
    const auto& pool = files.empty() ? all : files;
    auto it = std::find_if(pool.begin(), pool.end(), [&](const auto& t) { return t.first == name; });
    if (it == pool.end()) {
      std::fprintf(stderr, "unknown text %s\n", name.c_str());
      return 2;
    }
    for (size_t n : sizes) {
      const std::string text = files.empty() ? repeat_to(it->second, n) : it->second;
      double best = 1e30, best_cpu = 1e30;
      size_t ntok = 0;
      std::vector<int32_t> ids;
      for (int r = 0; r < reps; ++r) {
        const double c0 = cpu_seconds();
        auto t0 = std::chrono::steady_clock::now();
        ids = tok.encode(text, bos);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s);
        best_cpu = std::min(best_cpu, cpu_seconds() - c0);
        ntok = ids.size();
      }
      std::printf("%-10s %10zu %10zu %10.1f %10.2f %10.1f %10.2f\n", name.c_str(), text.size(), ntok, best * 1e3,
                  text.size() / best / 1e6, best_cpu * 1e3, text.size() / best_cpu / 1e6);
      std::fflush(stdout);
      if (!ids_out.empty()) {
        std::ofstream out(ids_out);
        out << "[";
        for (size_t k = 0; k < ids.size(); ++k) out << (k ? ", " : "") << ids[k];
        out << "]\n";
      }
    }
  }
  std::printf("load %s\n", load_avg().c_str());
  return 0;
}

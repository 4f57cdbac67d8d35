// `wick run MODEL -p PROMPT ...` (generation, streamed to stdout), `wick perplexity MODEL FILE`,
// `wick bench-llm MODEL` (prefill and decode speed, as llama-bench measures them) and `wick bench-batch
// MODEL` (the batched engine's speed, as llama-batched-bench measures it).
// Progress and statistics go to stderr, so stdout holds only the text (or the --json object).
#include "llm_cmds.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "wick/llm/engine.hpp"
#include "wick/llm/generate.hpp"
#include "wick/llm/model.hpp"
#include "wick/llm/tokenizer.hpp"
#include "wick/wick.hpp"

namespace wick::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

CLI::Validator device_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "best") return "";
        try {
          (void)Device::parse(s);
          return "";
        } catch (const Error& e) {
          return e.what();
        }
      },
      "");
}

Device parse_device(const std::string& s) { return s == "best" ? Device::best() : Device::parse(s); }

std::string gb(size_t bytes) {
  char buf[32];
  if (bytes >= (size_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  return buf;
}

// A bar redrawn in place on a terminal; on a pipe or log one line per quarter.
struct LoadBar {
  bool tty = isatty(fileno(stderr)) != 0;
  int last_quarter = -1;
  void operator()(size_t done, size_t total) {
    const double f = total ? double(done) / double(total) : 1.0;
    if (tty) {
      const int width = 30, filled = int(f * width);
      std::fprintf(stderr, "\r\033[Kloading [%s%s] %3d%%  %s / %s", std::string(size_t(filled), '=').c_str(),
                   std::string(size_t(width - filled), ' ').c_str(), int(f * 100), gb(done).c_str(), gb(total).c_str());
      if (done >= total) std::fprintf(stderr, "\n");
    } else {
      const int q = int(f * 4);
      if (q == last_quarter) return;
      last_quarter = q;
      std::fprintf(stderr, "loading: %3d%%  %s / %s\n", q * 25, gb(done).c_str(), gb(total).c_str());
    }
    std::fflush(stderr);
  }
};

// The dtypes --dtype and --cache-dtype take (dtype_from_name reads them).
CLI::Validator float_dtypes() { return CLI::IsMember({"f16", "bf16", "f32"}); }

// --dtype, the same in run and perplexity: load_model's dtype.
void add_dtype_option(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--dtype", dtype, "activations and non-quantized weights (default: f32 on cpu, f16 on a GPU)")
      ->type_name("T")
      ->check(float_dtypes());
}

// --device, the same in every LLM command: parse_device's name.
void add_device_option(CLI::App& cmd, std::string& device) {
  cmd.add_option("--device", device, "cpu, cuda:N, rocm:N, gpu:N or best (default: the first GPU, else cpu)")
      ->type_name("D")
      ->check(device_validator());
}

// --decode-off's names, one per llm::DecodeOptions field (docs/llm.md has the table).
const std::vector<std::pair<std::string, bool llm::DecodeOptions::*>> kDecodeFusions = {
    {"qk-stack", &llm::DecodeOptions::stack_qk},
    {"q8p", &llm::DecodeOptions::q8_1_inputs},
    {"rope-kv", &llm::DecodeOptions::rope_kv_append},
    {"swiglu", &llm::DecodeOptions::matmul_swiglu},
    {"short-view", &llm::DecodeOptions::short_view}};

// --decode-off, the same in run and bench-llm.
void add_decode_off_option(CLI::App& cmd, std::vector<std::string>& off) {
  std::vector<std::string> names;
  std::string list;
  for (const auto& [n, field] : kDecodeFusions) {
    names.push_back(n);
    list += (list.empty() ? "" : ",") + n;
  }
  cmd.add_option("--decode-off", off,
                 "on a GPU, run these fused decode kernels unfused, for A/B timing: a comma-separated list of " + list)
      ->type_name("LIST")
      ->delimiter(',')
      ->check(CLI::IsMember(names));
}

llm::DecodeOptions decode_options(const std::vector<std::string>& off) {
  llm::DecodeOptions d;
  for (const std::string& n : off)
    for (const auto& [name, field] : kDecodeFusions)
      if (n == name) d.*field = false;
  return d;
}

// context: the longest context the caches will hold, where the command knows it (LongRoPE's factors).
std::unique_ptr<llm::Model> load_model(const std::string& path, const Device& dev, const std::string& dtype,
                                       bool graphs = true, const llm::DecodeOptions& decode = {}, size_t context = 0) {
  llm::LoadOptions o;
  o.device = dev;
  o.context = context;
  o.graphs = graphs;
  o.decode = decode;
  if (!dtype.empty()) o.dtype = dtype_from_name(dtype);
  auto bar = std::make_shared<LoadBar>();
  o.progress = [bar](size_t done, size_t total) { (*bar)(done, total); };
  return llm::Model::load(path, o);
}

std::string dump(const nlohmann::json& j) {
  // Generated text may end in an incomplete UTF-8 sequence: replace it rather than throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ---- run

struct RunArgs {
  std::string model, prompt, system, dtype, cache_dtype, device = "best";
  size_t n = 128, ctx = 0;
  llm::SamplingParams sampling;
  std::vector<std::string> stop, decode_off;
  bool chat = false, json = false, ignore_eos = false, no_graph = false;
};

int run_generate(const RunArgs& a) {
  const Device dev = parse_device(a.device);
  reset_peak_memory(dev);
  auto t_load = Clock::now();
  // The model first: its loader's messages say best what is wrong with a file.
  std::unique_ptr<llm::Model> model =
      load_model(a.model, dev, a.dtype, !a.no_graph, decode_options(a.decode_off), a.ctx);
  const double load_s = since(t_load);
  llm::Tokenizer tok = llm::Tokenizer::load(a.model);

  std::vector<int32_t> prompt_ids;
  if (a.chat) {
    std::vector<llm::ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    std::string warning;
    std::string text = llm::apply_chat_template(tok, msgs, true, &warning);
    if (!warning.empty()) std::fprintf(stderr, "wick run: warning: %s\n", warning.c_str());
    prompt_ids = tok.encode(text, true, true);
  } else {
    prompt_ids = tok.encode(a.prompt, true, false);
  }
  if (prompt_ids.empty())
    throw Error(ErrorKind::Argument,
                "run: the prompt encodes to no tokens (an empty prompt and a tokenizer that adds "
                "no BOS); give a non-empty -p");

  llm::GenerateOptions o;
  o.max_new_tokens = a.n;
  o.sampling = a.sampling;
  o.stop_strings = a.stop;
  o.stop_at_eog = !a.ignore_eos;
  o.n_ctx = a.ctx;
  if (!a.cache_dtype.empty()) o.cache_dtype = dtype_from_name(a.cache_dtype);

  std::string text;
  std::vector<int32_t> ids;
  llm::GenerateStats st = llm::generate(
      *model, tok, prompt_ids, o,
      [&](int32_t, const std::string& piece) {
        text += piece;
        if (!a.json && !piece.empty()) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        }
        return true;
      },
      &ids);
  if (!a.json) {
    std::printf("\n");
    std::fflush(stdout);  // the text's last line before the statistics line on stderr, also through a pipe
  }

  const MemoryStats mem = memory_stats(dev);
  const size_t wanted = model->weight_bytes() + st.cache_bytes;
  std::string mem_line;
  if (dev.is_cpu()) {
    mem_line = "weights " + gb(model->weight_bytes()) + " + KV cache " + gb(st.cache_bytes) +
               " in host memory (the CPU has no device pool to measure a peak)";
  } else {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.1f%%", wanted ? 100.0 * (double(mem.peak) / double(wanted) - 1.0) : 0.0);
    mem_line = "peak " + gb(mem.peak) + " on " + dev.name() + " vs weights " + gb(model->weight_bytes()) +
               " + KV cache " + gb(st.cache_bytes) + " = " + gb(wanted) + " (" + pct + ")";
  }
  std::fprintf(stderr,
               "wick run: prompt %zu tok, %.1f tok/s; generated %zu tok, %.1f tok/s; stop: %s; load %.2f s; "
               "memory: %s\n",
               st.prompt_tokens, st.prompt_tps(), st.generated_tokens, st.gen_tps(), st.stop_reason.c_str(), load_s,
               mem_line.c_str());
  if (a.json) {
    nlohmann::json j;
    j["text"] = text;
    j["prompt_ids"] = prompt_ids;
    j["ids"] = ids;
    j["stop_reason"] = st.stop_reason;
    j["timings"] = {{"load_seconds", load_s},
                    {"prompt_tokens", st.prompt_tokens},
                    {"prompt_seconds", st.prompt_seconds},
                    {"prompt_tokens_per_second", st.prompt_tps()},
                    {"generated_tokens", st.generated_tokens},
                    {"decode_steps", st.decode_steps},
                    {"gen_seconds", st.gen_seconds},
                    {"gen_tokens_per_second", st.gen_tps()}};
    j["memory"] = {{"device", dev.name()},
                   {"weights_bytes", model->weight_bytes()},
                   {"kv_cache_bytes", st.cache_bytes},
                   {"peak_bytes", dev.is_cpu() ? nlohmann::json(nullptr) : nlohmann::json(mem.peak)}};
    j["model"] = {{"arch", model->config().arch_name}, {"dtype", dtype_name(model->dtype())}};
    std::printf("%s\n", dump(j).c_str());
  }
  return 0;
}

CLI::Validator positive_size() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          size_t used = 0;
          long long v = std::stoll(s, &used);
          if (used == s.size() && v > 0 && v <= (1LL << 40)) return "";
        } catch (const std::exception&) {
        }
        return "takes an integer > 0, not '" + s + "'";
      },
      "");
}

// ---- perplexity

struct PplArgs {
  std::string model, file, dtype, device = "best";
  size_t ctx = 512;
  bool json = false;
};

int run_perplexity(const PplArgs& a) {
  const Device dev = parse_device(a.device);
  std::ifstream f(a.file, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "perplexity: cannot read '" + a.file + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::unique_ptr<llm::Model> model = load_model(a.model, dev, a.dtype, true, {}, a.ctx);
  llm::Tokenizer tok = llm::Tokenizer::load(a.model);
  // As llama-perplexity: the text encoded with BOS as the tokenizer says, and BOS as the first
  // token of every chunk when it adds one.
  std::vector<int32_t> tokens = tok.encode(text, true, false);
  const int32_t bos = tok.add_bos() ? tok.bos_id() : -1;
  const bool tty = isatty(fileno(stderr)) != 0;
  auto t0 = Clock::now();
  llm::PerplexityResult r = llm::perplexity(
      *model, tokens, a.ctx,
      [&, last_tenth = size_t(0)](size_t done, size_t total) mutable {
        // A log gets a line per tenth of the chunks; a terminal one line redrawn.
        if (!tty && done * 10 / total == last_tenth && done != 1) return;
        last_tenth = done * 10 / total;
        std::fprintf(stderr, tty ? "\r\033[Kperplexity: chunk %zu/%zu, %.1f s" : "perplexity: chunk %zu/%zu, %.1f s\n",
                     done, total, since(t0));
        if (tty && done == total) std::fprintf(stderr, "\n");
        std::fflush(stderr);
      },
      bos);
  const double secs = since(t0);
  if (a.json) {
    nlohmann::json j = {
        {"ppl", r.ppl},           {"ppl_error", r.ppl_error}, {"nll_mean", r.nll_mean},    {"n_ctx", a.ctx},
        {"n_chunks", r.n_chunks}, {"n_scored", r.n_scored},   {"n_tokens", tokens.size()}, {"seconds", secs},
        {"device", dev.name()}};
    std::printf("%s\n", dump(j).c_str());
  } else {
    std::printf("PPL = %.4f +/- %.5f  (%zu chunks of %zu tokens, %zu tokens scored, %.2f s on %s)\n", r.ppl,
                r.ppl_error, r.n_chunks, a.ctx, r.n_scored, secs, dev.name().c_str());
  }
  return 0;
}

// ---- bench-llm

// One llama-bench test: a prefill of n_prompt tokens or a decode of n_gen tokens, with n_depth
// tokens already in the KV cache.
struct LlmTest {
  size_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string name() const {  // llama-bench's test column: pp512, tg128, tg128 @ d8192
    std::string s = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
    if (n_depth > 0) s += " @ d" + std::to_string(n_depth);
    return s;
  }
};

struct BenchLlmArgs {
  std::string model, dtype, cache_dtype, device = "best";
  std::vector<long long> n_prompt{512}, n_gen{128}, n_depth{0};
  size_t reps = 5, ubatch = 512;
  std::vector<std::string> decode_off;
  bool json = false, no_ctx_check = false, no_graph = false;
};

// What llama-bench reports as a model's size and parameters: the bytes (as stored: quantized
// blocks) and elements of every tensor in the file, or in the directory's *.safetensors.
struct FileWeights {
  size_t bytes = 0, params = 0;
};

FileWeights file_weights(const std::string& path) {
  FileWeights w;
  if (std::filesystem::is_directory(path)) {
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      if (e.path().extension() != ".safetensors") continue;
      SafeTensors st = SafeTensors::open(e.path().string());
      for (const std::string& n : st.names()) {
        const size_t numel = shape_numel(st.shape(n));
        w.params += numel;
        w.bytes += numel * dtype_size(st.dtype(n));
      }
    }
  } else {
    GGUFFile f = GGUFFile::open(path);
    for (const GGUFTensorInfo& t : f.tensors()) {
      w.params += t.numel();
      w.bytes += t.nbytes;
    }
  }
  return w;
}

// llama-bench's size and params columns: MiB below 1 GiB, else GiB; M below 1e9, else B.
std::string size_column(size_t bytes) {
  char buf[32];
  if (bytes < (size_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1 << 30));
  return buf;
}

std::string params_column(size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, n < 1000000000 ? "%.2f M" : "%.2f B", double(n) / (n < 1000000000 ? 1e6 : 1e9));
  return buf;
}

// -p, -n and -d values: integers >= 0 (0: no test of that kind, as llama-bench).
CLI::Validator count_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          size_t used = 0;
          long long v = std::stoll(s, &used);
          if (used == s.size() && v >= 0 && v <= (1LL << 30)) return "";
        } catch (const std::exception&) {
        }
        return "takes integers >= 0 separated by commas (0: no such test), not '" + s + "'";
      },
      "");
}

// A command line that parsed but cannot be run (main's convention: exit 2, the command named).
int usage_error(const std::string& msg) {
  std::fprintf(stderr, "wick bench-llm: %s\nsee `wick bench-llm --help`\n", msg.c_str());
  return 2;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// The sample standard deviation (n - 1), 0 for one value, as llama-bench's stdev.
double stddev(const std::vector<double>& v) {
  if (v.size() <= 1) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

int run_bench_llm(const BenchLlmArgs& a) {
  // The tests in llama-bench's order: per depth, every pp test, then every tg test.
  std::vector<LlmTest> tests;
  for (long long d : a.n_depth) {
    for (long long p : a.n_prompt)
      if (p > 0) tests.push_back({size_t(p), 0, size_t(d)});
    for (long long n : a.n_gen)
      if (n > 0) tests.push_back({0, size_t(n), size_t(d)});
  }
  if (tests.empty())
    return usage_error(
        "-p/--n-prompt and -n/--n-gen give no test: every value is 0 (0 skips that kind of test); "
        "give a positive N, e.g. -n 128");

  const Device dev = parse_device(a.device);
  const FileWeights fw = file_weights(a.model);
  std::unique_ptr<llm::Model> model = load_model(a.model, dev, a.dtype, !a.no_graph, decode_options(a.decode_off));
  const llm::ModelConfig& cfg = model->config();
  for (const LlmTest& t : tests) {
    const size_t need = t.n_depth + t.n_prompt + t.n_gen;
    if (need > cfg.max_position && !a.no_ctx_check)
      return usage_error(
          "test " + t.name() + ": -d/--n-depth " + std::to_string(t.n_depth) + " + " +
          (t.n_prompt > 0 ? "-p/--n-prompt " + std::to_string(t.n_prompt) : "-n/--n-gen " + std::to_string(t.n_gen)) +
          " = " + std::to_string(need) + " tokens is beyond the model's context length of " +
          std::to_string(cfg.max_position) +
          "; lower them, or give --no-ctx-check to run past it anyway (llama-bench does not check)");
  }
  // As llama-bench: the first token of each prefill and decode run is BOS when the tokenizer adds
  // one, the others uniform random ids of the vocabulary (a fixed seed: every run the same ids).
  int32_t bos = -1;
  try {
    llm::Tokenizer tok = llm::Tokenizer::load(a.model);
    if (tok.add_bos() && tok.bos_id() >= 0 && size_t(tok.bos_id()) < cfg.vocab_size) bos = tok.bos_id();
  } catch (const std::exception&) {  // no readable tokenizer: random ids only
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(cfg.vocab_size) - 1);
  auto random_ids = [&](size_t n) {
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = pick(rng);
    if (bos >= 0 && n > 0) ids[0] = bos;
    return ids;
  };
  // A prefill as llama-bench's test_prompt: forwards of at most --ubatch tokens (llama.cpp's
  // n_ubatch), the last token's logits to the host (what llama_decode returns), one synchronise at
  // the end. A decode as its test_gen: one token per forward, logits to the host, synchronised.
  auto prefill = [&](const std::vector<int32_t>& ids, llm::KvCache& cache) {
    for (size_t done = 0; done < ids.size();) {
      const size_t k = std::min(a.ubatch, ids.size() - done);
      const std::vector<int32_t> chunk(ids.begin() + std::ptrdiff_t(done), ids.begin() + std::ptrdiff_t(done + k));
      Tensor logits = model->forward(chunk, cache, false);
      done += k;
      if (done == ids.size()) (void)logits.to_vector<float>();
    }
    synchronize(dev);
  };
  auto decode = [&](const std::vector<int32_t>& ids, llm::KvCache& cache) {
    for (int32_t id : ids) {
      (void)model->forward({id}, cache, false).to_vector<float>();
      synchronize(dev);
    }
  };

  const std::string file = std::filesystem::path(a.model).filename().string().empty()
                               ? std::filesystem::path(a.model).parent_path().filename().string()
                               : std::filesystem::path(a.model).filename().string();
  const std::optional<DType> cache_dtype =
      a.cache_dtype.empty() ? std::nullopt : std::optional<DType>(dtype_from_name(a.cache_dtype));
  // The KV cache's type when --cache-dtype is not given is the model's choice: ask a one-token cache.
  const std::string dtypes =
      std::string(dtype_name(model->dtype())) + "/" + dtype_name(cache_dtype.value_or(model->make_cache(1).dtype()));
  if (!a.json) {
    std::printf("| %-30s | %10s | %10s | %-8s | %-9s | %15s | %20s |\n", "model", "size", "params", "device", "dtype",
                "test", "t/s");
    std::printf("| %s | %s: | %s: | %s | %s | %s: | %s: |\n", std::string(30, '-').c_str(), std::string(9, '-').c_str(),
                std::string(9, '-').c_str(), std::string(8, '-').c_str(), std::string(9, '-').c_str(),
                std::string(14, '-').c_str(), std::string(19, '-').c_str());
    std::fflush(stdout);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (size_t ti = 0; ti < tests.size(); ++ti) {
    const LlmTest& t = tests[ti];
    std::fprintf(stderr, "bench-llm: [%zu/%zu] %s: warm-up, then %zu run%s\n", ti + 1, tests.size(), t.name().c_str(),
                 a.reps, a.reps == 1 ? "" : "s");
    std::fflush(stderr);
    // The KV cache sized for the test (llama-bench's n_ctx = depth + n_prompt + n_gen); the depth's
    // tokens are prefilled once, untimed, and every run starts from them (llama-bench restores the
    // same state before each run).
    llm::KvCache cache = model->make_cache(t.n_depth + t.n_prompt + t.n_gen, cache_dtype);
    if (t.n_depth > 0) prefill(random_ids(t.n_depth), cache);
    // One untimed warm-up, as llama-bench: the whole prefill, or one decoded token.
    if (t.n_prompt > 0)
      prefill(random_ids(t.n_prompt), cache);
    else
      decode(random_ids(1), cache);
    std::vector<double> samples_ns, samples_ts;
    for (size_t r = 0; r < a.reps; ++r) {
      cache.truncate(t.n_depth);
      const std::vector<int32_t> ids = random_ids(t.n_prompt > 0 ? t.n_prompt : t.n_gen);
      synchronize(dev);
      const auto t0 = Clock::now();
      if (t.n_prompt > 0)
        prefill(ids, cache);
      else
        decode(ids, cache);
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      samples_ns.push_back(ns);
      samples_ts.push_back(1e9 * double(ids.size()) / ns);
    }
    const double avg_ts = mean(samples_ts), sd_ts = stddev(samples_ts);
    if (a.json) {
      rows.push_back({{"model_filename", a.model},
                      {"model", file},
                      {"arch", cfg.arch_name},
                      {"model_size", fw.bytes},
                      {"model_n_params", fw.params},
                      {"weights_bytes", model->weight_bytes()},
                      {"device", dev.name()},
                      {"device_name", dev.is_cpu() ? std::string("cpu") : device_info(dev).name},
                      {"dtype", dtype_name(model->dtype())},
                      {"cache_dtype", dtype_name(cache.dtype())},
                      {"n_ubatch", a.ubatch},
                      {"n_prompt", t.n_prompt},
                      {"n_gen", t.n_gen},
                      {"n_depth", t.n_depth},
                      {"test", t.name()},
                      {"reps", a.reps},
                      {"avg_ns", mean(samples_ns)},
                      {"stddev_ns", stddev(samples_ns)},
                      {"avg_ts", avg_ts},
                      {"stddev_ts", sd_ts},
                      {"samples_ns", samples_ns},
                      {"samples_ts", samples_ts}});
    } else {
      char ts[64];
      std::snprintf(ts, sizeof ts, "%.2f ± %.2f", avg_ts, sd_ts);
      // "±" is two bytes: one more column of printf width keeps the table aligned.
      std::printf("| %-30s | %10s | %10s | %-8s | %-9s | %15s | %21s |\n", file.c_str(), size_column(fw.bytes).c_str(),
                  params_column(fw.params).c_str(), dev.name().c_str(), dtypes.c_str(), t.name().c_str(), ts);
      std::fflush(stdout);
    }
  }
  if (a.json) {
    std::printf("%s\n", rows.dump(1).c_str());
  } else {
    const std::string where = dev.is_cpu() ? dev.name() : dev.name() + " (" + device_info(dev).name + ")";
    std::printf(
        "\nwick %s, %s, dtype %s (activations/KV cache), %zu run%s after a warm-up, prefill in forwards "
        "of <= %zu tokens\n",
        WICK_VERSION, where.c_str(), dtypes.c_str(), a.reps, a.reps == 1 ? "" : "s", a.ubatch);
  }
  return 0;
}

// ---- bench-batch

struct BenchBatchArgs {
  std::string model, dtype, cache_dtype, device = "best";
  std::vector<long long> npp{128, 256, 512}, ntg{128, 256}, npl{1, 2, 4, 8, 16, 32};
  size_t batch = 0;  // tokens a step; 0: every prompt in one step
  bool json = false;
};

int run_bench_batch(const BenchBatchArgs& a) {
  for (const auto* v : {&a.npp, &a.ntg, &a.npl})
    for (long long x : *v)
      if (x <= 0) {
        std::fprintf(stderr, "wick bench-batch: -npp, -ntg and -npl take positive integers\n");
        return 2;
      }
  const Device dev = parse_device(a.device);
  std::unique_ptr<llm::Model> model = load_model(a.model, dev, a.dtype, true, llm::DecodeOptions{});
  const llm::Tokenizer tok = llm::Tokenizer::load(a.model);
  const llm::ModelConfig& cfg = model->config();
  const std::optional<DType> kv =
      a.cache_dtype.empty() ? std::nullopt : std::optional<DType>(dtype_from_name(a.cache_dtype));
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(cfg.vocab_size) - 1);
  // One test: npl requests of npp random ids, each decoding ntg tokens after its prefill (max_tokens ntg + 1:
  // the first sampled token comes from the prefill). T_PP: until every request has its first token; T_TG:
  // the rest. Greedy sampling on the host from each step's logits, no prefix cache (the prompts differ).
  struct Row {
    size_t pp, tg, pl, n_kv, pp_steps;
    double t_pp, t_tg;
  };
  auto one = [&](size_t pp, size_t tg, size_t pl) {
    llm::EngineOptions o;
    o.max_seqs = pl;
    o.max_batch_tokens = a.batch ? a.batch : pp * pl;
    o.prefix_cache = false;
    o.kv_dtype = kv;
    o.kv_blocks = (pl * ((pp + tg + 1 + o.block_tokens - 1) / o.block_tokens + 1));
    o.max_ctx = pp + tg + 1;
    llm::Engine eng(*model, tok, o);
    size_t firsts = 0;
    for (size_t i = 0; i < pl; ++i) {
      llm::Request r;
      r.prompt.resize(pp);
      for (auto& id : r.prompt) id = pick(rng);
      r.sampling.temperature = 0;
      r.max_tokens = tg + 1;
      r.ignore_eos = true;
      r.on_event = [&firsts](const llm::TokenEvent& e) {
        if (!e.finished && e.output_tokens == 1) ++firsts;
        return true;
      };
      eng.submit(std::move(r));
    }
    synchronize(dev);
    Row row{pp, tg, pl, pl * (pp + tg), 0, 0, 0};
    const auto t0 = Clock::now();
    while (firsts < pl) {
      eng.step();
      ++row.pp_steps;
    }
    synchronize(dev);
    row.t_pp = since(t0);
    const auto t1 = Clock::now();
    eng.run_until_idle();
    synchronize(dev);
    row.t_tg = since(t1);
    return row;
  };
  std::fprintf(stderr, "bench-batch: warm-up\n");
  (void)one(16, 4, 2);
  // The bandwidth bound of a decode step: every weight byte and each sequence's KV read once, at the
  // device's copy bandwidth (bytes read + written a second; the best of five copies of 256 MiB).
  double bandwidth = 0;
  {
    const size_t n = size_t{64} << 20;
    const Tensor x = Tensor::zeros({n}, DType::F32, dev);
    for (int i = 0; i < 6; ++i) {
      synchronize(dev);
      const auto t0 = Clock::now();
      const Tensor y = x.copy();
      synchronize(dev);
      if (i > 0) bandwidth = std::max(bandwidth, 2.0 * double(n * 4) / since(t0));
    }
  }
  const size_t kv_token = model->kv_bytes_per_token(kv.value_or(model->make_cache(1).dtype()));
  if (!a.json) {
    std::printf(
        "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s | "
        "S_TG / bound |\n");
    std::printf(
        "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|"
        "--------------|\n");
  }
  nlohmann::json rows = nlohmann::json::array();
  for (long long pp : a.npp)
    for (long long tg : a.ntg)
      for (long long pl : a.npl) {
        const Row r = one(size_t(pp), size_t(tg), size_t(pl));
        const double s_pp = double(r.pl * r.pp) / r.t_pp, s_tg = double(r.pl * r.tg) / r.t_tg, t = r.t_pp + r.t_tg,
                     s = double(r.n_kv) / t;
        // A decode step reads the weights and each sequence's context (on average PP + TG / 2 tokens).
        const double step_bytes =
            double(model->weight_bytes()) + double(r.pl) * (double(r.pp) + double(r.tg) / 2) * double(kv_token);
        const double share = bandwidth > 0 ? s_tg / (double(r.pl) * bandwidth / step_bytes) : 0;
        if (a.json) {
          rows.push_back({{"pp", r.pp},
                          {"tg", r.tg},
                          {"pl", r.pl},
                          {"n_kv", r.n_kv},
                          {"t_pp", r.t_pp},
                          {"speed_pp", s_pp},
                          {"t_tg", r.t_tg},
                          {"speed_tg", s_tg},
                          {"t", t},
                          {"speed", s},
                          {"pp_steps", r.pp_steps},
                          {"copy_bandwidth", bandwidth},
                          {"share_of_bandwidth_bound", share}});
        } else {
          std::printf("| %5zu | %6zu | %4zu | %6zu | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f | %11.1f%% |\n",
                      r.pp, r.tg, r.pl, r.n_kv, r.t_pp, s_pp, r.t_tg, s_tg, t, s, 100 * share);
          std::fflush(stdout);
        }
      }
  const std::string where = dev.is_cpu() ? dev.name() : dev.name() + " (" + device_info(dev).name + ")";
  if (a.json)
    std::printf("%s\n", rows.dump(1).c_str());
  else
    std::printf(
        "\nwick %s, %s, %s, dtype %s, KV %s, prompts in %s; bound: %.1f GB/s copy bandwidth, %.2f GB of "
        "weights\n",
        WICK_VERSION, a.model.c_str(), where.c_str(), dtype_name(model->dtype()),
        dtype_name(kv.value_or(model->make_cache(1).dtype())),
        a.batch ? ("steps of <= " + std::to_string(a.batch) + " tokens").c_str() : "one step", bandwidth / 1e9,
        double(model->weight_bytes()) / 1e9);
  return 0;
}

}  // namespace

LlmCommand add_bench_batch(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "bench-batch", "aggregate prefill and decode tokens/s of many sequences at once, as llama-batched-bench");
  auto a = std::make_shared<BenchBatchArgs>();
  cmd->add_option("MODEL", a->model, "a .gguf file or a Hugging Face directory")->required()->check(CLI::ExistingPath);
  cmd->add_option("--npp,--n-pp", a->npp,
                  "prompt tokens of each sequence; -npp as llama-batched-bench (default 128,256,512)")
      ->type_name("N[,N...]")
      ->delimiter(',');
  cmd->add_option("--ntg,--n-tg", a->ntg, "tokens each sequence generates (default 128,256)")
      ->type_name("N[,N...]")
      ->delimiter(',');
  cmd->add_option("--npl,--n-pl", a->npl, "sequences at once (default 1,2,4,8,16,32)")
      ->type_name("N[,N...]")
      ->delimiter(',');
  cmd->add_option("--batch", a->batch, "tokens a step holds at most (default: every prompt in one step)")
      ->type_name("N")
      ->check(positive_size());
  add_device_option(*cmd, a->device);
  add_dtype_option(*cmd, a->dtype);
  cmd->add_option("--cache-dtype", a->cache_dtype,
                  "KV cache type: f16, bf16, f32 or f8e4m3 (default f16; bf16 for bf16 models)")
      ->type_name("T")
      ->check(CLI::IsMember({"f16", "bf16", "f32", "f8e4m3"}));
  cmd->add_flag("--json", a->json, "a JSON array, one object per row");
  cmd->footer(
      "As llama-batched-bench (prompts not shared): for each PP, TG and B, B requests of PP random token ids go to\n"
      "the engine (wick/llm/engine.hpp) at once; T_PP is the time until every one has its first token, T_TG the\n"
      "time of the TG decode steps after it. S_PP = B*PP/T_PP, S_TG = B*TG/T_TG, N_KV = B*(PP+TG), S = N_KV/T.\n"
      "Greedy sampling on the host each step; no prefix cache. One untimed warm-up. The last column is S_TG against\n"
      "the bandwidth bound: each decode step reading the weights and every sequence's KV (PP + TG/2 tokens) once at\n"
      "the device's measured copy bandwidth.\n");
  return {cmd, [a] { return run_bench_batch(*a); }};
}

LlmCommand add_run(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("run", "generate text with an LLM (GGUF file or Hugging Face directory)");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("MODEL", a->model, "a .gguf file, or a directory with config.json, *.safetensors, tokenizer.json")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("-p,--prompt", a->prompt, "the prompt (with --chat: the user message)")->required();
  cmd->add_option("-n,--n-predict", a->n, "tokens to generate at most (default 128)")
      ->type_name("N")
      ->check(CLI::Range(size_t(0), size_t(1) << 30));
  add_device_option(*cmd, a->device);
  cmd->add_option("--temp", a->sampling.temperature, "temperature; 0: greedy (default 0.8)")
      ->type_name("T")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--top-k", a->sampling.top_k, "keep the K most likely tokens; 0: off (default 40)")
      ->type_name("K")
      ->check(CLI::Range(size_t(0), size_t(1) << 31));
  cmd->add_option("--top-p", a->sampling.top_p, "nucleus sampling; 1: off (default 0.95)")
      ->type_name("P")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", a->sampling.min_p, "drop tokens below P x the best one's probability; 0: off (0.05)")
      ->type_name("P")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", a->sampling.repeat_penalty, "penalty of recent tokens; 1: off (default 1)")
      ->type_name("R")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--repeat-last-n", a->sampling.repeat_last_n, "how many recent tokens it looks at (default 64)")
      ->type_name("N")
      ->check(CLI::Range(size_t(0), size_t(1) << 31));
  cmd->add_option("--seed", a->sampling.seed, "sampling seed: the same seed, the same tokens on every device (42)")
      ->type_name("S");
  cmd->add_option("--ctx", a->ctx, "KV cache capacity in tokens (default: prompt + N)")
      ->type_name("C")
      ->check(positive_size());
  CLI::Option* chat = cmd->add_flag("--chat", a->chat, "format the prompt with the model's chat template");
  cmd->add_option("--system", a->system, "a system message (with --chat)")->type_name("S")->needs(chat);
  cmd->add_option("--stop", a->stop, "stop when the text contains S (repeatable); S itself is not printed")
      ->type_name("S")
      ->allow_extra_args(false);
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop at end-of-generation tokens");
  cmd->add_flag(
      "--no-graph", a->no_graph,
      "on a GPU, launch every op of every decode step instead of replaying a recorded graph (for comparisons)");
  add_decode_off_option(*cmd, a->decode_off);
  cmd->add_flag("--sample-on-host", a->sampling.sample_on_host,
                "copy each whole row of logits to the host to sample (default: only the top-k found on the "
                "device); the same tokens, for A/B timing");
  cmd->add_flag("--json", a->json,
                "print one JSON object {text, prompt_ids, ids, timings, stop_reason, memory} instead of streaming");
  add_dtype_option(*cmd, a->dtype);
  cmd->add_option("--cache-dtype", a->cache_dtype, "KV cache type (default f16; bf16 for bf16 models)")
      ->type_name("T")
      ->check(float_dtypes());
  cmd->footer(
      "Text streams to stdout; the loading bar and a statistics line (prompt and generation tokens/s, stop\n"
      "reason, memory: peak device memory against weights + KV cache) go to stderr.\n");
  return {cmd, [a] { return run_generate(*a); }};
}

LlmCommand add_perplexity(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("perplexity", "perplexity of an LLM over a text file, as llama-perplexity");
  auto a = std::make_shared<PplArgs>();
  cmd->add_option("MODEL", a->model, "a .gguf file or a Hugging Face directory")->required()->check(CLI::ExistingPath);
  cmd->add_option("FILE", a->file, "a text file (at least 2 x --ctx tokens)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--ctx", a->ctx, "tokens per chunk (default 512); the second half of each is scored")
      ->type_name("C")
      ->check(CLI::Range(size_t(4), size_t(1) << 24));
  add_device_option(*cmd, a->device);
  add_dtype_option(*cmd, a->dtype);
  cmd->add_flag("--json", a->json, "one JSON object {ppl, ppl_error, nll_mean, n_ctx, n_chunks, ...}");
  cmd->footer(
      "As llama-perplexity (default mode): the text is split into chunks of --ctx tokens, each starting with BOS\n"
      "when the tokenizer adds one; the logits of the second half score the next token; PPL = exp(mean NLL), with\n"
      "llama-perplexity's error estimate.\n");
  return {cmd, [a] { return run_perplexity(*a); }};
}

LlmCommand add_bench_llm(CLI::App& root) {
  CLI::App* cmd =
      root.add_subcommand("bench-llm", "prefill (pp) and decode (tg) tokens/s of an LLM, measured as llama-bench does");
  auto a = std::make_shared<BenchLlmArgs>();
  cmd->add_option("MODEL", a->model, "a .gguf file or a Hugging Face directory")->required()->check(CLI::ExistingPath);
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prefill tests of N tokens; 0: none (default 512)")
      ->type_name("N[,N...]")
      ->delimiter(',')
      ->check(count_value());
  cmd->add_option("-n,--n-gen", a->n_gen, "decode tests of N tokens; 0: none (default 128)")
      ->type_name("N[,N...]")
      ->delimiter(',')
      ->check(count_value());
  cmd->add_option("-d,--n-depth", a->n_depth, "tokens already in the KV cache before each test (default 0)")
      ->type_name("N[,N...]")
      ->delimiter(',')
      ->check(count_value());
  cmd->add_option("-r,--repetitions", a->reps, "timed runs of each test (default 5)")
      ->type_name("R")
      ->check(positive_size());
  cmd->add_option("--ubatch", a->ubatch, "a prefill runs in forwards of at most N tokens (llama.cpp's n_ubatch; 512)")
      ->type_name("N")
      ->check(positive_size());
  add_device_option(*cmd, a->device);
  add_dtype_option(*cmd, a->dtype);
  cmd->add_option("--cache-dtype", a->cache_dtype, "KV cache type (default f16; bf16 for bf16 models)")
      ->type_name("T")
      ->check(float_dtypes());
  cmd->add_flag(
      "--no-graph", a->no_graph,
      "on a GPU, launch every op of every decode step instead of replaying a recorded graph (for comparisons)");
  add_decode_off_option(*cmd, a->decode_off);
  cmd->add_flag("--no-ctx-check", a->no_ctx_check,
                "run tests whose depth + N passes the model's context length (llama-bench does not check it)");
  cmd->add_flag("--json", a->json,
                "a JSON array, one object per test (llama-bench's field names: avg_ts, stddev_ts, samples_ts, ...)");
  cmd->footer(
      "As llama-bench: a pp test prefills N random token ids (BOS first when the tokenizer adds one) in forwards of\n"
      "--ubatch tokens; a tg test decodes N tokens one forward at a time, each synchronised. The KV cache is sized\n"
      "for the test and holds -d tokens before it (prefilled once, untimed; empty without -d). One untimed warm-up,\n"
      "then -r timed runs, each between two device synchronisations; t/s is the mean +/- the (sample) standard\n"
      "deviation of the runs' tokens/s. Tests run per depth: every pp, then every tg.\n"
      "The table (markdown) and --json go to stdout, loading and progress to stderr.\n");
  return {cmd, [a] { return run_bench_llm(*a); }};
}

}  // namespace wick::cli

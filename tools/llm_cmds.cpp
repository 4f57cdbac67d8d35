// `wick run MODEL -p PROMPT ...` (generation, streamed to stdout) and `wick perplexity MODEL FILE`.
// Progress and statistics go to stderr, so stdout holds only the text (or the --json object).
#include "llm_cmds.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

std::unique_ptr<llm::Model> load_model(const std::string& path, const Device& dev, const std::string& dtype) {
  llm::LoadOptions o;
  o.device = dev;
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
  std::vector<std::string> stop;
  bool chat = false, json = false, ignore_eos = false;
};

int run_generate(const RunArgs& a) {
  const Device dev = parse_device(a.device);
  reset_peak_memory(dev);
  auto t_load = Clock::now();
  // The model first: its loader's messages say best what is wrong with a file.
  std::unique_ptr<llm::Model> model = load_model(a.model, dev, a.dtype);
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
  if (!a.json) std::printf("\n");

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
  std::unique_ptr<llm::Model> model = load_model(a.model, dev, a.dtype);
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

}  // namespace

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
  cmd->add_option("--device", a->device, "cpu, cuda:N, rocm:N, gpu:N or best (default: the first GPU, else cpu)")
      ->type_name("D")
      ->check(device_validator());
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
  cmd->add_option("--device", a->device, "cpu, cuda:N, rocm:N, gpu:N or best (default)")
      ->type_name("D")
      ->check(device_validator());
  add_dtype_option(*cmd, a->dtype);
  cmd->add_flag("--json", a->json, "one JSON object {ppl, ppl_error, nll_mean, n_ctx, n_chunks, ...}");
  cmd->footer(
      "As llama-perplexity (default mode): the text is split into chunks of --ctx tokens, each starting with BOS\n"
      "when the tokenizer adds one; the logits of the second half score the next token; PPL = exp(mean NLL), with\n"
      "llama-perplexity's error estimate.\n");
  return {cmd, [a] { return run_perplexity(*a); }};
}

}  // namespace wick::cli

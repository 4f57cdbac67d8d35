// The `wick` command: info (devices, or a GGUF/safetensors file), quantize, check (op parity harness), bench, ops,
// run, perplexity, bench-llm and bench-batch (an LLM: tools/llm_cmds.cpp).
// One CLI11 parser for every subcommand. A command is one add_* function: it declares its
// subcommand, help text and typed options, and returns the body main() runs after a clean parse.
// Exit codes: 0 success; 1 a check failed or the library raised wick::Error; 2 a command line
// the program cannot act on (unknown command or argument, bad value, a filter matching no case).
#include "wick/wick.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "check/bench.hpp"
#include "check/check.hpp"
#include "check/file_tools.hpp"
#include "check/filters.hpp"
#include "check/ops_doc.hpp"
#include "llm_cmds.hpp"

using namespace wick;

namespace {

// A command line that parsed but cannot be acted on (e.g. a filter matching no case): exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// ---- typed options shared by the commands

// --device D, repeatable (--device cpu --device cuda:0); each name must pass Device::parse,
// whose message is the error.
void add_device_option(CLI::App* cmd, std::vector<std::string>* names, const std::string& help) {
  cmd->add_option("--device", *names, help)
      ->type_name("D")
      ->allow_extra_args(false)
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            try {
              (void)Device::parse(s);
              return "";
            } catch (const Error& e) {
              return e.what();
            }
          },
          ""));
}

std::vector<Device> parse_devices(const std::vector<std::string>& names) {
  std::vector<Device> out;
  for (const auto& n : names) out.push_back(Device::parse(n));
  return out;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (DType d : kAllDTypes) out.push_back(dtype_name(d));
  return out;
}

// ---- info

void print_devices() {
  std::printf("wick %s\n", WICK_VERSION);
  std::printf("backends built:");
  for (const auto& b : built_backends()) std::printf(" %s", b.c_str());
  std::printf("\ndevices:");
  for (const auto& d : available_devices()) std::printf(" %s", d.name().c_str());
  std::printf("\ncpu threads: %d\n", device_info(Device::cpu()).compute_units);
  for (const auto& d : available_devices()) {
    if (d.is_cpu()) continue;
    DeviceInfo i = device_info(d);
    MemoryStats m = memory_stats(d);
    std::printf("%s: %s, %s, %.1f GiB, warp size %d, %d compute units; wick holds %zu bytes, caches %zu\n",
                d.name().c_str(), i.name.c_str(), i.arch.c_str(), double(i.total_memory) / double(1 << 30), i.warp_size,
                i.compute_units, m.in_use, m.cached);
  }
  for (const auto& b : built_backends()) {
    if (b == "cpu") continue;
    std::string why = gpu_unavailable_reason();
    if (!why.empty()) std::printf("%s: no usable device: %s\n", b.c_str(), why.c_str());
  }
}

struct InfoArgs {
  std::string file;
  size_t items = 8;
};

Command add_info(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "info", "version, backends built, devices, CPU threads; with FILE: a GGUF's or safetensors' contents");
  auto a = std::make_shared<InfoArgs>();
  cmd->add_option("FILE", a->file,
                  "a .gguf file: version, alignment, metadata, tensor table (name, shape, type, bytes, offset) and "
                  "totals per type; a .safetensors file: metadata and tensor table")
      ->check(CLI::ExistingFile);
  cmd->add_option("--items", a->items, "array elements of a metadata value shown before '...' (default 8)")
      ->type_name("N")
      ->check(CLI::Range(size_t(0), size_t(1) << 40));
  return {cmd, [a] {
            if (a->file.empty())
              print_devices();
            else
              check::print_file_info(a->file, stdout, a->items);
            return 0;
          }};
}

// ---- quantize

struct QuantizeArgs {
  std::string in, out, type;
  std::vector<std::string> keep_f32;
  bool allow_requantize = false;
};

std::string file_type_names() {
  std::string s;
  for (GGMLType t : check::quantize_file_types()) s += (s.empty() ? "" : ", ") + std::string(ggml_type_name(t));
  return s;
}

// On a terminal one line redrawn in place; otherwise (a log, a pipe) one plain line per tensor.
void show_progress(const check::QuantizeStep& s, bool tty) {
  // GB for a model, MB for a small file.
  const double gb = s.total_bytes >= 1e9 ? 1e9 : 1e6;
  const char* unit = s.total_bytes >= 1e9 ? "GB" : "MB";
  if (tty) {
    const int width = 30;
    const int filled = s.total_bytes ? int(double(width) * double(s.done_bytes) / double(s.total_bytes)) : width;
    std::string bar = std::string(size_t(filled), '=') + std::string(size_t(width - filled), ' ');
    std::fprintf(stderr, "\r\033[K[%s] %zu/%zu tensors, %.2f/%.2f %s  %s", bar.c_str(), s.index, s.count,
                 double(s.done_bytes) / gb, double(s.total_bytes) / gb, unit, s.name.c_str());
    if (s.index == s.count) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "[%zu/%zu] %s: %s -> %s, %zu -> %zu bytes%s%s\n", s.index, s.count, s.name.c_str(),
                 s.from.c_str(), s.to.c_str(), s.in_bytes, s.out_bytes, s.why.empty() ? "" : "; kept: ", s.why.c_str());
  }
  if (s.index == s.count) std::fprintf(stderr, "writing the GGUF ...\n");
  std::fflush(stderr);
}

Command add_quantize(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("quantize", "IN (safetensors or GGUF) -> OUT (GGUF v3) with weights of --type");
  auto a = std::make_shared<QuantizeArgs>();
  cmd->add_option("IN", a->in, "a .safetensors or .gguf file")->required()->check(CLI::ExistingFile);
  cmd->add_option("OUT", a->out, "the GGUF to write (replaced if it exists)")->required();
  cmd->add_option("--type", a->type, "the weights' type: " + file_type_names())
      ->required()
      ->type_name("T")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            auto t = ggml_type_from_name(s);
            auto ok = check::quantize_file_types();
            if (t && std::find(ok.begin(), ok.end(), *t) != ok.end()) return "";
            return "'" + s + "' is not a type wick quantize writes; the types are " + file_type_names();
          },
          ""));
  cmd->add_option("--keep-f32", a->keep_f32, "write tensors whose name contains PATTERN in F32 (repeatable)")
      ->type_name("PATTERN")
      ->allow_extra_args(false);
  cmd->add_flag("--allow-requantize", a->allow_requantize,
                "quantize tensors of a GGUF that are already quantized (from their dequantized values)");
  cmd->footer(
      "Which tensors become T (llama-quantize's rules, simplified): rank >= 2, the name ends in 'weight' and is\n"
      "not a norm ('_norm.weight'), MoE router ('ffn_gate_inp.weight'), position or token-type embedding, and\n"
      "the rows (last dim) are whole blocks of T (32 elements; 256 for the K types and IQ4_XS). Rank 0/1 tensors\n"
      "(norms, biases, scales) are written F32, as llama.cpp's converter writes them; every other tensor keeps\n"
      "its type (llama-quantize would pick a fallback type for rows that are not whole blocks: wick keeps them).\n"
      "From a GGUF every metadata key is kept and general.quantization_version = 2 and general.file_type (llama.h's\n"
      "LLAMA_FTYPE; Q3_K/Q4_K/Q5_K as their _M aliases) are set; from safetensors only those two keys are written\n"
      "and tensor names stay as they are (no conversion to llama.cpp's names). Progress goes to stderr.\n");
  return {cmd, [a] {
            check::QuantizeOptions o;
            o.in = a->in;
            o.out = a->out;
            o.type = *ggml_type_from_name(a->type);
            o.keep_f32 = a->keep_f32;
            o.allow_requantize = a->allow_requantize;
            const bool tty = isatty(fileno(stderr)) != 0;
            check::QuantizeSummary s =
                check::quantize_file(o, [tty](const check::QuantizeStep& st) { show_progress(st, tty); });
            std::printf("wrote %s: %zu tensors (%zu quantized to %s), %zu bytes from %zu;", o.out.c_str(), s.tensors,
                        s.quantized, ggml_type_name(o.type), s.out_bytes, s.in_bytes);
            for (const auto& [t, n] : s.per_type) std::printf(" %s %zu", t.c_str(), n);
            std::printf("\n");
            return 0;
          }};
}

// ---- check

struct CheckArgs {
  std::vector<std::string> devices;
  std::string op, dtype;
  bool verbose = false;
};

Command add_check(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("check", "op x dtype x layout parity cases; exit 0 when all pass");
  cmd->footer("Exit code: 0 when every selected case passes, 1 when any fails, 2 when no case matches the filters.\n");
  auto a = std::make_shared<CheckArgs>();
  add_device_option(cmd, &a->devices, "cpu, cuda:N, rocm:N or gpu:N; repeatable (default: every device)");
  cmd->add_option("--op", a->op, "only this op's cases (`wick ops` lists them) or one case by full name")
      ->type_name("NAME");
  cmd->add_option("--dtype", a->dtype, "only the cases of this dtype")
      ->type_name("T")
      ->check(CLI::IsMember(dtype_names()));
  cmd->add_flag("-v,--verbose", a->verbose, "print every case, not only the failures");
  return {cmd, [a] {
            check::Options opt;
            opt.devices = parse_devices(a->devices);
            opt.op = a->op;
            opt.dtype = a->dtype;
            opt.verbose = a->verbose;
            std::string why = check::check_filter_mismatch(check::all_cases(), opt);
            if (!why.empty()) throw UsageError(why);
            check::Summary sum = check::run_checks(opt);
            std::printf("%zu passed, %zu failed\n", sum.passed, sum.failed);
            return sum.failed == 0 ? 0 : 1;
          }};
}

// ---- bench

struct BenchArgs {
  std::vector<std::string> devices;
  std::string op, suite = "default", size = "default";
  bool json = false, quick = false;
  int reps = 5;
};

// `bench --suite torch`: one JSON array (or a table) of its cases; a case the device cannot
// run (Unsupported, out of memory) is reported as skipped, any other failure as an error (exit 1).
int run_bench_torch(std::vector<Device> devices, const std::string& op, bool json, bool quick) {
  std::vector<check::TorchCase> cases = check::torch_cases(quick);
  std::string why = check::torch_filter_mismatch(cases, op);
  if (!why.empty()) throw UsageError(why);
  if (devices.empty()) {
    for (const Device& d : available_devices())
      if (!d.is_cpu()) {
        devices.push_back(d);
        break;
      }
    if (devices.empty()) devices.push_back(Device::cpu());
  }
  // A repeat lasts at least this long; quick runs are smoke tests, so shorter.
  const double min_repeat_s = quick ? 0.005 : 0.02;
  nlohmann::json out = nlohmann::json::array();
  bool failed = false;
  if (!json)
    std::printf("%-8s %-30s %-10s %-22s %6s %12s %16s\n", "device", "case", "dtype", "shape", "iters", "ms/call",
                "rate");
  for (const Device& d : devices)
    for (const auto& c : cases) {
      if (!check::torch_selected(c, op)) continue;
      if (json) std::fprintf(stderr, "bench: %s %s ...\n", d.name().c_str(), c.name.c_str());
      check::TorchResult r = check::run_torch_case(c, d, min_repeat_s);
      failed = failed || !r.error.empty();
      if (json) {
        nlohmann::json j = {{"case", c.name},   {"op", c.op},       {"device", d.name()}, {"dtype", c.dtype},
                            {"shape", c.shape}, {"bytes", c.bytes}, {"flops", c.flops},   {"unit", r.unit}};
        if (c.ops_per_call > 0) j["ops_per_call"] = c.ops_per_call;
        if (!r.skipped.empty() || !r.error.empty()) {
          j["seconds"] = nullptr;
          j["value"] = nullptr;
          j[r.error.empty() ? "skipped" : "error"] = r.error.empty() ? r.skipped : r.error;
        } else {
          j["seconds"] = r.seconds;
          j["iters"] = r.iters;
          j["value"] = r.value;
        }
        out.push_back(j);
      } else {
        std::string shape = shape_str(c.shape);
        if (!r.skipped.empty() || !r.error.empty()) {
          std::printf("%-8s %-30s %-10s %-22s %s: %s\n", d.name().c_str(), c.name.c_str(), c.dtype.c_str(),
                      shape.c_str(), r.error.empty() ? "skipped" : "ERROR",
                      (r.error.empty() ? r.skipped : r.error).c_str());
        } else {
          char rate[64];
          std::snprintf(rate, sizeof rate, "%.3f %s", r.value, r.unit.c_str());
          std::printf("%-8s %-30s %-10s %-22s %6zu %12.4f %16s\n", d.name().c_str(), c.name.c_str(), c.dtype.c_str(),
                      shape.c_str(), r.iters, r.seconds * 1e3, rate);
        }
        std::fflush(stdout);
      }
    }
  if (json) std::printf("%s\n", out.dump(1).c_str());
  return failed ? 1 : 0;
}

// `bench --suite quant`: the quantized cases, timed as the torch suite times its cases, each
// printed as a percentage of its baseline (copy bandwidth or the f16 matmul) measured first on the
// same device. A baseline runs whenever a selected case needs it.
int run_bench_quant(std::vector<Device> devices, const std::string& op, bool json, bool quick) {
  std::vector<check::QuantBenchCase> cases = check::quant_bench_cases(quick);
  auto selected = [&](const check::QuantBenchCase& c) {
    return op.empty() || c.timing.name.find(op) != std::string::npos;
  };
  if (std::none_of(cases.begin(), cases.end(), selected)) {
    std::vector<std::string> names;
    for (const auto& c : cases) names.push_back(c.timing.name);
    throw UsageError("--op '" + op +
                     "' is in no quant-suite case name (--op matches a substring of one); the cases are:\n" +
                     check::wrap_list(names));
  }
  if (devices.empty()) {
    for (const Device& d : available_devices())
      if (!d.is_cpu()) {
        devices.push_back(d);
        break;
      }
    if (devices.empty()) devices.push_back(Device::cpu());
  }
  const double min_repeat_s = quick ? 0.005 : 0.02;
  nlohmann::json out = nlohmann::json::array();
  bool failed = false;
  if (!json)
    std::printf("%-8s %-34s %-6s %-18s %6s %10s %16s  %s\n", "device", "case", "type", "m x k x n", "iters", "ms/call",
                "rate", "% of baseline");
  for (const Device& d : devices) {
    std::map<std::string, double> rate;  // baseline name -> its rate on this device
    std::vector<bool> needed(cases.size(), false);
    for (size_t i = 0; i < cases.size(); ++i)
      if (selected(cases[i])) {
        needed[i] = true;
        for (size_t j = 0; j < cases.size(); ++j)
          if (cases[j].timing.name == cases[i].baseline) needed[j] = true;
      }
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!needed[i]) continue;
      const check::TorchCase& c = cases[i].timing;
      const std::string& base = cases[i].baseline;
      if (json) std::fprintf(stderr, "bench: %s %s ...\n", d.name().c_str(), c.name.c_str());
      check::TorchResult r = check::run_torch_case(c, d, min_repeat_s);
      failed = failed || !r.error.empty();
      const bool ran = r.skipped.empty() && r.error.empty();
      if (ran && base.empty()) rate[c.name] = r.value;
      const bool have_pct = ran && !base.empty() && rate.count(base) && rate[base] > 0;
      const double pct = have_pct ? 100.0 * r.value / rate[base] : 0;
      if (json) {
        nlohmann::json j = {{"case", c.name},
                            {"op", c.op},
                            {"device", d.name()},
                            {"type", c.dtype},
                            {"shape", c.shape},
                            {"bytes", c.bytes},
                            {"flops", c.flops},
                            {"unit", r.unit},
                            {"baseline", base.empty() ? nlohmann::json(nullptr) : nlohmann::json(base)}};
        if (!ran) {
          j["seconds"] = nullptr;
          j["value"] = nullptr;
          j[r.error.empty() ? "skipped" : "error"] = r.error.empty() ? r.skipped : r.error;
        } else {
          j["seconds"] = r.seconds;
          j["iters"] = r.iters;
          j["value"] = r.value;
        }
        j["percent"] = have_pct ? nlohmann::json(pct) : nlohmann::json(nullptr);
        out.push_back(j);
        continue;
      }
      std::string shape = c.shape.size() == 3 ? std::to_string(c.shape[0]) + "x" + std::to_string(c.shape[1]) + "x" +
                                                    std::to_string(c.shape[2])
                                              : shape_str(c.shape);
      if (!ran) {
        std::printf("%-8s %-34s %-6s %-18s %s: %s\n", d.name().c_str(), c.name.c_str(), c.dtype.c_str(), shape.c_str(),
                    r.error.empty() ? "skipped" : "ERROR", (r.error.empty() ? r.skipped : r.error).c_str());
      } else {
        char rt[64], pc[96];
        std::snprintf(rt, sizeof rt, "%.3f %s", r.value, r.unit.c_str());
        if (base.empty())
          std::snprintf(pc, sizeof pc, "(baseline)");
        else if (have_pct)
          std::snprintf(pc, sizeof pc, "%.1f%% of %s", pct, base.c_str());
        else
          std::snprintf(pc, sizeof pc, "- (%s did not run)", base.c_str());
        std::printf("%-8s %-34s %-6s %-18s %6zu %10.4f %16s  %s\n", d.name().c_str(), c.name.c_str(), c.dtype.c_str(),
                    shape.c_str(), r.iters, r.seconds * 1e3, rt, pc);
      }
      std::fflush(stdout);
    }
  }
  if (json) std::printf("%s\n", out.dump(1).c_str());
  return failed ? 1 : 0;
}

int run_bench(const BenchArgs& a, bool reps_given, bool size_given) {
  std::vector<Device> devices = parse_devices(a.devices);
  if (a.suite == "torch" || a.suite == "quant") {
    if (reps_given || size_given)
      throw UsageError(std::string(reps_given ? "--reps" : "--size") + " belongs to the default suite; --suite " +
                       a.suite + " repeats each case for a fixed time (--quick shrinks its shapes)");
    return a.suite == "torch" ? run_bench_torch(devices, a.op, a.json, a.quick)
                              : run_bench_quant(devices, a.op, a.json, a.quick);
  }
  if (a.quick) throw UsageError("--quick belongs to --suite torch and --suite quant; use --size small here");
  check::BenchSize size = a.size == "small"   ? check::BenchSize::Small
                          : a.size == "large" ? check::BenchSize::Large
                                              : check::BenchSize::Default;
  std::vector<check::BenchCase> cases = check::bench_cases(size);
  std::string why = check::bench_filter_mismatch(cases, a.op);
  if (!why.empty()) throw UsageError(why);
  if (devices.empty()) devices = available_devices();
  nlohmann::json out = nlohmann::json::array();
  if (!a.json)
    std::printf("%-8s %-28s %-20s %-9s %11s %12s\n", "device", "case", "shape", "dtype", "median ms", "rate");
  for (const Device& d : devices)
    for (const auto& c : cases) {
      if (!check::bench_selected(c, a.op, size)) continue;
      check::BenchResult r = check::run_bench(c, d, a.reps);
      if (a.json) {
        nlohmann::json shape = c.shape;
        out.push_back({{"name", r.name},
                       {"device", d.name()},
                       {"shape", shape},
                       {"dtype", r.dtype},
                       {"median_ms", r.median_ms},
                       {"gbps", r.gbps > 0 ? nlohmann::json(r.gbps) : nlohmann::json(nullptr)},
                       {"gflops", r.gflops > 0 ? nlohmann::json(r.gflops) : nlohmann::json(nullptr)}});
      } else {
        char rate[64];
        if (r.gflops > 0)
          std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", r.gflops);
        else
          std::snprintf(rate, sizeof rate, "%.2f GB/s", r.gbps);
        std::printf("%-8s %-28s %-20s %-9s %11.3f %12s\n", d.name().c_str(), r.name.c_str(), r.shape.c_str(),
                    r.dtype.c_str(), r.median_ms, rate);
        std::fflush(stdout);
      }
    }
  if (a.json) std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

Command add_bench(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("bench", "timed cases: warm-up once, then the median of --reps runs");
  cmd->footer(
      "--suite torch: the cases bench/vs_torch.py times beside PyTorch; default device: the first GPU, else cpu.\n"
      "--suite quant: quantized matrix-vector (1 x k x n; Q4_0, Q4_K, Q6_K, Q8_0, MXFP4) as weight bytes / time,\n"
      "in % of the copy bandwidth measured in the same run (GPU: device copy, bytes read + written; CPU: a read\n"
      "loop on every core), and Q4_K 512x4096x4096 in % of the f16 matmul's TFLOP/s; default device as torch.\n"
      "Both take --device, --op, --json and --quick, not --reps or --size.\n");
  auto a = std::make_shared<BenchArgs>();
  add_device_option(cmd, &a->devices, "cpu, cuda:N, rocm:N or gpu:N; repeatable (default: every device)");
  cmd->add_option("--op", a->op, "only the cases whose name contains this (e.g. matmul)")->type_name("SUBSTR");
  cmd->add_flag("--json", a->json, "a JSON array on stdout instead of a table");
  cmd->add_option("--suite", a->suite, "torch: the cases of bench/vs_torch.py; quant: quantized cases (see below)")
      ->type_name("S")
      ->check(CLI::IsMember({"default", "torch", "quant"}));
  CLI::Option* size = cmd->add_option("--size", a->size, "small (a smoke test); large adds matmul_4096")
                          ->type_name("S")
                          ->check(CLI::IsMember({"small", "default", "large"}));
  CLI::Option* reps = cmd->add_option("--reps", a->reps, "timed runs per case (default 5)")
                          ->type_name("R")
                          ->check(CLI::Validator(
                              [](std::string& s) -> std::string {
                                try {
                                  size_t used = 0;
                                  long v = std::stol(s, &used);
                                  if (used == s.size() && v > 0 && v <= 1000000) return "";
                                } catch (const std::exception&) {
                                }
                                return "takes an integer > 0 (at most 1000000), not '" + s + "'";
                              },
                              ""));
  cmd->add_flag("--quick", a->quick, "--suite torch/quant only: shrink every shape, for a smoke test");
  return {cmd, [a, size, reps] { return run_bench(*a, reps->count() > 0, size->count() > 0); }};
}

// ---- ops

Command add_ops(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("ops", "the op names `wick check --op` takes, one a line");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown, "print docs/ops.md instead: every op x dtype x backend, from the op table");
  return {cmd, [markdown] {
            if (*markdown) {
              std::fputs(check::ops_markdown().c_str(), stdout);
            } else {
              for (const auto& n : check::case_op_names(check::all_cases())) std::printf("%s\n", n.c_str());
            }
            return 0;
          }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("wick " WICK_VERSION ": a tensor library's command line.", "wick");
  app.set_version_flag("--version", "wick " WICK_VERSION);
  app.require_subcommand(1);
  app.footer("`wick <command> --help` describes a command's options.\n");
  std::vector<Command> commands = {add_info(app), add_quantize(app), add_check(app), add_bench(app), add_ops(app)};
  for (auto [cmd, run] : {wick::cli::add_run(app), wick::cli::add_perplexity(app), wick::cli::add_bench_llm(app),
                          wick::cli::add_bench_batch(app)})
    commands.push_back({cmd, run});
  std::string names;
  for (const Command& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();

  if (argc < 2) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  // Only --help and --version come before the command; anything else there gets its own message
  // (CLI11 would call a word an extra argument, an option a missing subcommand).
  std::string first = argv[1];
  bool known = first == "-h" || first == "--help" || first == "--version";
  for (const Command& c : commands) known = known || c.app->get_name() == first;
  if (!known) {
    std::fprintf(stderr, "wick: unknown %s '%s'; the commands are %s (see wick --help)\n",
                 first.rfind("-", 0) == 0 ? "option" : "command", first.c_str(), names.c_str());
    return 2;
  }

  // llama-batched-bench's spellings (-npp, -ntg, -npl: three letters after one dash), which CLI11 takes with two.
  if (first == "bench-batch")
    for (int i = 2; i < argc; ++i)
      for (const char* o : {"--npp", "--ntg", "--npl"})
        if (std::strcmp(argv[i], o + 1) == 0) argv[i] = const_cast<char*>(o);
  const Command* chosen = nullptr;
  auto where = [&] { return chosen ? "wick " + chosen->app->get_name() : std::string("wick"); };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    for (const Command& c : commands)
      if (c.app->parsed()) chosen = &c;
    std::fprintf(stderr, "%s: %s\nsee `%s --help`\n", where().c_str(), e.what(), where().c_str());
    return 2;
  }
  for (const Command& c : commands)
    if (c.app->parsed()) chosen = &c;
  try {
    return chosen->run();
  } catch (const UsageError& e) {
    std::string msg = e.what();
    if (msg.empty() || msg.back() != '\n') msg += '\n';
    std::fprintf(stderr, "%s: %s", where().c_str(), msg.c_str());
    return 2;
  } catch (const std::exception& e) {  // wick::Error, or a bug: the message, exit 1
    std::fprintf(stderr, "%s: %s\n", where().c_str(), e.what());
    return 1;
  }
}

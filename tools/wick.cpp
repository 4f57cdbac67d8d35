// The `wick` command: info, check (op parity harness), bench.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check/bench.hpp"
#include "check/check.hpp"
#include "wick/wick.hpp"

using namespace wick;

static void usage(FILE* f) {
  std::fprintf(f,
               "usage: wick <command> [options]\n"
               "  info                               version, backends, devices, threads\n"
               "  check [--device D] [--op NAME] [--dtype T] [--verbose]\n"
               "                                     op x dtype x layout parity cases; exit 0 when all pass\n"
               "  bench [--device D] [--op NAME] [--json] [--size small|default|large] [--reps R]\n"
               "                                     timed cases (median of R runs after a warm-up)\n"
               "  bench --suite torch [--device D] [--op SUBSTR] [--json] [--quick]\n"
               "                                     the cases bench/vs_torch.py times beside PyTorch\n"
               "                                     (default device: the first GPU, else cpu; --quick\n"
               "                                     shrinks every shape for a smoke test)\n");
}

// Options of the form --name value or --flag.
struct Args {
  std::vector<std::string> v;
  size_t i = 0;
  bool next(std::string* a) {
    if (i >= v.size()) return false;
    *a = v[i++];
    return true;
  }
  std::string value(const std::string& opt) {
    if (i >= v.size()) throw Error(ErrorKind::Argument, opt + " needs a value");
    return v[i++];
  }
};

static int cmd_info() {
  std::printf("wick %s\n", WICK_VERSION);
  std::printf("backends built:");
  for (const auto& b : built_backends()) std::printf(" %s", b.c_str());
  std::printf("\ndevices:");
  for (const auto& d : available_devices()) std::printf(" %s", d.name().c_str());
  std::printf("\nopenmp threads: %d\n", omp_get_max_threads());
  for (const auto& d : available_devices()) {
    if (d.is_cpu()) continue;
    DeviceInfo i = device_info(d);
    MemoryStats m = memory_stats(d);
    std::printf("%s: %s, %s, %.1f GiB, warp size %d, %d compute units; wick holds %zu bytes, caches %zu\n",
                d.name().c_str(), i.name.c_str(), i.arch.c_str(), double(i.total_memory) / double(1 << 30),
                i.warp_size, i.compute_units, m.in_use, m.cached);
  }
  for (const auto& b : built_backends()) {
    if (b == "cpu") continue;
    std::string why = gpu_unavailable_reason();
    if (!why.empty()) std::printf("%s: no usable device: %s\n", b.c_str(), why.c_str());
  }
  return 0;
}

static int cmd_check(Args& a) {
  check::Options opt;
  std::string s;
  while (a.next(&s)) {
    if (s == "--device") opt.devices.push_back(Device::parse(a.value(s)));
    else if (s == "--op") opt.op = a.value(s);
    else if (s == "--dtype") opt.dtype = dtype_name(dtype_from_name(a.value(s)));
    else if (s == "--verbose" || s == "-v") opt.verbose = true;
    else throw Error(ErrorKind::Argument, "check: unknown option '" + s + "'; see wick --help");
  }
  check::Summary sum = check::run_checks(opt);
  if (sum.passed + sum.failed == 0)
    std::fprintf(stderr, "check: no case matches --op '%s' --dtype '%s'\n", opt.op.c_str(), opt.dtype.c_str());
  std::printf("%zu passed, %zu failed\n", sum.passed, sum.failed);
  if (sum.passed + sum.failed == 0) return 2;  // a typo in --op must not look like a pass
  return sum.failed == 0 ? 0 : 1;
}

// `bench --suite torch`: one JSON array (or a table) of issue 4's cases; a case the device cannot
// run (Unsupported, out of memory) is reported as skipped, any other failure as an error (exit 1).
static int cmd_bench_torch(std::vector<Device> devices, const std::string& op, bool json, bool quick) {
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
  size_t matched = 0;
  if (!json)
    std::printf("%-8s %-30s %-10s %-22s %6s %12s %16s\n", "device", "case", "dtype", "shape", "iters", "ms/call",
                "rate");
  for (const Device& d : devices)
    for (const auto& c : check::torch_cases(quick)) {
      if (!op.empty() && c.name.find(op) == std::string::npos) continue;
      ++matched;
      if (json) std::fprintf(stderr, "bench: %s %s ...\n", d.name().c_str(), c.name.c_str());
      check::TorchResult r = check::run_torch_case(c, d, min_repeat_s);
      failed = failed || !r.error.empty();
      if (json) {
        nlohmann::json j = {{"case", c.name}, {"op", c.op}, {"device", d.name()}, {"dtype", c.dtype},
                            {"shape", c.shape}, {"bytes", c.bytes}, {"flops", c.flops}, {"unit", r.unit}};
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
  if (matched == 0) {
    std::fprintf(stderr, "bench: no torch-suite case matches --op '%s'\n", op.c_str());
    return 2;
  }
  return failed ? 1 : 0;
}

static int cmd_bench(Args& a) {
  std::vector<Device> devices;
  std::string op, s, suite = "default";
  bool json = false, quick = false;
  int reps = 5;
  check::BenchSize size = check::BenchSize::Default;
  while (a.next(&s)) {
    if (s == "--device") devices.push_back(Device::parse(a.value(s)));
    else if (s == "--op") op = a.value(s);
    else if (s == "--json") json = true;
    else if (s == "--quick") quick = true;
    else if (s == "--suite") suite = a.value(s);
    else if (s == "--reps") reps = std::stoi(a.value(s));
    else if (s == "--size") {
      std::string v = a.value(s);
      if (v == "small") size = check::BenchSize::Small;
      else if (v == "default") size = check::BenchSize::Default;
      else if (v == "large") size = check::BenchSize::Large;
      else throw Error(ErrorKind::Argument, "bench: --size takes small, default or large, not '" + v + "'");
    } else throw Error(ErrorKind::Argument, "bench: unknown option '" + s + "'; see wick --help");
  }
  if (suite == "torch") return cmd_bench_torch(devices, op, json, quick);
  if (suite != "default")
    throw Error(ErrorKind::Argument, "bench: --suite takes default or torch, not '" + suite + "'");
  if (quick) throw Error(ErrorKind::Argument, "bench: --quick belongs to --suite torch; use --size small here");
  if (devices.empty()) devices = available_devices();
  nlohmann::json out = nlohmann::json::array();
  if (!json)
    std::printf("%-8s %-28s %-20s %-9s %11s %12s\n", "device", "case", "shape", "dtype", "median ms", "rate");
  for (const Device& d : devices)
    for (const auto& c : check::bench_cases(size)) {
      bool named = !op.empty() && c.name.find(op) != std::string::npos;
      if (!op.empty() && !named) continue;
      if (c.large_only && !named && size != check::BenchSize::Large) continue;
      check::BenchResult r = check::run_bench(c, d, reps);
      if (json) {
        nlohmann::json shape = c.shape;
        out.push_back({{"name", r.name}, {"device", d.name()}, {"shape", shape}, {"dtype", r.dtype},
                       {"median_ms", r.median_ms},
                       {"gbps", r.gbps > 0 ? nlohmann::json(r.gbps) : nlohmann::json(nullptr)},
                       {"gflops", r.gflops > 0 ? nlohmann::json(r.gflops) : nlohmann::json(nullptr)}});
      } else {
        char rate[64];
        if (r.gflops > 0) std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", r.gflops);
        else std::snprintf(rate, sizeof rate, "%.2f GB/s", r.gbps);
        std::printf("%-8s %-28s %-20s %-9s %11.3f %12s\n", d.name().c_str(), r.name.c_str(), r.shape.c_str(),
                    r.dtype.c_str(), r.median_ms, rate);
        std::fflush(stdout);
      }
    }
  if (json) std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  Args a;
  for (int i = 2; i < argc; ++i) a.v.push_back(argv[i]);
  std::string cmd = argv[1];
  try {
    if (cmd == "info") return cmd_info();
    if (cmd == "check") return cmd_check(a);
    if (cmd == "bench") return cmd_bench(a);
    std::fprintf(stderr, "wick: unknown command '%s'\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wick %s: %s\n", cmd.c_str(), e.what());
    return 2;
  }
}

#include "backend/options.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wick/error.hpp"

namespace wick::backend {
namespace {

[[noreturn]] void bad_value(const char* name, std::string_view value, const char* accepted) {
  throw Error(ErrorKind::Argument, std::string(name) + "=" + std::string(value) + " is not one of its values: " +
                                       accepted + "; unset, empty or auto leaves the choice to the library");
}

// The value of an enum switch: `choices` pairs each accepted spelling with its value; unset, empty
// and "auto" give `fallback`.
template <class T>
T pick(const EnvLookup& lookup, const char* name, std::initializer_list<std::pair<std::string_view, T>> choices,
       T fallback, const char* accepted) {
  const char* e = lookup(name);
  if (!e || !*e || std::string_view(e) == "auto") return fallback;
  for (const auto& [spelling, value] : choices)
    if (spelling == e) return value;
  bad_value(name, e, accepted);
}

// A whole decimal number from `least` up, or `fallback` where unset, empty or "auto".
int64_t integer(const EnvLookup& lookup, const char* name, int64_t least, int64_t fallback, const char* accepted) {
  const char* e = lookup(name);
  if (!e || !*e || std::string_view(e) == "auto") return fallback;
  const std::string_view s(e);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < least) bad_value(name, s, accepted);
  return v;
}

// OMP_NUM_THREADS as libgomp reads its first level: digits, then the end or a ',' before the nested
// levels; anything else (0, a sign, junk) is ignored, not an error, since other libraries of the
// same process read this variable too. OMP_THREAD_LIMIT, OMP_DYNAMIC and the place lists are not
// read: the CPU pool has one level and pins nothing.
size_t omp_threads(const EnvLookup& lookup) {
  constexpr size_t kMax = 1024;
  const char* e = lookup("OMP_NUM_THREADS");
  if (!e) return 0;
  while (*e == ' ' || *e == '\t') ++e;
  size_t n = 0;
  const char* p = e;
  for (; *p >= '0' && *p <= '9'; ++p) n = std::min(n * 10 + size_t(*p - '0'), kMax + 1);
  while (*p == ' ' || *p == '\t') ++p;
  return p != e && (*p == '\0' || *p == ',') && n >= 1 ? std::min(n, kMax) : 0;
}

// The current snapshot, read without a lock; null until the environment parses or set_options
// runs. Snapshots are immutable and never freed, so a reference options() gave stays valid.
std::atomic<const Options*> g_current{nullptr};
std::mutex g_mu;  // the writers: the first parse and set_options

// Keeps every snapshot published (set_options runs a few times a process, from tests and
// benchmarks); never destroyed, so a thread still reading one at exit reads live memory.
const Options* publish(const Options& o) {
  static auto* const snapshots = new std::vector<std::unique_ptr<const Options>>;
  const Options* p = snapshots->emplace_back(std::make_unique<const Options>(o)).get();
  g_current.store(p, std::memory_order_release);
  return p;
}

}  // namespace

Options parse_options(const EnvLookup& lookup) {
  Options o;
  o.decode_attn = pick(lookup, "WICK_DECODE_ATTN", {{"runs", DecodeAttn::Runs}, {"stream", DecodeAttn::Stream}},
                       DecodeAttn::Auto, "runs (the runs kernel) or stream (the streaming kernel)");
  o.decode_merge_all =
      pick(lookup, "WICK_DECODE_MERGE", {{"all", true}}, false, "all (the merge kernel finishes every row)");
  o.decode_one_run_keys = integer(lookup, "WICK_DECODE_ONE_RUN", 0, -1,
                                  "a number of keys >= 0 (views of at most that many keys in one run; 0: never)");
  o.decode_registers =
      pick(lookup, "WICK_DECODE_STAGES", {{"0", true}}, false, "0 (the streaming decode kernel loads into registers)");
  o.flash_wgmma = pick(lookup, "WICK_FLASH_WGMMA",
                       {{"0", FlashWgmma::Off},
                        {"2p", FlashWgmma::G2Pipe},
                        {"2s", FlashWgmma::G2Serial},
                        {"3p", FlashWgmma::G3Pipe},
                        {"3s", FlashWgmma::G3Serial}},
                       FlashWgmma::Auto, "0 (the mma.sync kernel), 2p, 2s, 3p or 3s (warpgroups, pipelined or serial)");
  o.qmv_unstaged = pick(lookup, "WICK_QMV_STAGED", {{"0", true}}, false, "0 (one-row products off the staged kernel)");
  o.qmv_norm_block = pick(lookup, "WICK_QMV_NORM_BLOCK", {{"128", 128}, {"256", 256}, {"512", 512}}, 0,
                          "128, 256 or 512 (threads a block)");
  o.cpu_isa =
      pick(lookup, "WICK_CPU_ISA", {{"scalar", CpuIsa::Scalar}, {"avx2", CpuIsa::Avx2}, {"avx512", CpuIsa::Avx512}},
           CpuIsa::Auto, "scalar, avx2 or avx512 (capped at what the CPU has)");
  o.qmatmul_path = pick(lookup, "WICK_QMATMUL_PATH", {{"rows", QMatmulPath::Rows}, {"sgemm", QMatmulPath::Sgemm}},
                        QMatmulPath::Auto, "rows (the row kernels) or sgemm (dequantize + f32 sgemm)");
  o.cpu_threads = omp_threads(lookup);
  return o;
}

const Options& options() {
  if (const Options* o = g_current.load(std::memory_order_acquire)) return *o;
  const std::lock_guard<std::mutex> lock(g_mu);
  if (const Options* o = g_current.load(std::memory_order_relaxed)) return *o;  // another thread parsed
  // A bad value throws before anything is published, so the next call parses (and throws) again.
  return *publish(parse_options([](const char* name) -> const char* { return std::getenv(name); }));
}

void set_options(const Options& o) {
  const std::lock_guard<std::mutex> lock(g_mu);
  publish(o);
}

}  // namespace wick::backend

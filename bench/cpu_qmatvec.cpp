// CPU quantized matrix-vector speed against the machine's read bandwidth (the target: Q4_0
// and Q8_0 matrix-vector at >= 80% of the measured memory bandwidth for a 4096x11008 weight).
//
//   bench_cpu_qmatvec [--reps N] [--quick] [--shape NxK ...] [--type T ...]
//   (--shape: W's (rows, k) for part 2 instead of 11008x4096, repeatable, e.g. a 1.1B decode step's
//   2560x2048 2048x2048 11264x2048 2048x5632 32000x2048; --type: only these types in part 2)
//
// 1. Read bandwidth: a sum over a 1 GiB buffer on all the pool's threads, whole and in 32 MiB
//    windows (see Reader), best of N; windows are also read between the timed runs of (2), and
//    each row's % is against the best of those (the same load as the row's runs).
// 2. y = x @ W^T for x (1, 4096) f32 and W (11008, 4096) in Q4_0, Q8_0, Q4_K, Q6_K (+ the other
//    SIMD types) at every kernel level the CPU has: best and median time, GB/s of weight bytes
//    (best), % of (1). The runs cycle through copies of W that together fill 1 GiB.
//    On a shared machine (other jobs on the cores) the medians measure the scheduler; the best of
//    many short runs is what the kernels do when they have the cores (the load average is printed
//    before and after).
// 3. More rows (Q4_0, Q8_0, Q4_K, W 4096x4096): the default path (the AVX-512 panel kernels where
//    the type has one), the row kernels in groups of 8 rows, and dequantize + sgemm, GFLOP/s.
// Weights are random f32 rows quantized by wick's CPU quantizer, tiled to the full height (every
// row has its own bytes in memory, so the weight stream is all 11008 rows).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/qdot.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend/options.hpp"
#include "wick/quant.hpp"
#include "wick/wick.hpp"

using namespace wick;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The 1-minute load average (/proc/loadavg), or -1.
double loadavg() {
  double v = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &v) != 1) v = -1;
    std::fclose(f);
  }
  return v;
}

// Sum of n uint64 with 4 AVX2 accumulators (read-only stream); scalar where AVX2 is missing.
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  uint64_t s = t[0] + t[1] + t[2] + t[3];
  for (; i < n; ++i) s += p[i];
  return s;
}
uint64_t sum_scalar(const uint64_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

// Read bandwidth with every pool thread: sums over `window` bytes of a `bytes` buffer at a time,
// the windows taken in turn (the buffer exceeds the last-level cache, so each is read from
// memory). Windows of about the weights' size make the two measurements alike: on a shared
// machine a run of a few ms is more often spared by the scheduler than one of 100 ms.
class Reader {
 public:
  Reader(size_t bytes, size_t window)
      : n_(bytes / 8),
        win_chunks_(std::max<size_t>(1, window / 8 / kPer)),
        p_(static_cast<uint64_t*>(std::aligned_alloc(64, n_ * 8))),
        part_((n_ + kPer - 1) / kPer) {
    // First touch on the pool too (pages spread as the threads will read them).
    cpu::parallel_chunks(
        part_.size(),
        [](void* c, size_t i) {
          Reader& r = *static_cast<Reader*>(c);
          const size_t s = i * kPer, e = std::min(r.n_, s + kPer);
          for (size_t j = s; j < e; ++j) r.p_[j] = j;
        },
        this);
  }
  ~Reader() { std::free(p_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // GB/s of reading the next window (all windows: the whole buffer at once).
  double next(bool whole = false) {
    const size_t cw = whole ? part_.size() : win_chunks_;
    first_ = whole ? 0 : (next_++ % (part_.size() / cw)) * cw;
    const auto t0 = Clock::now();
    cpu::parallel_chunks(
        cw,
        [](void* c, size_t i) {
          Reader& r = *static_cast<Reader*>(c);
          const size_t s = (r.first_ + i) * kPer, len = std::min(r.n_, s + kPer) - s;
          r.part_[r.first_ + i] = r.avx2_ ? sum_avx2(r.p_ + s, len) : sum_scalar(r.p_ + s, len);
        },
        this);
    const double t = secs(t0, Clock::now());
    for (size_t i = 0; i < cw; ++i) check_ ^= part_[first_ + i];
    return double(std::min(n_, (first_ + cw) * kPer) - first_ * kPer) * 8 / t / 1e9;
  }
  uint64_t check() const { return check_; }

 private:
  static constexpr size_t kPer = size_t(1) << 15;  // uint64 per chunk (256 KiB)
  size_t n_, win_chunks_;
  uint64_t* p_;
  std::vector<uint64_t> part_;
  size_t first_ = 0, next_ = 0;
  uint64_t check_ = 0;
  bool avx2_ = __builtin_cpu_supports("avx2") != 0;
};

// `copies` (rows, k) weights of type t, each its own storage: 64 random rows quantized by wick,
// tiled. The timed runs cycle through the copies, which together exceed the last-level cache (260
// MiB on the 2-core machine: one 25 MB weight would be read from L3, not memory).
std::vector<QTensor> make_weights(GGMLType t, size_t rows, size_t k, size_t copies) {
  const size_t base = 64;
  const QTensor q = QTensor::quantize(Tensor::randn({base, k}, DType::F32, Device::cpu(), 42), t);
  const std::vector<uint8_t> b = q.to_bytes();
  std::vector<uint8_t> all(b.size() / base * rows);
  for (size_t off = 0; off < all.size(); off += b.size())
    std::memcpy(all.data() + off, b.data(), std::min(b.size(), all.size() - off));
  std::vector<QTensor> ws;
  for (size_t c = 0; c < copies; ++c) ws.push_back(QTensor::from_bytes(t, {rows, k}, all.data(), all.size()));
  return ws;
}

struct Timing {
  double best, median;  // seconds
  double bw;            // best read bandwidth (GB/s) of the windows read between the runs
};

// y = x @ W^T over reps runs cycling through the weights (after one warm-up each), a bandwidth
// window read before each run: the % compares the two under the same load.
Timing time_matmul(const std::vector<QTensor>& ws, const Tensor& x, int reps, Reader* rd) {
  for (const QTensor& w : ws) (void)w.matmul_t(x);
  std::vector<double> t;
  double bw = 0;
  for (int r = 0; r < reps; ++r) {
    if (rd) bw = std::max(bw, rd->next());
    const QTensor& w = ws[size_t(r) % ws.size()];
    const auto t0 = Clock::now();
    Tensor y = w.matmul_t(x);
    t.push_back(secs(t0, Clock::now()));
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], bw};
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  bool quick = false;
  std::vector<std::pair<size_t, size_t>> shapes;  // (n, k)
  // Part 2's types; --type picks among them (the ones with row kernels this bench was written for).
  std::vector<GGMLType> types = {GGMLType::Q4_0, GGMLType::Q8_0,   GGMLType::Q4_K, GGMLType::Q6_K,  GGMLType::IQ4_NL,
                                 GGMLType::MXFP4, GGMLType::Q5_K, GGMLType::IQ4_XS, GGMLType::Q3_K};
  std::vector<GGMLType> only;
  const char* usage = "usage: bench_cpu_qmatvec [--reps N] [--quick] [--shape NxK ...] [--type T ...]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--shape" && i + 1 < argc) {
      const std::string v = argv[++i];
      const size_t x = v.find('x');
      const long rn = x == std::string::npos ? 0 : std::atol(v.c_str());
      const long rk = x == std::string::npos ? 0 : std::atol(v.c_str() + x + 1);
      if (rn <= 0 || rk <= 0 || rk % 256 != 0) {
        std::fprintf(stderr, "bench_cpu_qmatvec: --shape wants NxK with K a multiple of 256, got %s\n%s", v.c_str(),
                     usage);
        return 2;
      }
      shapes.emplace_back(size_t(rn), size_t(rk));
    } else if (a == "--type" && i + 1 < argc) {
      const auto t = ggml_type_from_name(argv[++i]);
      if (!t || std::find(types.begin(), types.end(), *t) == types.end()) {
        std::fprintf(stderr,
                     "bench_cpu_qmatvec: --type takes Q4_0 Q8_0 Q4_K Q6_K IQ4_NL MXFP4 Q5_K IQ4_XS Q3_K, got %s\n%s",
                     argv[i], usage);
        return 2;
      }
      only.push_back(*t);
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  if (shapes.empty()) shapes.emplace_back(11008, 4096);
  std::printf("threads %zu, kernel levels up to %s, load average %.2f\n", cpu::pool_threads(),
              cpu::qdot::isa_name(cpu::qdot::best_isa()), loadavg());
  const size_t big = quick ? (size_t(256) << 20) : (size_t(1) << 30);
  Reader rd(big, size_t(32) << 20);
  double bw_whole = 0, bw_win = 0;
  for (int r = 0; r < (quick ? 3 : 5); ++r) bw_whole = std::max(bw_whole, rd.next(true));
  for (int r = 0; r < 4 * reps; ++r) bw_win = std::max(bw_win, rd.next());
  std::printf("read bandwidth, sum over %zu MiB (best): %.2f GB/s whole, %.2f in 32 MiB windows\n\n", big >> 20,
              bw_whole, bw_win);
  if (!only.empty()) types = only;
  for (const auto& [n, k] : shapes) {
    std::printf("matrix-vector y = x @ W^T, x 1x%zu f32, W %zux%zu, weights cycled through %zu MiB (%d runs)\n", k, n,
                k, big >> 20, reps);
    std::printf("(bw: the best 32 MiB window read between the runs; %% = GB/s / bw)\n");
    std::printf("%-7s %-7s %7s %8s %8s %8s %8s %7s\n", "type", "level", "MB", "best ms", "med ms", "GB/s", "bw", "%");
    const Tensor x1 = Tensor::randn({1, k}, DType::F32, Device::cpu(), 7);
    for (GGMLType t : types) {
      const size_t one = ggml_type_size(t) * n * k / ggml_block_size(t);
      const std::vector<QTensor> ws = make_weights(t, n, k, std::max<size_t>(2, big / one));
      for (int l = int(cpu::qdot::best_isa()); l >= 0; --l) {
        cpu::qdot::set_isa(cpu::qdot::Isa(l));
        const Timing tm = time_matmul(ws, x1, l == 0 ? std::max(3, reps / 5) : reps, &rd);
        const double gbps = double(one) / tm.best / 1e9;
        std::printf("%-7s %-7s %7.1f %8.3f %8.3f %8.2f %8.2f %6.1f%%\n", ggml_type_name(t),
                    cpu::qdot::isa_name(cpu::qdot::Isa(l)), double(one) / 1e6, tm.best * 1e3, tm.median * 1e3, gbps,
                    tm.bw, 100 * gbps / tm.bw);
        if (quick) break;
      }
    }
    std::printf("\n");
  }
  cpu::qdot::set_isa(cpu::qdot::best_isa());

  std::printf("\nmore rows, W 4096x4096: the default path (panel kernels where the type and level have one,\n"
              "else the row kernels, 8 rows per weight read), the row kernels (WICK_QMATMUL_PATH=rows) and\n"
              "dequantize + sgemm (WICK_QMATMUL_PATH=sgemm)\n");
  std::printf("%-7s %5s %10s %10s %10s %10s %10s %10s\n", "type", "m", "int ms", "GFLOP/s", "rows ms", "GFLOP/s",
              "sgemm ms", "GFLOP/s");
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q8_0, GGMLType::Q4_K}) {
    const std::vector<QTensor> w = make_weights(t, 4096, 4096, 1);
    for (size_t m : {8, 16, 64, 512}) {
      if (quick && m > 64) break;
      const Tensor x = Tensor::randn({m, 4096}, DType::F32, Device::cpu(), 3);
      const int r = m >= 512 ? 3 : std::max(3, reps / 4);
      const double si = time_matmul(w, x, r, nullptr).best;
      // Up to 8 rows every path is the row kernels: the default's time stands for them.
      const backend::Options saved = backend::options();
      backend::Options o = saved;
      o.qmatmul_path = backend::QMatmulPath::Rows;
      backend::set_options(o);
      const double sr = m > 8 ? time_matmul(w, x, r, nullptr).best : si;
      o.qmatmul_path = backend::QMatmulPath::Sgemm;
      backend::set_options(o);
      const double sb = m > 8 ? time_matmul(w, x, r, nullptr).best : si;
      backend::set_options(saved);
      const double fl = 2.0 * double(m) * 4096 * 4096;
      std::printf("%-7s %5zu %10.3f %10.1f %10.3f %10.1f %10.3f %10.1f\n", ggml_type_name(t), m, si * 1e3,
                  fl / si / 1e9, sr * 1e3, fl / sr / 1e9, sb * 1e3, fl / sb / 1e9);
    }
  }
  std::printf("\nload average %.2f\n", loadavg());
  if (rd.check() == 1) std::printf("(unlikely)\n");  // keeps the sums live
  return 0;
}

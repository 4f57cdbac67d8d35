// Quantized matrix-vector speed (an LLM decode step's products): y = x @ W^T for one row of x (and a
// few rows for reference) through wick's qmatvec (kernels/qmatmul.cu: the Q8_1 activation
// quantization and the matvec kernel, both timed), on raw device buffers so the Tensor layer's
// host work is not in the time. Effective weight bandwidth = bytes of the quantized W / time,
// printed beside the device copy bandwidth (a device-to-device memcpy: bytes read + written /
// time). Every measurement: CUDA/HIP events around N launches, best of R after a warm-up. W is
// replicated over enough copies to exceed 3x the L2 cache and the launches rotate through them,
// so the weights come from device memory, not from L2.
// Built in GPU builds with the tests (target gpu_qmatvec); run: build/gpu_qmatvec (WICK_BENCH_QTYPE=Q8_0: one type)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backend/gpu/kernels/qmatvec.hpp"
#include "backend/gpu/runtime.hpp"
#include "backend/gpu/tuning.hpp"
#include "gpu_bench_util.cuh"

using namespace wick;
using wick::gpu::qmatvec;
using wick::gpu::qmatvec_scratch_bytes;
int tune_rows1() { return wick::gpu::tune::kQmvRows1; }
int tune_block() { return wick::gpu::tune::kQmvBlock; }

namespace {

__global__ void fill_x(float* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(int(i * 37 % 101) - 50) * 0.02f;
}

}  // namespace

int main() {
  size_t l2 = 0;
  gpuStream_t s = open_bench("gpu_qmatvec", &l2);
  const double copy_bw = copy_bandwidth(s);

  struct Shape {
    size_t m, k, n;
  };
  const GGMLType types[] = {GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0, GGMLType::MXFP4};
  // The 7B decode products (o, gate or up, down, head), then the 1.1B ones (qkv, o, gate/up, down).
  const Shape shapes[] = {{1, 4096, 4096}, {1, 4096, 11008}, {1, 11008, 4096}, {1, 4096, 32000},
                          {1, 2048, 2560}, {1, 2048, 2048}, {1, 2048, 11264}, {1, 5632, 2048}};
  float *x, *y;
  void* scratch;
  CHECK(gpuMalloc(reinterpret_cast<void**>(&x), 8 * 32000 * sizeof(float)));
  CHECK(gpuMalloc(reinterpret_cast<void**>(&y), 8 * 32000 * sizeof(float)));
  CHECK(gpuMalloc(&scratch, qmatvec_scratch_bytes(8, 32000)));
  fill_x<<<256, 256, 0, s>>>(x, 8 * 32000);

  // The fixed cost of a call: 2 weight rows (the activation quantization, two launches).
  {
    void* w2;
    CHECK(gpuMalloc(&w2, 2 * 4096));
    fill_bytes<<<16, 256, 0, s>>>(static_cast<uint8_t*>(w2), 2 * 4096, 7);
    const double t0 = best_time(
        s, [&](int) { qmatvec(s, GGMLType::Q8_0, w2, 2, 4096 / 34 * 32, x, DType::F32, 1, 0, 4096, scratch, y); }, 200,
        7, 5);
    std::printf("fixed cost of a call (1x3840x2 Q8_0: quantize + matvec launches): %.2f us\n", t0 * 1e6);
    CHECK(gpuFree(w2));
  }

  // Times y = x @ W^T for each (rows, threads) per block in rs (0: the tuned value) into `times`;
  // returns the bytes of W.
  struct Cfg {
    int rows, threads;  // 0: the tuned value
  };
  auto run = [&](GGMLType t, Shape sh, const std::vector<Cfg>& rs, std::vector<double>& times) {
    const size_t bytes = sh.n * (sh.k / ggml_block_size(t)) * ggml_type_size(t);
    const size_t copies = std::max<size_t>(1, (3 * l2 + bytes - 1) / bytes);
    std::vector<void*> w(copies);
    for (size_t c = 0; c < copies; ++c) {
      CHECK(gpuMalloc(&w[c], bytes));
      fill_bytes<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(w[c]), bytes, uint32_t(c + 1));
    }
    const int iters = int(std::min<size_t>(200, std::max<size_t>(50, copies * 4)));
    std::map<int, std::vector<float>> first;
    std::vector<float> cur(sh.m * sh.n);
    times.clear();
    for (Cfg r : rs) {
      times.push_back(best_time(
          s,
          [&](int i) {
            qmatvec(s, t, w[size_t(i) % copies], sh.n, sh.k, x, DType::F32, sh.m, 0, sh.k, scratch, y, r.rows,
                    r.threads);
          },
          iters, 5, 3));
      qmatvec(s, t, w[0], sh.n, sh.k, x, DType::F32, sh.m, 0, sh.k, scratch, y, r.rows, r.threads);
      CHECK(gpuMemcpyAsync(cur.data(), y, cur.size() * sizeof(float), gpuMemcpyDeviceToHost, s));
      CHECK(gpuStreamSynchronize(s));
      // The same threads per block split every row the same way whatever R is, so those outputs
      // must be equal bit for bit (another thread count sums in another order). The tuned choice
      // may be another kernel (the staged one: Q4_0 / Q8_0, one row), so it stands alone.
      const int th = r.threads ? r.threads : -1;
      auto& ref = first[th];
      if (ref.empty()) ref = cur;
      size_t bad = 0;
      for (size_t i = 0; i < cur.size(); ++i) {
        const float a = ref[i], b = cur[i];
        if (!(a == b || (a != a && b != b))) ++bad;
      }
      if (bad)
        std::printf("  MISMATCH: rows %d threads %d differ from R=%s of the same threads in %zu outputs\n", r.rows,
                    r.threads, "first", bad);
    }
    for (void* p : w) CHECK(gpuFree(p));
    return bytes;
  };

  // m = 1: every rows-per-block x threads-per-block choice; the tuned one first.
  std::vector<Cfg> cfgs = {{0, 0}};
  for (int r : {1, 2, 4, 8})
    for (int th : {64, 128, 256}) cfgs.push_back({r, th});
  std::printf(
      "one row of x: the default path (\"tuned\": the staged kernel for Q4_0 / Q8_0 unless WICK_QMV_STAGED=0, "
      "else R=%d, %d threads; some types and shapes otherwise, tuning.hpp's kQmvQ4K*, kQmvShort*, kQmvLongK*) "
      "and the best of R in 1/2/4/8 x 64/128/256 threads; then every choice's us\n",
      tune_rows1(), tune_block());
  std::printf("%-6s %-16s %8s %9s %8s %9s %8s %s\n", "type", "m x k x n", "W MiB", "tuned us", "% copy", "best us",
              "% copy", "best choice");
  double worst = 1e30, worst_tuned = 1e30;
  std::vector<double> sum_by(cfgs.size(), 0.0);
  // WICK_BENCH_QTYPE=Q8_0 (a type's name): that type only, for a quick A/B of its kernels.
  const char* only = std::getenv("WICK_BENCH_QTYPE");
  size_t n_cases = 0;  // the cases run
  for (GGMLType t : types)
    for (Shape sh : shapes) {
      if (only && std::string(only) != ggml_type_name(t)) continue;
      ++n_cases;
      std::vector<double> tt;
      const size_t bytes = run(t, sh, cfgs, tt);
      size_t bi = 0;
      for (size_t i = 0; i < tt.size(); ++i) {
        if (tt[i] < tt[bi]) bi = i;
        sum_by[i] += double(bytes) / tt[i] / copy_bw;
      }
      char shape[32];
      std::snprintf(shape, sizeof shape, "%zux%zux%zu", sh.m, sh.k, sh.n);
      const double p0 = double(bytes) / tt[0] / copy_bw, pb = double(bytes) / tt[bi] / copy_bw;
      std::printf("%-6s %-16s %8.1f %9.2f %7.1f%% %9.2f %7.1f%% R=%d threads=%d\n", ggml_type_name(t), shape,
                  bytes / 1048576.0, tt[0] * 1e6, 100.0 * p0, tt[bi] * 1e6, 100.0 * pb, cfgs[bi].rows,
                  cfgs[bi].threads);
      std::printf("  all:");
      for (size_t i = 1; i < tt.size(); ++i) std::printf(" %dx%d %.2f", cfgs[i].rows, cfgs[i].threads, tt[i] * 1e6);
      std::printf("\n");
      worst = std::min(worst, pb);
      worst_tuned = std::min(worst_tuned, p0);
    }
  if (n_cases == 0) {
    std::fprintf(stderr, "gpu_qmatvec: WICK_BENCH_QTYPE=%s names none of the benchmarked types\n", only);
    return 1;
  }
  for (size_t i = 1; i < cfgs.size(); ++i)
    std::printf("R=%d threads=%d: mean %% of copy over the %zu cases %.1f%%\n", cfgs[i].rows, cfgs[i].threads,
                n_cases, 100.0 * sum_by[i] / double(n_cases));
  std::printf(
      "lowest %% of copy bandwidth over the %zu cases: tuned %.1f%%, best choice each %.1f%% (target "
      "80%%)\n",
      n_cases, 100.0 * worst_tuned, 100.0 * worst);
  if (!only) {  // a one-type run stops at its table
    std::printf("more rows of x (the tuned rows per block):\n");
    for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q4_K})
      for (size_t m : {2, 4, 8}) {
        std::vector<double> tt;
        const size_t bytes = run(t, {m, 4096, 11008}, {{0, 0}}, tt);
        std::printf("%-6s %zux4096x11008 %9.2f us %9.0f GB/s %7.1f%%\n", ggml_type_name(t), m, tt[0] * 1e6,
                    bytes / tt[0] / 1e9, 100.0 * bytes / tt[0] / copy_bw);
      }
  }
  CHECK(gpuStreamSynchronize(s));
  return 0;
}

// f16/bf16 matrix-vector speed (an LLM decode step's products): y = x @ W^T for one row of x through wick's
// matvec (kernels/matmul.cu, the path of x.matmul(w.t()) for up to 8 rows), on raw device buffers so
// the Tensor layer's host work is not in the time, for the weight shapes of the 1.1B and 7B LLaMA
// decode steps. Effective weight bandwidth = bytes of W / time, beside the device copy bandwidth.
// Each shape: the tuned rows per block and threads, then every choice of 1/2/4 rows x 64/128/256
// threads (the same threads must give the same bits whatever the rows: checked). W is replicated
// over enough copies to exceed 3x the L2 cache and the launches rotate through them.
// Built in GPU builds with the tests (target gpu_matvec); run: build/gpu_matvec
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

#include "backend/gpu/kernels/matvec.hpp"
#include "backend/gpu/runtime.hpp"
#include "backend/gpu/tuning.hpp"
#include "gpu_bench_util.cuh"

using namespace wick;

namespace {

// Finite 16-bit values of magnitude 0.5..1 from a hash of the index: f16 (bf16 when bf16 is set).
__global__ void fill_half(uint16_t* p, size_t n, uint32_t seed, bool bf16) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t h = hash_index(i, seed);
    p[i] = bf16 ? uint16_t((h & 0x807Fu) | 0x3F00u) : uint16_t((h & 0x83FFu) | 0x3800u);
  }
}

}  // namespace

int main() {
  size_t l2 = 0;
  gpuStream_t s = open_bench("gpu_matvec", &l2);
  const double copy_bw = copy_bandwidth(s);

  struct Shape {
    const char* what;
    size_t k, n;
  };
  const Shape shapes[] = {{"1.1B qkv", 2048, 2560},     {"1.1B o", 2048, 2048},      {"1.1B gate/up", 2048, 11264},
                          {"1.1B down", 5632, 2048},    {"1.1B head", 2048, 32000},  {"7B qkv", 4096, 12288},
                          {"7B o", 4096, 4096},         {"7B gate/up", 4096, 22016}, {"7B down", 11008, 4096},
                          {"7B head", 4096, 32000}};
  struct Cfg {
    int rows, threads;  // 0: the tuned value
  };
  std::vector<Cfg> cfgs = {{0, 0}};
  for (int r : {1, 2, 4})
    for (int th : {64, 128, 256}) cfgs.push_back({r, th});

  uint16_t *x, *y;
  CHECK(gpuMalloc(reinterpret_cast<void**>(&x), 11008 * sizeof(uint16_t)));
  CHECK(gpuMalloc(reinterpret_cast<void**>(&y), 32000 * sizeof(uint16_t)));
  for (DType dt : {DType::F16, DType::BF16}) {
    const bool is_bf16 = dt == DType::BF16;
    fill_half<<<64, 256, 0, s>>>(x, 11008, 99, is_bf16);
    std::printf(
        "\n%s: tuned R=%d, %d threads (f16 rows whose last round of loads is at most half full: R=%d, %d "
        "threads); best of R in 1/2/4 x 64/128/256 threads; then every choice's us\n",
        dtype_name(dt), gpu::tune::kMvRows, gpu::tune::kMvBlock, gpu::tune::kMvHalfRoundRows,
        gpu::tune::kMvHalfRoundBlock);
    std::printf("%-13s %-12s %8s %9s %8s %9s %8s %s\n", "shape", "k x n", "W MiB", "tuned us", "% copy", "best us",
                "% copy", "best choice");
    std::vector<double> sum_by(cfgs.size(), 0.0);
    for (const Shape& sh : shapes) {
      const size_t bytes = sh.n * sh.k * 2;
      const size_t copies = std::max<size_t>(1, (3 * l2 + bytes - 1) / bytes);
      std::vector<void*> w(copies);
      for (size_t c = 0; c < copies; ++c) {
        CHECK(gpuMalloc(&w[c], bytes));
        fill_half<<<1024, 256, 0, s>>>(static_cast<uint16_t*>(w[c]), bytes / 2, uint32_t(c + 1), is_bf16);
      }
      const int iters = int(std::min<size_t>(200, std::max<size_t>(50, copies * 4)));
      std::vector<double> tt;
      std::map<int, std::vector<uint16_t>> first;
      std::vector<uint16_t> cur(sh.n);
      for (const Cfg& c : cfgs) {
        auto call = [&](int i) {
          gpu::matvec(s, dt, x, int64_t(sh.k), 1, w[size_t(i) % copies], int64_t(sh.k), sh.n, sh.k, y, c.rows,
                      c.threads);
        };
        tt.push_back(best_time(s, call, iters, 5, 3));
        call(0);
        CHECK(gpuMemcpyAsync(cur.data(), y, cur.size() * sizeof(uint16_t), gpuMemcpyDeviceToHost, s));
        CHECK(gpuStreamSynchronize(s));
        // Every R splits a row over the same threads the same way: same bits for the same threads.
        // The tuned choice may take other threads for some shapes (half_round_choice): it stands alone.
        auto& ref = first[c.threads ? c.threads : -1];
        if (ref.empty()) ref = cur;
        if (ref != cur) std::printf("  MISMATCH: R=%d threads=%d differ from the first R of those threads\n", c.rows, c.threads);
      }
      size_t bi = 0;
      for (size_t i = 0; i < tt.size(); ++i) {
        if (tt[i] < tt[bi]) bi = i;
        sum_by[i] += double(bytes) / tt[i] / copy_bw;
      }
      char kn[32];
      std::snprintf(kn, sizeof kn, "%zux%zu", sh.k, sh.n);
      std::printf("%-13s %-12s %8.1f %9.2f %7.1f%% %9.2f %7.1f%% R=%d threads=%d\n", sh.what, kn, bytes / 1048576.0,
                  tt[0] * 1e6, 100.0 * bytes / tt[0] / copy_bw, tt[bi] * 1e6, 100.0 * bytes / tt[bi] / copy_bw,
                  cfgs[bi].rows, cfgs[bi].threads);
      std::printf("  all:");
      for (size_t i = 1; i < tt.size(); ++i) std::printf(" %dx%d %.2f", cfgs[i].rows, cfgs[i].threads, tt[i] * 1e6);
      std::printf("\n");
      for (void* p : w) CHECK(gpuFree(p));
    }
    const double n_shapes = double(sizeof(shapes) / sizeof(shapes[0]));
    for (size_t i = 1; i < cfgs.size(); ++i)
      std::printf("R=%d threads=%d: mean %% of copy over the shapes %.1f%%\n", cfgs[i].rows, cfgs[i].threads,
                  100.0 * sum_by[i] / n_shapes);
  }
  CHECK(gpuStreamSynchronize(s));
  return 0;
}

// Quantized matrix-vector speed (issue 8's decode target): y = x @ W^T for one row of x (and a
// few rows for reference) through wick's qmatvec (kernels/qmatmul.cu: the Q8_1 activation
// quantization and the matvec kernel, both timed), on raw device buffers so the Tensor layer's
// host work is not in the time. Effective weight bandwidth = bytes of the quantized W / time,
// printed beside the device copy bandwidth (a device-to-device memcpy: bytes read + written /
// time). Every measurement: CUDA/HIP events around N launches, best of R after a warm-up. W is
// replicated over enough copies to exceed 3x the L2 cache and the launches rotate through them,
// so the weights come from device memory, not from L2.
// Built in GPU builds with the tests (target gpu_qmatvec); run: build/gpu_qmatvec
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/gpu/kernels/qmatvec.hpp"
#include "backend/gpu/runtime.hpp"

using namespace wick;
using wick::gpu::qmatvec;
using wick::gpu::qmatvec_scratch_bytes;

namespace {

#define CHECK(call)                                                                       \
  do {                                                                                    \
    gpuError_t e_ = (call);                                                               \
    if (e_ != gpuSuccess) {                                                               \
      std::fprintf(stderr, "gpu_qmatvec: %s failed: %s\n", #call, gpuGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// Pseudo-random bytes (a hash of the index); the scale fields are whatever the bytes say, which
// does not change the speed (no data-dependent branches in the kernels).
__global__ void fill_bytes(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = uint8_t(h);
  }
}
__global__ void fill_x(float* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(int(i * 37 % 101) - 50) * 0.02f;
}

// Holds the stream for ~10 ms (2e7 clocks) so the host queues every timed launch before the GPU
// runs them: the times are then the GPU's, not the host's launch rate.
__global__ void spin(long long clocks) {
  const long long t0 = clock64();
  while (clock64() - t0 < clocks) {
  }
}

// Best time per call (seconds) of f over `iters` calls, best of `reps`, after `warm` calls.
template <class F>
double best_time(gpuStream_t s, F&& f, int iters, int reps, int warm) {
  gpuEvent_t a, b;
  CHECK(gpuEventCreate(&a));
  CHECK(gpuEventCreate(&b));
  for (int i = 0; i < warm; ++i) f(i);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    spin<<<1, 1, 0, s>>>(20000000ll);
    CHECK(gpuEventRecord(a, s));
    for (int i = 0; i < iters; ++i) f(i);
    CHECK(gpuEventRecord(b, s));
    CHECK(gpuEventSynchronize(b));
    float ms = 0;
    CHECK(gpuEventElapsedTime(&ms, a, b));
    best = std::min(best, double(ms) * 1e-3 / iters);
  }
  CHECK(gpuEventDestroy(a));
  CHECK(gpuEventDestroy(b));
  return best;
}

}  // namespace

int main() {
  gpuStream_t s;
  gpuDeviceProp_t prop;
  CHECK(gpuGetDeviceProperties(&prop, 0));
  CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  const size_t l2 = size_t(prop.l2CacheSize);
  std::printf("gpu_qmatvec: %s, L2 %.0f MiB\n", prop.name, l2 / 1048576.0);

  // Device copy bandwidth: 1 GiB device-to-device.
  const size_t cbytes = size_t(1) << 30;
  void *ca, *cb;
  CHECK(gpuMalloc(&ca, cbytes));
  CHECK(gpuMalloc(&cb, cbytes));
  CHECK(gpuMemsetAsync(ca, 1, cbytes, s));
  const double tc = best_time(
      s, [&](int) { CHECK(gpuMemcpyAsync(cb, ca, cbytes, gpuMemcpyDeviceToDevice, s)); }, 5, 5, 2);
  const double copy_bw = 2.0 * double(cbytes) / tc;
  std::printf("device copy bandwidth: %.0f GB/s (read + write of 1 GiB)\n", copy_bw / 1e9);
  CHECK(gpuFree(ca));
  CHECK(gpuFree(cb));

  struct Shape {
    size_t m, k, n;
  };
  const GGMLType types[] = {GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0, GGMLType::MXFP4};
  const Shape shapes[] = {{1, 4096, 4096}, {1, 4096, 11008}, {1, 11008, 4096}, {1, 4096, 32000}};
  std::printf("%-6s %-16s %10s %9s %9s %8s\n", "type", "m x k x n", "W MiB", "us", "GB/s", "% copy");
  float *x, *y;
  void* scratch;
  CHECK(gpuMalloc(reinterpret_cast<void**>(&x), 8 * 32000 * sizeof(float)));
  CHECK(gpuMalloc(reinterpret_cast<void**>(&y), 8 * 32000 * sizeof(float)));
  CHECK(gpuMalloc(&scratch, qmatvec_scratch_bytes(8, 32000)));
  fill_x<<<256, 256, 0, s>>>(x, 8 * 32000);
  double worst = 1e30;
  auto run = [&](GGMLType t, Shape sh, bool in_table) {
    const size_t bytes = sh.n * (sh.k / ggml_block_size(t)) * ggml_type_size(t);
    const size_t copies = std::max<size_t>(1, (3 * l2 + bytes - 1) / bytes);
    std::vector<void*> w(copies);
    for (size_t c = 0; c < copies; ++c) {
      CHECK(gpuMalloc(&w[c], bytes));
      fill_bytes<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(w[c]), bytes, uint32_t(c + 1));
    }
    const int iters = int(std::min<size_t>(200, std::max<size_t>(50, copies * 4)));
    const double tt = best_time(
        s, [&](int i) { qmatvec(s, t, w[size_t(i) % copies], sh.n, sh.k, x, DType::F32, sh.m, 0, sh.k, scratch, y); },
        iters, 7, 5);
    const double bw = double(bytes) / tt;
    char shape[32];
    std::snprintf(shape, sizeof shape, "%zux%zux%zu", sh.m, sh.k, sh.n);
    std::printf("%-6s %-16s %10.1f %9.2f %9.0f %7.1f%%%s\n", ggml_type_name(t), shape, bytes / 1048576.0, tt * 1e6,
                bw / 1e9, 100.0 * bw / copy_bw, in_table ? "" : "  (extra)");
    if (in_table) worst = std::min(worst, bw / copy_bw);
    for (void* p : w) CHECK(gpuFree(p));
  };
  for (GGMLType t : types)
    for (Shape sh : shapes) run(t, sh, true);
  for (size_t m : {2, 4, 8}) run(GGMLType::Q4_K, {m, 4096, 11008}, false);
  for (size_t m : {4, 8}) run(GGMLType::Q4_0, {m, 4096, 11008}, false);
  std::printf("lowest %% of copy bandwidth over the 20 target cases: %.1f%% (target 80%%)\n", 100.0 * worst);
  CHECK(gpuStreamSynchronize(s));
  return 0;
}

#pragma once
// Helpers of the GPU kernel benchmarks (bench/gpu_qmatvec.cu, bench/gpu_matvec.cu): error checks,
// pseudo-random device fills, and timing by events around many launches queued behind a spin.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backend/gpu/runtime.hpp"

namespace {

#define CHECK(call)                                                                       \
  do {                                                                                    \
    gpuError_t e_ = (call);                                                               \
    if (e_ != gpuSuccess) {                                                               \
      std::fprintf(stderr, "gpu bench: %s failed: %s\n", #call, gpuGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// Pseudo-random bytes (a hash of the index); the scale fields are whatever the bytes say, which
// does not change the speed (no data-dependent branches in the kernels).
__device__ __forceinline__ uint32_t hash_index(size_t i, uint32_t seed) {
  uint32_t h = uint32_t(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return h;
}
__global__ void fill_bytes(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t(hash_index(i, seed));
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

// Opens a stream on device 0 and prints the bench's name, the device and its L2 (returned in *l2).
gpuStream_t open_bench(const char* name, size_t* l2) {
  gpuStream_t s;
  gpuDeviceProp_t prop;
  CHECK(gpuGetDeviceProperties(&prop, 0));
  CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  *l2 = size_t(prop.l2CacheSize);
  std::printf("%s: %s, L2 %.0f MiB\n", name, prop.name, double(*l2) / 1048576.0);
  return s;
}

// The device copy bandwidth (bytes read + written per second of a 1 GiB device-to-device copy), printed.
double copy_bandwidth(gpuStream_t s) {
  const size_t cbytes = size_t(1) << 30;
  void *ca, *cb;
  CHECK(gpuMalloc(&ca, cbytes));
  CHECK(gpuMalloc(&cb, cbytes));
  CHECK(gpuMemsetAsync(ca, 1, cbytes, s));
  const double tc = best_time(
      s, [&](int) { CHECK(gpuMemcpyAsync(cb, ca, cbytes, gpuMemcpyDeviceToDevice, s)); }, 5, 5, 2);
  const double bw = 2.0 * double(cbytes) / tc;
  std::printf("device copy bandwidth: %.0f GB/s (read + write of 1 GiB)\n", bw / 1e9);
  CHECK(gpuFree(ca));
  CHECK(gpuFree(cb));
  return bw;
}

}  // namespace

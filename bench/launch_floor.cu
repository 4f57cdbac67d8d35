// The floor under wick's per-op host overhead: what the GPU runtime alone costs to launch a
// kernel, with no tensor library around it. Launches a chain of dependent one-element adds
// (and empty kernels) on one stream and prints the host time per launch (queueing only) and
// the time per launch until the GPU has run them all. Uses runtime.hpp's neutral names.
// Build and run (NVIDIA):  nvcc -O2 -std=c++20 -Isrc -Iinclude bench/launch_floor.cu -o launch_floor && ./launch_floor
#include <chrono>
#include <cstdio>

#include "backend/gpu/runtime.hpp"

__global__ void add_one(float* a, const float* b) { a[0] += b[0]; }
__global__ void empty_kernel() {}

int main() {
  using clock = std::chrono::steady_clock;
  float *a = nullptr, *b = nullptr;
  gpuStream_t s;
  if (gpuMalloc(&a, 4) != gpuSuccess || gpuMalloc(&b, 4) != gpuSuccess ||
      gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking) != gpuSuccess) {
    std::printf("launch_floor: no usable GPU\n");
    return 1;
  }
  const int n = 10000;
  for (int kind = 0; kind < 2; ++kind) {
    double best_q = 1e30, best_t = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      gpuStreamSynchronize(s);
      auto t0 = clock::now();
      for (int i = 0; i < n; ++i) {
        if (kind == 0) add_one<<<1, 1, 0, s>>>(a, b);
        else empty_kernel<<<1, 1, 0, s>>>();
      }
      auto t1 = clock::now();
      gpuStreamSynchronize(s);
      auto t2 = clock::now();
      const double q = std::chrono::duration<double>(t1 - t0).count(), t = std::chrono::duration<double>(t2 - t0).count();
      best_q = q < best_q ? q : best_q;
      best_t = t < best_t ? t : best_t;
    }
    std::printf("launch_floor: %-24s queueing %.3f us/launch, until done %.3f us/launch (best of 7 x %d)\n",
                kind == 0 ? "dependent 1-element add" : "empty kernel", best_q / n * 1e6, best_t / n * 1e6, n);
  }
  return gpuGetLastError() == gpuSuccess ? 0 : 1;
}

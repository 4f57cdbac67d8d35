// The wave-width self-check (wave_check.hpp).
#include <string>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/wave_check.hpp"

namespace wick::gpu {

const char* emulation_mode() {
#if defined(WICK_EMULATE_AMD)
  return WICK_EMULATE_WAVE == 64 ? "cdna" : "rdna";
#else
  return "";
#endif
}

namespace {
constexpr int kMaxThreads = 512;

__global__ void WICK_LAUNCH_BOUNDS(kMaxThreads)
    wave_sum_kernel(uint32_t* WICK_RESTRICT full, uint32_t* WICK_RESTRICT lanes32, int* WICK_RESTRICT wave) {
  kernel_entry();
  const uint32_t v = blockIdx.x * blockDim.x + threadIdx.x + 1;
  const uint32_t all = warp_reduce(v, [](uint32_t a, uint32_t b) { return a + b; });
  uint32_t narrow = v;
  for (int o = 16; o > 0; o >>= 1) narrow += shfl_xor(narrow, o);  // the 32-lane habit under test
  const unsigned w = (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) {
    full[w] = all;
    lanes32[w] = narrow;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *wave = kWarpSize;
}
}  // namespace

WaveSums wave_sum_check(int ordinal, int threads, int blocks) {
  if (threads < 64 || threads > kMaxThreads || threads % 64 || blocks < 1)
    throw Error(ErrorKind::Shape,
                "wave_sum_check: threads must be a multiple of 64 in [64, 512] and blocks >= 1, got " +
                    std::to_string(threads) + " x " + std::to_string(blocks));
  DeviceContext& c = context(ordinal);
  DeviceGuard guard(ordinal);
  const size_t max_waves = size_t(threads) * size_t(blocks) / 32;  // enough for the narrowest wave
  Scratch buf(ordinal, (2 * max_waves + 1) * sizeof(uint32_t));
  auto* full = static_cast<uint32_t*>(buf.b.ptr);
  uint32_t* lanes32 = full + max_waves;
  int* wave = reinterpret_cast<int*>(lanes32 + max_waves);
  launch_kernel(wave_sum_kernel, blocks, threads, 0, c.stream, full, lanes32, wave);
  check_launch("wave_sum_kernel");
  WaveSums r;
  check(gpuMemcpyAsync(&r.wave, wave, sizeof(int), gpuMemcpyDeviceToHost, c.stream), "MemcpyAsync");
  check(gpuStreamSynchronize(c.stream), "StreamSynchronize");
  const size_t n = size_t(threads) * size_t(blocks) / size_t(r.wave);
  r.full.resize(n);
  r.lanes32.resize(n);
  check(gpuMemcpyAsync(r.full.data(), full, n * sizeof(uint32_t), gpuMemcpyDeviceToHost, c.stream), "MemcpyAsync");
  check(gpuMemcpyAsync(r.lanes32.data(), lanes32, n * sizeof(uint32_t), gpuMemcpyDeviceToHost, c.stream),
        "MemcpyAsync");
  check(gpuStreamSynchronize(c.stream), "StreamSynchronize");
  return r;
}

}  // namespace wick::gpu

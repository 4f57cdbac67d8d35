#pragma once
// The wave-width self-check behind tests/gpu/test_gpu_wave.cpp: proof that the AMD emulation
// (-DWICK_GPU_EMULATE=cdna) catches reductions written for 32 lanes. Plain C++ (no GPU headers).
#include <cstdint>
#include <vector>

namespace wick::gpu {

// "cdna" or "rdna" in a -DWICK_GPU_EMULATE build, "" otherwise.
const char* emulation_mode();

// One launch of `blocks` blocks of `threads` threads on device `ordinal`; thread t of the grid
// holds t + 1. Lane 0 of every wave writes two sums of its wave's values: `full` through
// warp_reduce (every lane of the wave), `lanes32` through xor shuffles over offsets 16..1 only (a
// reduction written for 32-lane warps). `wave` is the width device code ran with (kWarpSize).
struct WaveSums {
  int wave = 0;
  std::vector<uint32_t> full, lanes32;
};
WaveSums wave_sum_check(int ordinal, int threads, int blocks);

}  // namespace wick::gpu

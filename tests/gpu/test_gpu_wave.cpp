// The negative control of the AMD emulation (docs/gpu.md): a reduction written for 32-lane warps
// (xor shuffles over offsets 16..1, no wave64 step) must give a wrong sum under the cdna emulation,
// where device code runs 64-lane waves on NVIDIA warp pairs, and the right one natively; the proper
// warp_reduce must be right in both. Expected sums by hand: thread t of the grid holds t + 1, so the
// wave of width W starting at thread s sums (s+1) + ... + (s+W).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backend/gpu/wave_check.hpp"
#include "wick/device.hpp"
#include "wick/error.hpp"

namespace {

uint64_t sum_range(uint64_t first, uint64_t count) { return count * (2 * first + count - 1) / 2; }

TEST(GpuWave, ThirtyTwoLaneReductionFailsOnlyOnWave64) {
  const std::string mode = wick::gpu::emulation_mode();
  for (int threads : {64, 256, 512}) {
    const int blocks = 3;
    const wick::gpu::WaveSums r = wick::gpu::wave_sum_check(0, threads, blocks);
    // What device code ran with: 64 under cdna, 32 under rdna and natively on NVIDIA.
    EXPECT_EQ(r.wave, mode == "cdna" ? 64 : 32) << "mode '" << mode << "'";
    ASSERT_EQ(r.full.size(), size_t(threads * blocks / r.wave));
    size_t narrow_wrong = 0;
    for (size_t w = 0; w < r.full.size(); ++w) {
      const uint64_t first = w * uint64_t(r.wave) + 1;
      EXPECT_EQ(r.full[w], uint32_t(sum_range(first, r.wave))) << "wave " << w << ", block " << threads;
      // A 32-lane reduction on a 64-lane wave sums the wave's first half only.
      const uint64_t narrow = sum_range(first, r.wave == 64 ? 32 : r.wave);
      EXPECT_EQ(r.lanes32[w], uint32_t(narrow)) << "wave " << w;
      narrow_wrong += r.lanes32[w] != uint32_t(sum_range(first, r.wave));
    }
    if (r.wave == 64)
      EXPECT_EQ(narrow_wrong, r.full.size()) << "the emulation must expose the 32-lane reduction in every wave";
    else
      EXPECT_EQ(narrow_wrong, 0u) << "on 32-lane warps the 32-lane reduction is right";
  }
}

TEST(GpuWave, BadLaunchShapesAreErrors) {
  EXPECT_THROW(wick::gpu::wave_sum_check(0, 96, 1), wick::Error);
  EXPECT_THROW(wick::gpu::wave_sum_check(0, 1024, 1), wick::Error);
}

}  // namespace

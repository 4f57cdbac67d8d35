#pragma once
// Every tuning constant of the GPU kernels, in one place, per vendor. The NVIDIA values were
// measured on an H100 (docs/performance.md). The AMD values are NOT measured (no AMD GPU is
// reachable): they follow AMD's published guidance (64-lane wavefronts on CDNA, 32 on RDNA,
// 64 KiB of LDS per workgroup, 256-thread workgroups as the default) and keep every block a
// multiple of 64 threads so both wave widths fill whole wavefronts.
namespace wick::gpu::tune {

#if defined(__HIPCC__) || defined(WICK_GPU_ROCM)
inline constexpr bool kAmd = true;
#else
inline constexpr bool kAmd = false;
#endif

// Default block for element-wise and copy kernels.
inline constexpr int kBlock = 256;

// attention (kernels/attention.cu): queries per chunk, the cap on a chunk's score buffer
// (f32 scores of every batch and head), threads per softmax row. Unmeasured first choices.
inline constexpr int kAttnRows = 512;
inline constexpr long long kAttnScoreBytes = 256ll << 20;
inline constexpr int kAttnRowBlock = 256;  // multiple of 64

}  // namespace wick::gpu::tune

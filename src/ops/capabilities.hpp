#pragma once
// What the code being compiled may use, decided once from the compiler's target macros (as
// ggml's common.cuh). Everything else tests these names, never __CUDA_ARCH__ or
// __HIP_DEVICE_COMPILE__ (scripts/check_layers.sh enforces it): a new target or vendor is one
// edit here. In a host pass (g++, or the host side of nvcc/hipcc) every capability is 0.
//   WICK_DEVICE_COMPILE  1 in a device pass (CUDA or HIP)
//   WICK_DEVICE_CUDA     1 in an NVIDIA device pass
//   WICK_DEVICE_HIP      1 in an AMD device pass
//   WICK_HW_F16          f16 <-> f32 conversion instructions (every NVIDIA and AMD GPU)
//   WICK_HAS_HW_BF16     an f32 -> bf16 round-to-nearest-even instruction (NVIDIA sm_80+)
//   WICK_HAS_MMA         tensor-core WMMA on f16/bf16 with f32 accumulators (NVIDIA sm_80+)
//   WICK_HAS_CP_ASYNC    asynchronous global -> shared copies, cp.async (NVIDIA sm_80+)
//   WICK_WAVE_SIZE       lanes of a warp / wavefront: 64 on AMD CDNA (gfx9), else 32
//   WICK_WAVE_ON_WARP_PAIRS  1 when a 64-lane wave is emulated on two NVIDIA warps (WICK_EMULATE_AMD)
//   WICK_HAS_BYTE_PERM   PTX's prmt (__byte_perm) (NVIDIA; AMD and the AMD emulation compute it)
//   WICK_DOT4            the 4-way int8 dot product with int32 accumulation (ops/dot4.hpp):
//                        1 __dp4a (NVIDIA sm_61+), 2 __builtin_amdgcn_sdot4 (the dot1 instructions:
//                        gfx906/908/90a/94x/950, gfx103x), 3 __builtin_amdgcn_sudot4 (gfx11, gfx12),
//                        0 none (a portable shift-and-multiply fallback, and every host pass)
#include <cstdint>

#include "wick/config.hpp"

#if defined(__CUDA_ARCH__)
#define WICK_DEVICE_COMPILE 1
#define WICK_DEVICE_CUDA 1
#define WICK_DEVICE_HIP 0
#define WICK_HW_F16 1
#if __CUDA_ARCH__ >= 610
#define WICK_DOT4 1  // also under the AMD emulation: AMD's sdot4 is the same signed 4-way dot
#endif
#if defined(WICK_EMULATE_AMD)
// AMD's device paths on the NVIDIA GPU (-DWICK_GPU_EMULATE=cdna|rdna, docs/gpu.md): the AMD wave
// width (64 on CDNA: two NVIDIA warps per wave, see shfl_xor) and none of the NVIDIA-only paths.
#define WICK_WAVE_SIZE WICK_EMULATE_WAVE
#define WICK_WAVE_ON_WARP_PAIRS (WICK_EMULATE_WAVE == 64)
#elif __CUDA_ARCH__ >= 800
#define WICK_HAS_HW_BF16 1
#define WICK_HAS_MMA 1
#define WICK_HAS_CP_ASYNC 1
#endif
#if !defined(WICK_EMULATE_AMD)
#define WICK_HAS_BYTE_PERM 1
#endif
#elif defined(__HIP_DEVICE_COMPILE__)
#define WICK_DEVICE_COMPILE 1
#define WICK_DEVICE_CUDA 0
#define WICK_DEVICE_HIP 1
#define WICK_HW_F16 1
#if defined(__GFX9__)
#define WICK_WAVE_SIZE 64
#endif
// Checked with ROCm 5.7's clang: sdot4 compiles for gfx906/90a/942/1030, sudot4 for gfx1100 (and
// neither for gfx1010, which falls back).
#if defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__) || defined(__gfx1030__) ||  \
    defined(__gfx1031__) || defined(__gfx1032__) || defined(__gfx1033__) || defined(__gfx1034__) || \
    defined(__gfx1035__) || defined(__gfx1036__)
#define WICK_DOT4 2
#elif defined(__GFX11__) || defined(__GFX12__)
#define WICK_DOT4 3
#endif
#else
#define WICK_DEVICE_COMPILE 0
#define WICK_DEVICE_CUDA 0
#define WICK_DEVICE_HIP 0
#define WICK_HW_F16 0
#endif

#ifndef WICK_HAS_HW_BF16
#define WICK_HAS_HW_BF16 0
#endif
#ifndef WICK_HAS_MMA
#define WICK_HAS_MMA 0
#endif
#ifndef WICK_HAS_CP_ASYNC
#define WICK_HAS_CP_ASYNC 0
#endif
#ifndef WICK_WAVE_SIZE
#define WICK_WAVE_SIZE 32
#endif
#ifndef WICK_WAVE_ON_WARP_PAIRS
#define WICK_WAVE_ON_WARP_PAIRS 0
#endif
#ifndef WICK_HAS_BYTE_PERM
#define WICK_HAS_BYTE_PERM 0
#endif
#ifndef WICK_DOT4
#define WICK_DOT4 0
#endif

namespace wick::hw {

// The hardware conversions behind the capabilities above, for src/ops/numeric.hpp. Each gives
// the same bits as the exact software round-to-nearest-even of wick/dtype.hpp for every
// non-NaN value (a NaN stays NaN; its payload may differ). Only defined where the capability is.
#if WICK_HW_F16
__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
#if WICK_DEVICE_CUDA
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
#endif
}
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
#if WICK_DEVICE_CUDA
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
#endif
}
#endif
#if WICK_HAS_HW_BF16
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif

}  // namespace wick::hw

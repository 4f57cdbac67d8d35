#pragma once
// NVIDIA Hopper warpgroup MMA (wgmma, sm_90a only: the file that includes this is built for
// arch sm_90a alone, cmake/gpu.cmake) for the attention kernel of attention_flash_wgmma.cu. A
// warpgroup is 4 consecutive warps (128 threads); every wgmma here is issued by all of them.
// Accumulator fragments of m64nNk16 (f32, PTX ISA "wgmma register fragments"): warp w of the group
// holds rows 16 w .. 16 w + 15; lane = 4 g + c; d[4 i + e] is row 16 w + g (+ 8 for e >= 2), col
// 8 i + 2 c + (e & 1): per 8 columns the C layout of mma.m16n8. A from registers (16-bit, m64k16):
// warp w's rows as mma.m16n8k16's A fragment. Shared-memory operands are given by descriptors
// (smem_desc) over 128-byte-swizzled tiles: rows of 64 elements (128 bytes) whose 16-byte chunk j
// sits at chunk j ^ (row % 8), 8-row atoms of 1024 bytes aligned to 1024.
#include <cstdint>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "ops/numeric.hpp"

namespace wick::gpu::wgmma {

// A 128-byte-swizzle descriptor: start address (shared window), leading and stride byte offsets
// (PTX "matrix descriptor": bits 0-13, 16-29, 32-45, in 16-byte units; bits 62-63 = 1: 128B swizzle).
__device__ __forceinline__ uint64_t smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A descriptor from its low (addresses) and high (stride, swizzle) words: a loop that steps through
// a tile adds to the low word only, in 32 bits, not to the whole 64-bit value.
__device__ __forceinline__ uint64_t desc_words(uint32_t lo, uint32_t hi) {
  uint64_t d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"(lo), "r"(hi));
  return d;
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared memory written by this block's threads (cp.async, st.shared) made visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving an accumulator's use across wait() (the asm above does not name it).
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// The instructions for TY (f16 or bf16): one asm statement each, d, a and db named by the caller.
#define WICK_WGMMA_M64N64_SS(TY) \
  asm volatile( \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), \
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), \
        "+f"(d[30]), "+f"(d[31]) \
      : "l"(da), "l"(db), "r"(accumulate))
#define WICK_WGMMA_M64N128_RS(TY) \
  asm volatile( \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), \
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), \
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), \
        "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate))
// d (m64n64, f32) = A B + (accumulate ? d : 0); A (64 x 16) and B (64 x 16, K-major: B^T's rows)
// from shared memory.
template <class T>
__device__ __forceinline__ void mma_m64n64_ss(float (&d)[32], uint64_t da, uint64_t db, int accumulate) {
  if constexpr (std::is_same_v<T, f16>) WICK_WGMMA_M64N64_SS("f16");
  else WICK_WGMMA_M64N64_SS("bf16");
}
// d (m64n128, f32) = A B + (accumulate ? d : 0); A (64 x 16) from registers, B (16 x 128) from
// shared memory, N-major (imm-trans-b = 1: rows of B contiguous, as V's rows).
template <class T>
__device__ __forceinline__ void mma_m64n128_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int accumulate) {
  if constexpr (std::is_same_v<T, f16>) WICK_WGMMA_M64N128_RS("f16");
  else WICK_WGMMA_M64N128_RS("bf16");
}
#undef WICK_WGMMA_M64N64_SS
#undef WICK_WGMMA_M64N128_RS
#endif

}  // namespace wick::gpu::wgmma

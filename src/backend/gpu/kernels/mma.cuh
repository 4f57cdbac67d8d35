#pragma once
// NVIDIA tensor-core building blocks (sm_80+): ldmatrix fragment loads and mma.sync m16n8k16 with
// f32 accumulators, for the attention kernels (kernels/attention_decode.cu, attention_flash.cu).
// Fragments (PTX ISA, mma.m16n8k16 for 16-bit types): lane = 4 g + c; A (16 x 16): a0 = row g, cols
// 2c, 2c + 1; a1 = row g + 8, same cols; a2, a3 = the same rows, cols + 8. B (16 x 8): b0 = rows (k)
// 2c, 2c + 1 of col (n) g; b1 = rows + 8. C (16 x 8, f32): c0, c1 = row g, cols 2c, 2c + 1; c2, c3 =
// row g + 8. AMD builds and the AMD emulation have none of it (their callers keep portable paths).
#include <cstdint>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "ops/numeric.hpp"

#if !defined(WICK_GPU_HIP) && !defined(WICK_EMULATE_AMD)
namespace wick::gpu {

// Four 8 x 8 matrices of 16-bit elements from shared memory: lane l gives the address of row l % 8
// of matrix l / 8; r[i] is matrix i's fragment (row g, cols 2c, 2c + 1), or with _trans its
// transpose's.
// The unsigned overloads take a shared-window address (device_utils.cuh's smem_addr).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) { ldsm_x4(r, smem_addr(p)); }
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) { ldsm_x4_trans(r, smem_addr(p)); }
// c += a b (m16n8k16, f32 accumulators) in T's 16-bit type (f16 or bf16).
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, f16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 2^x (ex2.approx: 2 ulp; 2^-inf = 0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Two floats as T's 16-bit pair (x in the low half), each rounded to nearest (one cvt for both).
template <class T> __device__ __forceinline__ uint32_t pack2(float x, float y) {
  uint32_t r;
  if constexpr (std::is_same_v<T, f16>)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y), "f"(x));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y), "f"(x));
  return r;
}

}  // namespace wick::gpu
#endif

#pragma once
// What the SIMD kernel files (qdot_avx2.cpp, qdot_avx512.cpp) share with the rest of the backend.
// They are compiled with -mavx2 / -mavx512*, so they include nothing but this header and
// <immintrin.h>: an inline function they shared with the library (std::vector, wick's headers)
// would get an AVX-512 copy that the linker may pick for callers on any CPU.
#include <cstddef>
#include <cstdint>

namespace wick::cpu::qdot {

// One quantized activation row of k elements.
struct XRow {
  const int8_t* q;    // k values, 64-byte aligned
  const float* d;     // scale per block (k / 32 for Q8_0, k / 256 for Q8_K)
  const int32_t* s;   // Q8_0: sum of the block's 32 q (for offsets such as Q4_0's -8)
  const int16_t* bs;  // Q8_K: sums of each 16 q (k / 16 of them, as block_q8_K's bsums)
  const float* sd;    // Q8_0: s * d per block in f32 (a weight offset's share, in the float domain)
  // Q8_0: q regrouped per 4 blocks A B C D (128 values) as [A 0-15, B 0-15, C 0-15, D 0-15, A 16-31,
  // ..., D 16-31], the order of the low and high nibbles of 4 blocks' 16-byte runs loaded side by
  // side, so the AVX-512 nibble kernels dot them without permuting weights. Whole groups only.
  const int8_t* qn;
};

// out[r] = dot(weight row w (nb blocks of its type), activation row x[r]) for r < m (1..8):
// each weight block is decoded once for all m rows.
using RowDot = void (*)(const uint8_t* w, size_t nb, const XRow* x, int m, float* out);

// The level's kernel for ggml type id `type` (GGMLType's number), or nullptr where it has none.
RowDot avx2_kernel(uint32_t type);
RowDot avx512_kernel(uint32_t type);

// Q8_0 activation blocks of 32 floats from x, the values quant::quantize_block_q8_0 encodes: q, the
// f16 scale as a float in d, the sum of q in s and s * d in sd, block after block. Returns the first
// block it left to the scalar encoder (nb when none), which the caller encodes and then resumes.
size_t avx512_quantize_q8_0(const float* x, size_t nb, int8_t* q, float* d, int32_t* s, float* sd);

}  // namespace wick::cpu::qdot

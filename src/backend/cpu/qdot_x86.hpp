#pragma once
// The x86 helpers the row kernel files (qdot_avx2.cpp, qdot_avx512.cpp) share: f16 and block-scale
// decoding, horizontal sums, the weight prefetch, and the m-rows dispatch. Each file compiles them
// under its own -m flags (AVX2 + FMA + F16C at least).
//
// Everything here sits in an anonymous namespace on purpose: each including file gets its own
// internal copy, built for its own ISA. An `inline` function with external linkage would be one
// entity across both files (an ODR violation, as the two bodies differ in machine code), and the
// linker could keep the AVX-512 copy for the AVX2 file's calls: an illegal instruction on a CPU
// without AVX-512. Like the files that include it, this header includes nothing but
// qdot_kernels.hpp and <immintrin.h> (qdot_kernels.hpp says why).
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "qdot_x86.hpp is for the SIMD kernel files compiled with -mavx2 -mfma -mf16c (CMakeLists.txt)"
#endif
#include <immintrin.h>

#include "backend/cpu/qdot_kernels.hpp"

namespace wick::cpu::qdot {
namespace {

inline float f16(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// MXFP4's block scale, e8m0 halved as the decoder reads it: 2^(e - 128), subnormal for e < 2.
inline float e8m0_half(uint8_t e8) {
  const uint32_t e = e8;
  const uint32_t bits = e < 2 ? (0x00200000u << e) : ((e - 1) << 23);
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sum of the 8 int32 lanes of v.
inline int32_t hsum_i32(__m256i v) {
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(q);
}

// Weight bytes prefetched ahead of the kernel: the rows stream from memory and the hardware
// prefetcher alone left the loads waiting (a matrix-vector product ran at about the sum, not the
// max, of its compute and memory times). `lines`: the block's 64-byte lines, kAhead bytes on.
constexpr int kAhead = 4096;
inline void ahead(const uint8_t* b, int lines) {
  for (int l = 0; l < lines; ++l) _mm_prefetch(reinterpret_cast<const char*>(b) + kAhead + 64 * l, _MM_HINT_T0);
}

// An int32 vector whose lane 0 is v and the others 0: the start of a block's integer sum.
inline __m256i lane0(int32_t v) { return _mm256_zextsi128_si256(_mm_cvtsi32_si128(v)); }

// Q3_K's 16 6-bit scales (+ 32, unsigned) of block b, four at a time in 32-bit words: low 4 bits
// from bytes 96-103 (low nibbles for scales 0-7, high for 8-15), top 2 bits from bytes 104-107.
inline void q3_k_scales(const uint8_t* b, uint32_t u[4]) {
  __builtin_memcpy(u, b + 96, 12);
  const uint32_t t = u[2], k2 = 0x0f0f0f0fu, k1 = 0x03030303u;
  u[2] = ((u[0] >> 4) & k2) | (((t >> 4) & k1) << 4);
  u[3] = ((u[1] >> 4) & k2) | (((t >> 6) & k1) << 4);
  u[0] = (u[0] & k2) | ((t & k1) << 4);
  u[1] = (u[1] & k2) | (((t >> 2) & k1) << 4);
}

// Q2_K's 16 4-bit scales and mins of block b as int16 lanes.
inline void q2_k_scales_mins(const uint8_t* b, __m256i& sc16, __m256i& mn16) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(v, _mm_set1_epi8(15)));
  mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15)));
}

// A RowDot over m (1..8) activation rows with m as a template argument, so that the per-row
// accumulators stay in registers. F<M>::run has RowDot's signature (WICK_ROWS makes one).
template <template <int> class F>
void by_rows(const uint8_t* w, size_t nb, const XRow* x, int m, float* out) {
  switch (m) {
    case 1:
      return F<1>::run(w, nb, x, m, out);
    case 2:
      return F<2>::run(w, nb, x, m, out);
    case 3:
      return F<3>::run(w, nb, x, m, out);
    case 4:
      return F<4>::run(w, nb, x, m, out);
    case 5:
      return F<5>::run(w, nb, x, m, out);
    case 6:
      return F<6>::run(w, nb, x, m, out);
    case 7:
      return F<7>::run(w, nb, x, m, out);
    default:
      return F<8>::run(w, nb, x, m, out);
  }
}

// A kernel file's types: ggml type id (GGMLType's number) -> its RowDot.
struct RowEntry {
  uint32_t type;
  RowDot fn;
};
template <size_t N>
RowDot find_row_kernel(const RowEntry (&table)[N], uint32_t type) {
  for (const RowEntry& e : table)
    if (e.type == type) return e.fn;
  return nullptr;
}

}  // namespace
}  // namespace wick::cpu::qdot

// One functor per kernel for by_rows (a function template cannot be a template-template argument).
#define WICK_ROWS(NAME, CALL)                                                              \
  template <int M>                                                                         \
  struct NAME {                                                                            \
    static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) { CALL; } \
  };

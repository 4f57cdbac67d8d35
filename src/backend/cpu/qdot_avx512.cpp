// AVX-512 (F, BW, VL) + VNNI kernels of the CPU quantized matmul: Q4_0, Q8_0, IQ4_NL, MXFP4
// (Q8_0 activations) and Q4_K, Q6_K (Q8_K activations). Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c (CMakeLists.txt) and called only when the CPU has
// them (qdot.cpp). Includes nothing but qdot_kernels.hpp (which says why) and <immintrin.h>.
//
// The int8 products go through vpdpbusd (u8 x s8, four products summed into an int32 lane): a
// weight nibble is unsigned, a signed weight w is taken as w + 128 with -128 * sum(x) as the
// lane's start (the sum comes exact with the activations). Group scales multiply int16 pair sums
// through vpdpwssd. All integer sums are exact; each block's int32 sum is scaled in f32.
#include "backend/cpu/qdot_kernels.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers start some results from a self-initialised "undefined" vector
// (`__m512i __Y = __Y;`), which -Wuninitialized reports once inlined here (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace wick::cpu::qdot {
namespace {

inline float f16(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// An int32 vector whose lane 0 is v and the others 0: the start of a block's dpbusd.
inline __m256i lane0(int32_t v) { return _mm256_zextsi128_si256(_mm_cvtsi32_si128(v)); }

// ---- 32-element blocks with 16 nibble bytes: Q4_0, IQ4_NL, MXFP4.
enum class Nib { Q4_0, IQ4_NL, MXFP4 };

template <Nib K, int M>
void nib_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  constexpr size_t BB = K == Nib::MXFP4 ? 17 : 18;
  constexpr size_t QS = K == Nib::MXFP4 ? 1 : 2;
  // The nibble's value as an unsigned byte and the offset it carries: Q4_0 q (- 8), the others
  // their signed level + 128 (- 128).
  constexpr int32_t off = K == Nib::Q4_0 ? 8 : 128;
  const __m128i lut =
      K == Nib::Q4_0 ? _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
      : K == Nib::IQ4_NL
          ? _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, -127, -115, -103, -90, -75, -59, -39, -15)
          : _mm_setr_epi8(-128, -127, -126, -125, -124, -122, -120, -116, -128, 127, 126, 125, 124, 122, 120, 116);
  const __m256i lut2 = _mm256_broadcastsi128_si256(lut);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * BB;
    float dw;
    if constexpr (K == Nib::MXFP4) {
      // e8m0 halved (as the decoder): 2^(e - 128), subnormal for e < 2
      const uint32_t e = b[0];
      const uint32_t bits = e < 2 ? (0x00200000u << e) : ((e - 1) << 23);
      __builtin_memcpy(&dw, &bits, 4);
    } else {
      dw = f16(b);
    }
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + QS));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
    if constexpr (K != Nib::Q4_0) q = _mm256_shuffle_epi8(lut2, q);
    for (int r = 0; r < M; ++r) {
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[r].q + ib * 32));
      const __m256i s = _mm256_dpbusd_epi32(lane0(-off * x[r].s[ib]), q, xq);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * x[r].d[ib]), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]);
}

// ---- Q8_0: signed weights + 128 (an xor of the sign bit).
template <int M>
void q8_0_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m256i sign = _mm256_set1_epi8(-128);
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * 34;
    const float dw = f16(b);
    const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), sign);
    for (int r = 0; r < M; ++r) {
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[r].q + ib * 32));
      const __m256i s = _mm256_dpbusd_epi32(lane0(-128 * x[r].s[ib]), q, xq);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * x[r].d[ib]), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]);
}

inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

// Q4_K / Q5_K's 6-bit scale and min of group g (0..7) from the 12 scale bytes.
inline void scale_min(const uint8_t* s, int g, int& sc, int& mn) {
  if (g < 4) {
    sc = s[g] & 63;
    mn = s[g + 4] & 63;
  } else {
    sc = (s[g + 4] & 15) | ((s[g - 4] >> 2) & 0x30);
    mn = (s[g + 4] >> 4) | ((s[g] >> 2) & 0x30);
  }
}

// ---- Q4_K: 64 elements (two groups of 32: low and high nibbles of 32 bytes) per zmm.
template <int M>
void q4_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[M];
  float mins[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    mins[r] = 0;
  }
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * 144;
    const float d = f16(b), dmin = f16(b + 2);
    int sc[8], mn[8];
    for (int g = 0; g < 8; ++g) scale_min(b + 4, g, sc[g], mn[g]);
    __m512i sumi[M];
    for (int r = 0; r < M; ++r) sumi[r] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * j));
      const __m512i q =
          _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), m4);
      const __m512i scv =
          _mm512_inserti64x4(_mm512_set1_epi16(int16_t(sc[2 * j])), _mm256_set1_epi16(int16_t(sc[2 * j + 1])), 1);
      for (int r = 0; r < M; ++r) {
        const __m512i xq = _mm512_load_si512(x[r].q + ib * 256 + 64 * j);
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q, xq), scv);
      }
    }
    for (int r = 0; r < M; ++r) {
      const float dx = x[r].d[ib];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_set1_ps(d * dx), acc[r]);
      const int16_t* bs = x[r].bs + ib * 16;
      int32_t m = 0;
      for (int g = 0; g < 8; ++g) m += mn[g] * (bs[2 * g] + bs[2 * g + 1]);
      mins[r] += dmin * dx * float(m);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum512(acc[r]) - mins[r];
}

// ---- Q6_K: per half of 128, elements 0-63 and 64-127 each one zmm of 6-bit values 0..63; the
// -32 offset is -32 * sum(scale_g * bsum_g), added to the block's int32 sum.
template <int M>
void q6_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  // elements 0-31 take qh bits 0-1 (<< 4), 32-63 bits 2-3 (<< 2); 64-95 bits 4-5, 96-127 6-7 (>> 2)
  const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  // int16 scale vectors: 64 elements = 4 groups of 16 = 8 int16 pair sums each
  __m512i sidx[4];
  for (int c = 0; c < 4; ++c) {
    alignas(64) int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = int16_t(4 * c + i / 8);
    sidx[c] = _mm512_load_si512(idx);
  }
  __m512 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * 210;
    const float d = f16(b + 208);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
    const __m512i sc = _mm512_castsi256_si512(sc16);
    const __m256i neg32sc = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
    __m512i sumi[M];
    for (int r = 0; r < M; ++r) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bs + ib * 16));
      sumi[r] = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, neg32sc));
    }
    for (int h = 0; h < 2; ++h) {
      const __m512i L = _mm512_loadu_si512(b + 64 * h);
      const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h)));
      const __m512i q01 = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, shl), m30));
      const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                          _mm512_and_si512(_mm512_srlv_epi16(H, shr), m30));
      const __m512i s01 = _mm512_permutexvar_epi16(sidx[2 * h], sc);
      const __m512i s23 = _mm512_permutexvar_epi16(sidx[2 * h + 1], sc);
      for (int r = 0; r < M; ++r) {
        const int8_t* xq = x[r].q + ib * 256 + 128 * h;
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q01, _mm512_load_si512(xq)), s01);
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q23, _mm512_load_si512(xq + 64)), s23);
      }
    }
    for (int r = 0; r < M; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_set1_ps(d * x[r].d[ib]), acc[r]);
  }
  for (int r = 0; r < M; ++r) out[r] = hsum512(acc[r]);
}

// m (1..8) as a template argument, so the per-row accumulators stay in registers.
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

template <int M>
struct Q4_0F {
  static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) {
    nib_kernel<Nib::Q4_0, M>(w, nb, x, m, o);
  }
};
template <int M>
struct IQ4NLF {
  static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) {
    nib_kernel<Nib::IQ4_NL, M>(w, nb, x, m, o);
  }
};
template <int M>
struct MXFP4F {
  static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) {
    nib_kernel<Nib::MXFP4, M>(w, nb, x, m, o);
  }
};
template <int M>
struct Q8_0F {
  static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) { q8_0_kernel<M>(w, nb, x, m, o); }
};
template <int M>
struct Q4_KF {
  static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) { q4_k_kernel<M>(w, nb, x, m, o); }
};
template <int M>
struct Q6_KF {
  static void run(const uint8_t* w, size_t nb, const XRow* x, int m, float* o) { q6_k_kernel<M>(w, nb, x, m, o); }
};

}  // namespace

RowDot avx512_kernel(uint32_t type) {
  switch (type) {  // GGMLType numbers
    case 2:
      return by_rows<Q4_0F>;
    case 8:
      return by_rows<Q8_0F>;
    case 12:
      return by_rows<Q4_KF>;
    case 14:
      return by_rows<Q6_KF>;
    case 20:
      return by_rows<IQ4NLF>;
    case 39:
      return by_rows<MXFP4F>;
    default:
      return nullptr;
  }
}

}  // namespace wick::cpu::qdot

#else  // not x86-64: no AVX-512 kernels

namespace wick::cpu::qdot {
RowDot avx512_kernel(uint32_t) { return nullptr; }
}  // namespace wick::cpu::qdot

#endif

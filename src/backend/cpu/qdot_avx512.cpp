// AVX-512 (F, BW, VL) + VNNI kernels of the CPU quantized matmul: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// IQ4_NL, MXFP4 (Q8_0 activations) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (Q8_K activations). Compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c (CMakeLists.txt) and called only when the CPU has them
// (qdot.cpp). Includes nothing but qdot_kernels.hpp (which says why), qdot_x86.hpp (the helpers it
// shares with qdot_avx2.cpp) and <immintrin.h>.
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

#include "backend/cpu/qdot_x86.hpp"

namespace wick::cpu::qdot {
namespace {

// ---- 32-element blocks with 16 nibble bytes: Q4_0, IQ4_NL, MXFP4.
enum class Nib { Q4_0, IQ4_NL, MXFP4, Q4_1, Q5_0, Q5_1 };

// Block layout per type: bytes, where the 16 nibble bytes start, where Q5's 32 fifth bits start
// (0: none), whether w = d q + m (a min at byte 2), whether values go through a table, and the
// offset subtracted from the unsigned value (Q4_0 8, Q5_0 16, table types 128).
template <Nib K>
struct NibT {
  static constexpr size_t BB = K == Nib::MXFP4  ? 17
                               : K == Nib::Q4_1 ? 20
                               : K == Nib::Q5_0 ? 22
                               : K == Nib::Q5_1 ? 24
                                                : 18;
  static constexpr size_t QS = K == Nib::MXFP4 ? 1 : K == Nib::Q4_1 ? 4 : K == Nib::Q5_0 ? 6 : K == Nib::Q5_1 ? 8 : 2;
  static constexpr size_t QH = K == Nib::Q5_0 ? 2 : K == Nib::Q5_1 ? 4 : 0;
  static constexpr bool kMin = K == Nib::Q4_1 || K == Nib::Q5_1;
  static constexpr bool kLut = K == Nib::IQ4_NL || K == Nib::MXFP4;
  static constexpr int32_t off = K == Nib::Q4_0 ? 8 : K == Nib::Q5_0 ? 16 : kLut ? 128 : 0;
};

inline uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// n (2 or 4) f16 values at p, p + stride, ... as floats (lanes n.. zero), one conversion.
inline __m128 f16s(const uint8_t* p, size_t stride, int n) {
  uint64_t h = 0;
  for (int i = 0; i < n; ++i) {
    uint16_t v;
    __builtin_memcpy(&v, p + i * stride, 2);
    h |= uint64_t(v) << (16 * i);
  }
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
}

template <Nib K>
inline float nib_scale(const uint8_t* b) {
  return K == Nib::MXFP4 ? e8m0_half(b[0]) : f16(b);
}

// Two blocks per step in one zmm: the nibbles of blocks A and B as [A lo, A hi, B lo, B hi]
// against 64 contiguous activation bytes; lanes 0-7 sum block A, 8-15 block B, scaled by
// [dA dxA x8, dB dxB x8]. The offset (-8 for Q4_0, -16 for Q5_0, -128 for the table types) is
// applied in f32 through sum over blocks of d_w * (s * d_x), kept apart and subtracted once at
// the end; Q4_1 / Q5_1's min the same way (sum of m * (s * d_x), added). Q5's fifth bits are
// or'ed in as bit 4 through a byte mask of the 32-bit qh words.
template <Nib K, int M>
void nib_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  using T = NibT<K>;
  constexpr size_t BB = T::BB, QS = T::QS, QH = T::QH;
  constexpr int32_t off = T::off;
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  // The table types' value as an unsigned byte: their signed level + 128.
  const __m128i lut = !T::kLut           ? _mm_setzero_si128()
                      : K == Nib::IQ4_NL ? _mm_load_si128(reinterpret_cast<const __m128i*>(kIQ4NLPlus128))
                                         : _mm_load_si128(reinterpret_cast<const __m128i*>(kMXFP4Plus128));
  const __m512i lut4 = _mm512_broadcast_i32x4(lut);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[M];
  __m128 corr[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    corr[r] = _mm_setzero_ps();
  }
  size_t ib = 0;
  // Four blocks per step: their nibble bytes in one zmm [A B C D], split into low and high
  // nibbles, dotted with the activations regrouped the same way (XRow::qn) into one int32 vector
  // whose lanes 0-3 sum block A, 4-7 B, 8-11 C, 12-15 D.
  const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (; ib + 4 <= nb; ib += 4) {
    const uint8_t* b = w + ib * BB;
    ahead(b, 2);
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + QS)));
    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + BB + QS)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * BB + QS)), 2);
    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 3 * BB + QS)), 3);
    __m512i lo = _mm512_and_si512(z, m4), hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
    if constexpr (T::kLut) {
      lo = _mm512_shuffle_epi8(lut4, lo);
      hi = _mm512_shuffle_epi8(lut4, hi);
    }
    if constexpr (QH != 0) {  // element j of a block: bit j of its qh (j < 16 low nibbles)
      uint64_t ml = 0, mh = 0;
      for (int i = 0; i < 4; ++i) {
        const uint64_t h = ld32(b + i * BB + QH);
        ml |= (h & 0xFFFF) << (16 * i);
        mh |= (h >> 16) << (16 * i);
      }
      lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(ml, bit4));
      hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(mh, bit4));
    }
    __m128 dw;
    if constexpr (K == Nib::MXFP4) {
      dw = _mm_setr_ps(nib_scale<K>(b), nib_scale<K>(b + BB), nib_scale<K>(b + 2 * BB), nib_scale<K>(b + 3 * BB));
    } else {  // the four f16 scales through one conversion
      dw = f16s(b, BB, 4);
    }
    const __m128 cw = T::kMin ? f16s(b + 2, BB, 4) : dw;  // what multiplies s * d_x
    for (int r = 0; r < M; ++r) {
      const int8_t* xq = x[r].qn + ib * 32;
      const __m512i sq = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(xq)), hi,
                                             _mm512_load_si512(xq + 64));
      const __m512 dd = _mm512_castps128_ps512(_mm_mul_ps(dw, _mm_loadu_ps(x[r].d + ib)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sq), _mm512_permutexvar_ps(quad, dd), acc[r]);
      corr[r] = _mm_fmadd_ps(cw, _mm_loadu_ps(x[r].sd + ib), corr[r]);
    }
  }
  for (; ib + 2 <= nb; ib += 2) {
    const uint8_t* b = w + ib * BB;
    ahead(b, 1);
    const __m128i ra = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + QS));
    const __m128i rb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + BB + QS));
    const __m256i ab = _mm256_set_m128i(rb, ra);
    __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(ab), _mm256_srli_epi16(ab, 4), 1), m4);
    q = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(3, 1, 2, 0));  // [A lo, A hi, B lo, B hi]
    if constexpr (T::kLut) q = _mm512_shuffle_epi8(lut4, q);
    if constexpr (QH != 0)  // the byte order is qh's bit order: A's 32 bits, then B's
      q = _mm512_or_si512(q, _mm512_maskz_mov_epi8(uint64_t(ld32(b + QH)) | (uint64_t(ld32(b + BB + QH)) << 32), bit4));
    __m128 dw;
    if constexpr (K == Nib::MXFP4) {
      dw = _mm_unpacklo_ps(_mm_set_ss(nib_scale<K>(b)), _mm_set_ss(nib_scale<K>(b + BB)));
    } else {  // both f16 scales through one conversion
      dw = f16s(b, BB, 2);
    }
    const __m128 cw = T::kMin ? f16s(b + 2, BB, 2) : dw;
    for (int r = 0; r < M; ++r) {
      const __m512i xq = _mm512_load_si512(x[r].q + ib * 32);
      const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xq);
      const __m128 dx = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(x[r].d + ib)));
      const __m128 sd = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(x[r].sd + ib)));
      const __m512 dd = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd, acc[r]);
      corr[r] = _mm_fmadd_ps(cw, sd, corr[r]);
    }
  }
  float tail[M];
  for (int r = 0; r < M; ++r) tail[r] = 0;
  if (ib < nb) {  // an odd last block: one ymm, the offset exact in int32
    const uint8_t* b = w + ib * BB;
    const float dw = nib_scale<K>(b);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + QS));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    if constexpr (T::kLut) q = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(lut), q);
    if constexpr (QH != 0) q = _mm256_or_si256(q, _mm256_maskz_mov_epi8(ld32(b + QH), _mm256_set1_epi8(0x10)));
    const float mw = T::kMin ? f16(b + 2) : 0.0f;
    for (int r = 0; r < M; ++r) {
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[r].q + ib * 32));
      const __m256i s = _mm256_dpbusd_epi32(lane0(-off * x[r].s[ib]), q, xq);
      tail[r] = hsum(_mm256_cvtepi32_ps(s)) * (dw * x[r].d[ib]);
      if constexpr (T::kMin) tail[r] += mw * x[r].sd[ib];
    }
  }
  for (int r = 0; r < M; ++r) {
    __m128 c = _mm_add_ps(corr[r], _mm_movehl_ps(corr[r], corr[r]));
    c = _mm_add_ss(c, _mm_movehdup_ps(c));
    out[r] = _mm512_reduce_add_ps(acc[r]) + (T::kMin ? 1.0f : -float(off)) * _mm_cvtss_f32(c) + tail[r];
  }
}

// ---- Q8_0: signed weights + 128 (an xor of the sign bit), two blocks per zmm as the nibble
// types, the -128 * s offset in f32 (see nib_kernel).
template <int M>
void q8_0_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m512i sign = _mm512_set1_epi8(-128);
  const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[M];
  __m128 corr[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    corr[r] = _mm_setzero_ps();
  }
  size_t ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    const uint8_t* b = w + ib * 34;
    ahead(b, 2);
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 36));
    const __m512i q = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qa), qb, 1), sign);
    uint16_t ha, hb;
    __builtin_memcpy(&ha, b, 2);
    __builtin_memcpy(&hb, b + 34, 2);
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128(int(uint32_t(ha) | (uint32_t(hb) << 16))));
    for (int r = 0; r < M; ++r) {
      const __m512i xq = _mm512_load_si512(x[r].q + ib * 32);
      const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xq);
      const __m128 dx = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(x[r].d + ib)));
      const __m128 sd = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(x[r].sd + ib)));
      const __m512 dd = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd, acc[r]);
      corr[r] = _mm_fmadd_ps(dw, sd, corr[r]);
    }
  }
  float tail[M];
  for (int r = 0; r < M; ++r) tail[r] = 0;
  if (ib < nb) {  // an odd last block: one ymm, the offset exact in int32
    const uint8_t* b = w + ib * 34;
    const float dw = f16(b);
    const __m256i q =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), _mm256_set1_epi8(-128));
    for (int r = 0; r < M; ++r) {
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[r].q + ib * 32));
      const __m256i s = _mm256_dpbusd_epi32(lane0(-128 * x[r].s[ib]), q, xq);
      tail[r] = hsum(_mm256_cvtepi32_ps(s)) * (dw * x[r].d[ib]);
    }
  }
  for (int r = 0; r < M; ++r) {
    const __m128 c = _mm_add_ss(corr[r], _mm_movehdup_ps(corr[r]));
    out[r] = _mm512_reduce_add_ps(acc[r]) - 128.0f * _mm_cvtss_f32(c) + tail[r];
  }
}

inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

// ---- Q4_K: 64 elements (two groups of 32: low and high nibbles of 32 bytes) per zmm.
// The 8 6-bit scales (bytes 0-7 of sc) and mins (bytes 0-7 of mn) of Q4_K / Q5_K from the 12
// scale bytes, four at a time in 32-bit words (the layout of quant_blocks.hpp's scale_min_k4).
inline void scales_mins_k4(const uint8_t* s, uint32_t sc[2], uint32_t mn[2]) {
  uint32_t u[3];
  __builtin_memcpy(u, s, 12);
  sc[0] = u[0] & 0x3f3f3f3fu;
  mn[0] = u[1] & 0x3f3f3f3fu;
  sc[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  mn[1] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
}

// ---- Q4_K / Q5_K: 64 elements (two groups of 32: low and high nibbles of 32 bytes) per zmm,
// int16 pair sums times the group's scale through vpdpwssd; the mins through the activation's
// sums. Q5_K ors each element's 5th bit (bit g of qh[l] for group g) in as bit 4.
template <bool Five, int M>
void q45_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
  __m512i sidx[4], hshift[4];  // hshift: Q5_K's qh bit of the low (2j) and high (2j + 1) half
  for (int j = 0; j < 4; ++j)
    hshift[j] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(2 * j)), _mm256_set1_epi16(int16_t(2 * j + 1)), 1);
  for (int j = 0; j < 4; ++j) {  // int16 lanes 0-15 from scale 2j, 16-31 from 2j + 1
    alignas(64) int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = int16_t(2 * j + i / 16);
    sidx[j] = _mm512_load_si512(idx);
  }
  __m512 acc[M];
  float mins[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    mins[r] = 0;
  }
  for (size_t ib = 0; ib < nb; ++ib) {
    constexpr size_t BB = Five ? 176 : 144;
    const uint8_t* b = w + ib * BB;
    ahead(b, 3);
    const float d = f16(b), dmin = f16(b + 2);
    uint32_t sc[2], mn[2];
    scales_mins_k4(b + 4, sc, mn);
    __m512i qh = _mm512_setzero_si512();
    if constexpr (Five) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(sc[1]), int(sc[0]))));
    const __m128i mn16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(mn[1]), int(mn[0])));
    __m512i sumi[M];
    for (int r = 0; r < M; ++r) sumi[r] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + (Five ? 48 : 16) + 32 * j));
      __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), m4);
      if constexpr (Five) {  // bit 2j (low half) or 2j + 1 (high half) of qh[l] is the 5th bit
        const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, hshift[j]), one);
        q = _mm512_or_si512(q, _mm512_slli_epi16(hb, 4));
      }
      const __m512i scv = _mm512_permutexvar_epi16(sidx[j], sc16);
      for (int r = 0; r < M; ++r) {
        const __m512i xq = _mm512_load_si512(x[r].q + ib * 256 + 64 * j);
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q, xq), scv);
      }
    }
    for (int r = 0; r < M; ++r) {
      const float dx = x[r].d[ib];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_set1_ps(d * dx), acc[r]);
      // the 8 sums of 32 from the 16 sums of 16, times the mins
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bs + ib * 16));
      const __m128i bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      __m128i p = _mm_madd_epi16(bs32, mn16);
      p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
      p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
      mins[r] += dmin * dx * float(_mm_cvtsi128_si32(p));
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
    ahead(b, 4);
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

// ---- IQ4_XS: per pair of 32-groups, 32 nibble bytes as [g lo, g hi, g+1 lo, g+1 hi] mapped
// through the level table + 128 (unsigned), int32 sums by vpdpbusd (no int16 pair sum: 241 * 127
// * 2 would saturate), times the groups' signed 6-bit scales; the + 128 comes off through the
// activation's 16-sums.
template <int M>
void iq4_xs_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m512i lut4 = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIQ4NLPlus128)));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i sidx[4];  // int32 lanes 0-7 from scale 2j, 8-15 from 2j + 1
  for (int j = 0; j < 4; ++j) sidx[j] = _mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1);
  __m512 acc[M];
  float offs[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    offs[r] = 0;
  }
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * 136;
    ahead(b, 3);
    const float d = f16(b);
    const uint32_t sh = uint32_t(b[2]) | (uint32_t(b[3]) << 8);
    // the 8 scales: low nibbles of bytes 4-7 (g even: low, odd: high) and 2 bits each of sh,
    // widened to int16 in registers (scalar stores read back as a vector would stall)
    uint32_t sl;
    __builtin_memcpy(&sl, b + 4, 4);
    const __m128i lo4 = _mm_cvtsi32_si128(int(sl));
    const __m128i nib = _mm_and_si128(_mm_unpacklo_epi8(lo4, _mm_srli_epi16(lo4, 4)), _mm_set1_epi8(15));
    const __m128i hi16 = _mm_and_si128(
        _mm_srlv_epi16(_mm_set1_epi16(int16_t(sh)), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)), _mm_set1_epi16(3));
    const __m128i sc16 =
        _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(nib), _mm_slli_epi16(hi16, 4)), _mm_set1_epi16(32));
    const __m512i sc32 = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(sc16));
    __m512i sumi[M];
    for (int r = 0; r < M; ++r) sumi[r] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 + 32 * j));
      __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), m4);
      q = _mm512_shuffle_epi8(lut4, _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(3, 1, 2, 0)));
      const __m512i scv = _mm512_permutexvar_epi32(sidx[j], sc32);
      for (int r = 0; r < M; ++r) {
        const __m512i xq = _mm512_load_si512(x[r].q + ib * 256 + 64 * j);
        sumi[r] =
            _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xq), scv));
      }
    }
    for (int r = 0; r < M; ++r) {
      const float ddx = d * x[r].d[ib];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_set1_ps(ddx), acc[r]);
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bs + ib * 16));
      __m128i p = _mm_madd_epi16(_mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)), sc16);
      p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
      p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
      offs[r] += ddx * float(128 * _mm_cvtsi128_si32(p));
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum512(acc[r]) - offs[r];
}

// ---- Q2_K / Q3_K: 2-bit values, per half of 128 elements four runs of 32 (the 32 qs bytes
// shifted by 0, 2, 4, 6), two runs per zmm; groups of 16 with int16 scales through vpdpwssd.
// Q2_K: unsigned q, scale = low nibble, min = high nibble of each scale byte (w = d sc q - dmin m).
// Q3_K: q + 4 (bit 2 = the hmask bit, set when the value is not lowered by 4) is unsigned; the
// 4 comes off as -4 * sum(sc_g * bsum_g), the signed 6-bit scales - 32.
template <bool Three, int M>
void q23_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  constexpr size_t BB = Three ? 110 : 84;
  const __m512i m3 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
  __m512i sidx[4], qshift[2], hshift[4];
  for (int c = 0; c < 4; ++c) {  // int16 pair sums of elements 64c' .. : groups 4c + i / 8
    alignas(64) int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = int16_t(4 * c + i / 8);
    sidx[c] = _mm512_load_si512(idx);
    // hmask bit of run 2c (low half) and 2c + 1 (high half): bit 4h + s with run = 4h + s
    hshift[c] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(2 * c)), _mm256_set1_epi16(int16_t(2 * c + 1)), 1);
  }
  for (int p = 0; p < 2; ++p)  // runs 2p (low half of the zmm) and 2p + 1: shifts 4p and 4p + 2
    qshift[p] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(4 * p)), _mm256_set1_epi16(int16_t(4 * p + 2)), 1);
  __m512 acc[M];
  float mins[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    mins[r] = 0;
  }
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * BB;
    ahead(b, 2);
    const uint8_t* qs = b + (Three ? 32 : 16);
    float d, dmin = 0;
    __m256i sc16, mn16 = _mm256_setzero_si256();
    if constexpr (Three) {
      d = f16(b + 108);
      uint32_t u[4];
      q3_k_scales(b, u);
      // (built from registers: four 4-byte stores read back as one 16-byte load would stall)
      const __m128i v = _mm_setr_epi32(int(u[0]), int(u[1]), int(u[2]), int(u[3]));
      sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)));
    } else {
      d = f16(b + 80);
      dmin = f16(b + 82);
      q2_k_scales_mins(b, sc16, mn16);
    }
    const __m512i scz = _mm512_castsi256_si512(sc16);
    __m512i hm = _mm512_setzero_si512();
    if constexpr (Three) hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
    __m512i sumi[M];
    for (int r = 0; r < M; ++r) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bs + ib * 16));
      if constexpr (Three)  // -4 * sum(sc_g * bsum_g), exact in int32
        sumi[r] = _mm512_zextsi256_si512(
            _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bs, sc16)), 2));
      else
        sumi[r] = _mm512_setzero_si512();
      if constexpr (!Three) {
        mins[r] += dmin * x[r].d[ib] * float(hsum_i32(_mm256_madd_epi16(bs, mn16)));
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h)));
      for (int p = 0; p < 2; ++p) {
        __m512i q = _mm512_and_si512(_mm512_srlv_epi16(Q, qshift[p]), m3);
        if constexpr (Three) {
          const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(hm, hshift[2 * h + p]), one);
          q = _mm512_or_si512(q, _mm512_slli_epi16(hb, 2));
        }
        const __m512i scv = _mm512_permutexvar_epi16(sidx[2 * h + p], scz);
        for (int r = 0; r < M; ++r) {
          const __m512i xq = _mm512_load_si512(x[r].q + ib * 256 + 128 * h + 64 * p);
          sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q, xq), scv);
        }
      }
    }
    for (int r = 0; r < M; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_set1_ps(d * x[r].d[ib]), acc[r]);
  }
  for (int r = 0; r < M; ++r) out[r] = hsum512(acc[r]) - mins[r];
}

WICK_ROWS(Q4_0F, (nib_kernel<Nib::Q4_0, M>(w, nb, x, m, o)))
WICK_ROWS(IQ4NLF, (nib_kernel<Nib::IQ4_NL, M>(w, nb, x, m, o)))
WICK_ROWS(Q4_1F, (nib_kernel<Nib::Q4_1, M>(w, nb, x, m, o)))
WICK_ROWS(Q5_0F, (nib_kernel<Nib::Q5_0, M>(w, nb, x, m, o)))
WICK_ROWS(Q5_1F, (nib_kernel<Nib::Q5_1, M>(w, nb, x, m, o)))
WICK_ROWS(MXFP4F, (nib_kernel<Nib::MXFP4, M>(w, nb, x, m, o)))
WICK_ROWS(Q8_0F, (q8_0_kernel<M>(w, nb, x, m, o)))
WICK_ROWS(Q4_KF, (q45_k_kernel<false, M>(w, nb, x, m, o)))
WICK_ROWS(Q5_KF, (q45_k_kernel<true, M>(w, nb, x, m, o)))
WICK_ROWS(IQ4XSF, (iq4_xs_kernel<M>(w, nb, x, m, o)))
WICK_ROWS(Q2_KF, (q23_k_kernel<false, M>(w, nb, x, m, o)))
WICK_ROWS(Q3_KF, (q23_k_kernel<true, M>(w, nb, x, m, o)))
WICK_ROWS(Q6_KF, (q6_k_kernel<M>(w, nb, x, m, o)))
#undef WICK_ROWS

}  // namespace

RowDot avx512_kernel(uint32_t type) {
  static constexpr RowEntry kRows[] = {
      {2, by_rows<Q4_0F>},   {3, by_rows<Q4_1F>},   {6, by_rows<Q5_0F>},  {7, by_rows<Q5_1F>},  {8, by_rows<Q8_0F>},
      {10, by_rows<Q2_KF>},  {11, by_rows<Q3_KF>},  {12, by_rows<Q4_KF>}, {13, by_rows<Q5_KF>}, {14, by_rows<Q6_KF>},
      {20, by_rows<IQ4NLF>}, {23, by_rows<IQ4XSF>}, {39, by_rows<MXFP4F>}};
  return find_row_kernel(kRows, type);
}

// Q8_0 activations as quant::quantize_block_q8_0 encodes them: d = amax / 127 and id = 1 / d in
// scalar f32, q = roundf(x * id) with the product rounded on its own (the explicit-rounding
// intrinsics, which no compiler contracts into an FMA), roundf (ties away from zero) as
// trunc(v + copysign(0.49999997, v)): the largest float below 1/2 cannot lift a non-tie to the
// next integer, and a tie's sum rounds up to it. The f16 scale through F16C's round-to-nearest-even.
// Left to the scalar encoder: non-finite values and max |x| outside [2^-100, 2^22] (1 / d near
// overflow, an f16 scale near its range), where the two are not worth proving equal.
size_t avx512_quantize_q8_0(const float* x, size_t nb, int8_t* q, float* d, int32_t* s, float* sd) {
  constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 inf = _mm512_set1_ps(__builtin_inff());
  const __m512i half = _mm512_castps_si512(_mm512_set1_ps(0.49999997f));
  const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
  for (size_t ib = 0; ib < nb; ++ib) {
    const __m512 x0 = _mm512_loadu_ps(x + 32 * ib), x1 = _mm512_loadu_ps(x + 32 * ib + 16);
    const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
    if (__mmask16(_mm512_cmp_ps_mask(a0, inf, _CMP_LT_OQ) & _mm512_cmp_ps_mask(a1, inf, _CMP_LT_OQ)) != 0xFFFF)
      return ib;
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    if (!(amax >= 0x1p-100f && amax <= 0x1p22f)) return ib;
    const float dd = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(1.0f / dd);
    __m512i qi[2];
    for (int h = 0; h < 2; ++h) {
      const __m512 v = _mm512_mul_round_ps(h ? x1 : x0, id, kRn);
      const __m512 hs = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), sign), half));
      qi[h] = _mm512_cvtt_roundps_epi32(_mm512_add_round_ps(v, hs, kRn), _MM_FROUND_NO_EXC);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * ib), _mm512_cvtepi32_epi8(qi[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * ib + 16), _mm512_cvtepi32_epi8(qi[1]));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
    const float df = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
    d[ib] = df;
    s[ib] = sum;
    sd[ib] = float(sum) * df;
  }
  return nb;
}

// Q8_K activation blocks of 256 floats as quant::quantize_block_q8_K encodes them: max is the
// first value of the largest magnitude, iscale = -127 / max in scalar f32, q = nearest (ties to
// even, the magic-number rounding's result below 2^22) of the product rounded on its own, clipped
// at 127; d = 1 / iscale; the sums of each 16. Left to the scalar encoder: non-finite values and
// max |x| outside [2^-100, 2^100] (iscale near overflow), where the two are not worth proving equal.
size_t avx512_quantize_q8_K(const float* x, size_t nb, int8_t* q, float* d, int16_t* bs) {
  const __m512 inf = _mm512_set1_ps(__builtin_inff());
  const __m512i top = _mm512_set1_epi32(127);
  for (size_t ib = 0; ib < nb; ++ib) {
    const float* xb = x + 256 * ib;
    __m512 amax = _mm512_setzero_ps();
    for (int c = 0; c < 16; ++c) {
      const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * c));
      if (_mm512_cmp_ps_mask(a, inf, _CMP_LT_OQ) != 0xFFFF) return ib;
      amax = _mm512_max_ps(amax, a);
    }
    const float am = _mm512_reduce_max_ps(amax);
    if (!(am >= 0x1p-100f && am <= 0x1p100f)) return ib;
    float mx = 0;
    for (int c = 0; c < 16; ++c) {  // the first element of magnitude am
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * c)), _mm512_set1_ps(am), _CMP_EQ_OQ);
      if (hit) {
        mx = xb[16 * c + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / mx;
    const __m512 is = _mm512_set1_ps(iscale);
    for (int c = 0; c < 16; ++c) {
      const __m512 v =
          _mm512_mul_round_ps(_mm512_loadu_ps(xb + 16 * c), is, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i qi =
          _mm512_min_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), top);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 256 * ib + 16 * c), _mm512_cvtepi32_epi8(qi));
      bs[16 * ib + c] = int16_t(_mm512_reduce_add_epi32(qi));
    }
    d[ib] = 1.0f / iscale;
  }
  return nb;
}

}  // namespace wick::cpu::qdot

#else  // not x86-64: no AVX-512 kernels

namespace wick::cpu::qdot {
RowDot avx512_kernel(uint32_t) { return nullptr; }
size_t avx512_quantize_q8_0(const float*, size_t, int8_t*, float*, int32_t*, float*) { return 0; }
size_t avx512_quantize_q8_K(const float*, size_t, int8_t*, float*, int16_t*) { return 0; }
}  // namespace wick::cpu::qdot

#endif

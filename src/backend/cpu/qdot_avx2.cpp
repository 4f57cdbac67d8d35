// AVX2 + FMA kernels of the CPU quantized matmul: Q4_0, Q8_0, IQ4_NL, MXFP4 (Q8_0 activations)
// and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (Q8_K activations). Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt) and
// called only when the CPU has them (qdot.cpp). Includes nothing but qdot_kernels.hpp (which says
// why), qdot_x86.hpp (the helpers it shares with qdot_avx512.cpp) and <immintrin.h>.
//
// The int8 products go through vpmaddubsw (u8 x s8 -> int16 pair sums) and vpmaddwd: unsigned
// weights (nibbles, 6-bit values) directly with their offset taken off via the activation sums;
// signed ones as |w| times x with w's sign (vpsignb). No pair sum can saturate int16: at most
// 2 * 63 * 127. All integer sums are exact; each block's int32 sum is scaled in f32.
#include "backend/cpu/qdot_kernels.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/qdot_x86.hpp"

namespace wick::cpu::qdot {
namespace {

// Sum of 32 signed w times 32 signed x, as 8 int32 lanes.
inline __m256i dot_ss(__m256i w, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// ---- 32-element blocks with 16 nibble bytes: Q4_0 (unsigned q, - 8 * sum x), IQ4_NL and MXFP4
// (signed levels through a 16-entry table).
enum class Nib { Q4_0, IQ4_NL, MXFP4 };

template <Nib K, int M>
void nib_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  constexpr size_t BB = K == Nib::MXFP4 ? 17 : 18;
  constexpr size_t QS = K == Nib::MXFP4 ? 1 : 2;
  const __m256i lut = _mm256_broadcastsi128_si256(
      K == Nib::IQ4_NL ? _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
                       : _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * BB;
    ahead(b, 1);
    const float dw = K == Nib::MXFP4 ? e8m0_half(b[0]) : f16(b);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + QS));
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
    for (int r = 0; r < M; ++r) {
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[r].q + ib * 32));
      __m256i s;
      if constexpr (K == Nib::Q4_0)
        s = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), ones), lane0(8 * x[r].s[ib]));
      else
        s = dot_ss(_mm256_shuffle_epi8(lut, q), xq);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * x[r].d[ib]), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]);
}

template <int M>
void q8_0_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * 34;
    ahead(b, 1);
    const float dw = f16(b);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    const __m256i aq = _mm256_sign_epi8(q, q);
    for (int r = 0; r < M; ++r) {
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[r].q + ib * 32));
      const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(xq, q)), _mm256_set1_epi16(1));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * x[r].d[ib]), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]);
}

inline void scale_min(const uint8_t* s, int g, int& sc, int& mn) {
  if (g < 4) {
    sc = s[g] & 63;
    mn = s[g + 4] & 63;
  } else {
    sc = (s[g + 4] & 15) | ((s[g - 4] >> 2) & 0x30);
    mn = (s[g + 4] >> 4) | ((s[g] >> 2) & 0x30);
  }
}

// ---- Q4_K: 32 bytes of nibbles hold two groups of 32 (low, high); int16 pair sums times the
// group's 6-bit scale; the mins through the activation's 16-sums.
template <bool Five, int M>
void q45_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  constexpr size_t BB = Five ? 176 : 144;
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[M];
  float mins[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm256_setzero_ps();
    mins[r] = 0;
  }
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * BB;
    ahead(b, 3);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (Five) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    const float d = f16(b), dmin = f16(b + 2);
    int sc[8], mn[8];
    for (int g = 0; g < 8; ++g) scale_min(b + 4, g, sc[g], mn[g]);
    __m256i sumi[M];
    for (int r = 0; r < M; ++r) sumi[r] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + (Five ? 48 : 16) + 32 * j));
      __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      if constexpr (Five) {  // bit 2j (low nibbles) and 2j + 1 (high) of qh[l] are the 5th bits
        const __m256i b0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), one);
        const __m256i b1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j + 1)), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
      }
      const __m256i s0 = _mm256_set1_epi16(int16_t(sc[2 * j])), s1 = _mm256_set1_epi16(int16_t(sc[2 * j + 1]));
      for (int r = 0; r < M; ++r) {
        const int8_t* xq = x[r].q + ib * 256 + 64 * j;
        const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(xq)));
        const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + 32)));
        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
      }
    }
    for (int r = 0; r < M; ++r) {
      const float dx = x[r].d[ib];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_set1_ps(d * dx), acc[r]);
      const int16_t* bs = x[r].bs + ib * 16;
      int32_t m = 0;
      for (int g = 0; g < 8; ++g) m += mn[g] * (bs[2 * g] + bs[2 * g + 1]);
      mins[r] += dmin * dx * float(m);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]) - mins[r];
}

// ---- Q6_K: per half of 128, four vectors of 32 6-bit values 0..63 (low nibbles of ql, high
// nibbles, each or'ed with two bits of qh); the -32 offset is -32 * sum(scale_g * bsum_g).
template <int M>
void q6_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * 210;
    ahead(b, 4);
    const float d = f16(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const __m256i neg32sc = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
    __m256i sumi[M];
    for (int r = 0; r < M; ++r)
      sumi[r] = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bs + ib * 16)), neg32sc);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* l8 = b + 64 * h;
      const __m256i L0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l8));
      const __m256i L1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l8 + 32));
      const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
      q[1] = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
      for (int c = 0; c < 4; ++c) {
        // elements 32c..32c+31 of the half: groups 8h + 2c and 8h + 2c + 1
        const int g = 8 * h + 2 * c;
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        for (int r = 0; r < M; ++r) {
          const int8_t* xq = x[r].q + ib * 256 + 128 * h + 32 * c;
          const __m256i p = _mm256_maddubs_epi16(q[c], _mm256_load_si256(reinterpret_cast<const __m256i*>(xq)));
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, s));
        }
      }
    }
    for (int r = 0; r < M; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_set1_ps(d * x[r].d[ib]), acc[r]);
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]);
}

// ---- Q2_K / Q3_K: per half of 128 elements four runs of 32 (the 32 qs bytes shifted by 0, 2, 4,
// 6), two groups of 16 per run. Q2_K: unsigned q, w = d sc q - dmin m (scale and min nibbles).
// Q3_K: q + 4 (bit 2 = the hmask bit) is unsigned, the 4 off as -4 * sum(sc_g * bsum_g).
template <bool Three, int M>
void q23_k_kernel(const uint8_t* w, size_t nb, const XRow* x, int, float* out) {
  constexpr size_t BB = Three ? 110 : 84;
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc[M];
  float mins[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm256_setzero_ps();
    mins[r] = 0;
  }
  for (size_t ib = 0; ib < nb; ++ib) {
    const uint8_t* b = w + ib * BB;
    ahead(b, 2);
    const uint8_t* qs = b + (Three ? 32 : 16);
    float d, dmin = 0;
    uint32_t u[4];  // Q3_K: the 16 scales, four bytes a word
    __m256i sc16, mn16 = _mm256_setzero_si256();
    if constexpr (Three) {
      d = f16(b + 108);
      q3_k_scales(b, u);
      sc16 = _mm256_cvtepi8_epi16(
          _mm_sub_epi8(_mm_setr_epi32(int(u[0]), int(u[1]), int(u[2]), int(u[3])), _mm_set1_epi8(32)));
    } else {
      d = f16(b + 80);
      dmin = f16(b + 82);
      q2_k_scales_mins(b, sc16, mn16);
    }
    // scale g as a scalar, for the per-run vectors
    auto scale = [&](int g) -> int16_t {
      if constexpr (Three) return int16_t(int((u[g / 4] >> (8 * (g % 4))) & 0xFF) - 32);
      return int16_t(b[g] & 15);
    };
    __m256i hm = _mm256_setzero_si256();
    if constexpr (Three) hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    __m256i sumi[M];
    for (int r = 0; r < M; ++r) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bs + ib * 16));
      if constexpr (Three) {
        sumi[r] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bs, sc16)), 2);
      } else {
        sumi[r] = _mm256_setzero_si256();
        mins[r] += dmin * x[r].d[ib] * float(hsum_i32(_mm256_madd_epi16(bs, mn16)));
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i Q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
      for (int s = 0; s < 4; ++s) {
        __m256i q = _mm256_and_si256(_mm256_srl_epi16(Q, _mm_cvtsi32_si128(2 * s)), m3);
        if constexpr (Three) {
          const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * h + s)), one);
          q = _mm256_or_si256(q, _mm256_slli_epi16(hb, 2));
        }
        const int g = 8 * h + 2 * s;  // elements 128h + 32s ..: groups g and g + 1
        const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(scale(g + 1)), _mm_set1_epi16(scale(g)));
        for (int r = 0; r < M; ++r) {
          const int8_t* xq = x[r].q + ib * 256 + 128 * h + 32 * s;
          const __m256i p = _mm256_maddubs_epi16(q, _mm256_load_si256(reinterpret_cast<const __m256i*>(xq)));
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, scv));
        }
      }
    }
    for (int r = 0; r < M; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_set1_ps(d * x[r].d[ib]), acc[r]);
  }
  for (int r = 0; r < M; ++r) out[r] = hsum(acc[r]) - mins[r];
}

WICK_ROWS(Q4_0F, (nib_kernel<Nib::Q4_0, M>(w, nb, x, m, o)))
WICK_ROWS(IQ4NLF, (nib_kernel<Nib::IQ4_NL, M>(w, nb, x, m, o)))
WICK_ROWS(MXFP4F, (nib_kernel<Nib::MXFP4, M>(w, nb, x, m, o)))
WICK_ROWS(Q8_0F, (q8_0_kernel<M>(w, nb, x, m, o)))
WICK_ROWS(Q4_KF, (q45_k_kernel<false, M>(w, nb, x, m, o)))
WICK_ROWS(Q5_KF, (q45_k_kernel<true, M>(w, nb, x, m, o)))
WICK_ROWS(Q2_KF, (q23_k_kernel<false, M>(w, nb, x, m, o)))
WICK_ROWS(Q3_KF, (q23_k_kernel<true, M>(w, nb, x, m, o)))
WICK_ROWS(Q6_KF, (q6_k_kernel<M>(w, nb, x, m, o)))
#undef WICK_ROWS

}  // namespace

RowDot avx2_kernel(uint32_t type) {
  static constexpr RowEntry kRows[] = {{2, by_rows<Q4_0F>},  {8, by_rows<Q8_0F>},   {10, by_rows<Q2_KF>},
                                       {11, by_rows<Q3_KF>}, {12, by_rows<Q4_KF>},  {13, by_rows<Q5_KF>},
                                       {14, by_rows<Q6_KF>}, {20, by_rows<IQ4NLF>}, {39, by_rows<MXFP4F>}};
  return find_row_kernel(kRows, type);
}

}  // namespace wick::cpu::qdot

#else  // not x86-64: no AVX2 kernels

namespace wick::cpu::qdot {
RowDot avx2_kernel(uint32_t) { return nullptr; }
}  // namespace wick::cpu::qdot

#endif

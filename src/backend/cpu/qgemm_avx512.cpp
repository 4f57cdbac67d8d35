// AVX-512 VNNI panel kernels of the CPU quantized matmul's prefill (qdot_kernels.hpp, PanelKernel):
// Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 weights against Q8_0 activations. Compiled with the same flags
// as qdot_avx512.cpp and called only when the CPU has them; includes nothing but qdot_kernels.hpp
// (which says why) and <immintrin.h>.
//
// A panel lane is a weight row. Each block's bytes of the 16 rows are gathered once into 8 vectors
// of 4 unsigned values a lane (the value + off, off taken back exactly in the int32 sum through
// -off * sum(x q)), then every activation row runs vpdpbusd on them with 4 of its bytes broadcast:
// 8 products-of-64 per block and row against one scale multiply, where the row kernels spend a
// shuffle, a conversion and two FMAs on every 2 products-of-64.
#include "backend/cpu/qdot_kernels.hpp"

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // as qdot_avx512.cpp: GCC 12's headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace wick::cpu::qdot {
namespace {

enum class P { Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 };

// Block bytes, where the quants start, where Q5_0's fifth bits are (0: none).
template <P K>
struct PT {
  static constexpr int BB = K == P::Q8_0 ? 34 : K == P::Q5_0 ? 22 : K == P::MXFP4 ? 17 : 18;
  static constexpr int QS = K == P::Q5_0 ? 6 : K == P::MXFP4 ? 1 : 2;
  static constexpr int QH = K == P::Q5_0 ? 2 : 0;
};

// The 16 lanes' dwords at base + lane * row_bytes (lanes outside mask 0).
inline __m512i gather(__mmask16 mask, __m512i idx, const uint8_t* base) {
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, idx, base, 1);
}

template <P K>
void pack(const uint8_t* w, size_t row_bytes, size_t rows, size_t nb, uint8_t* panel) {
  using T = PT<K>;
  const __mmask16 mask = rows >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(int32_t(row_bytes)));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // The table types' value as an unsigned byte: their signed level + 128 (as qdot_avx512.cpp).
  const __m512i lut = _mm512_broadcast_i32x4(
      K == P::IQ4_NL ? _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, -127, -115, -103, -90, -75, -59, -39, -15)
                     : _mm_setr_epi8(-128, -127, -126, -125, -124, -122, -120, -116, -128, 127, 126, 125, 124, 122,
                                     120, 116));
  for (size_t b = 0; b < nb; ++b, panel += kPanelBlockBytes) {
    const uint8_t* blk = w + b * T::BB;
    const __m512i head = gather(mask, idx, blk);  // the scale in the low bytes
    __m512 d;
    if constexpr (K == P::MXFP4) {  // e8m0 halved, as the decoder: 2^(e - 128), subnormal for e < 2
      const __m512i e = _mm512_and_si512(head, _mm512_set1_epi32(0xFF));
      const __mmask16 sub = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
      const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
      d = _mm512_castsi512_ps(_mm512_mask_blend_epi32(sub, normal, _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e)));
    } else {
      d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    }
    _mm512_store_ps(reinterpret_cast<float*>(panel), d);
    __m512i* v = reinterpret_cast<__m512i*>(panel + 64);
    if constexpr (K == P::Q8_0) {  // signed bytes + 128: the sign bit flipped
      for (int t = 0; t < 8; ++t)
        _mm512_store_si512(v + t, _mm512_xor_si512(gather(mask, idx, blk + T::QS + 4 * t), _mm512_set1_epi8(-128)));
      continue;
    }
    __m512i qh = _mm512_setzero_si512();
    if constexpr (T::QH != 0) qh = gather(mask, idx, blk + T::QH);
    for (int c = 0; c < 4; ++c) {  // bytes 4c..4c+3: elements 4c.. (low nibbles), 16 + 4c.. (high)
      const __m512i raw = gather(mask, idx, blk + T::QS + 4 * c);
      __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      if constexpr (K == P::IQ4_NL || K == P::MXFP4) {
        lo = _mm512_shuffle_epi8(lut, lo);
        hi = _mm512_shuffle_epi8(lut, hi);
      }
      if constexpr (T::QH != 0) {  // element j's fifth bit is bit j of qh, moved to bit 4 of its byte
        const __m512i spread = _mm512_set1_epi32(0x02040810);
        const __m512i b4 = _mm512_set1_epi32(0x10101010);
        lo = _mm512_or_si512(
            lo, _mm512_and_si512(_mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 4 * c), _mm512_set1_epi32(15)),
                                                    spread),
                                 b4));
        hi = _mm512_or_si512(
            hi, _mm512_and_si512(
                    _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 16 + 4 * c), _mm512_set1_epi32(15)), spread),
                    b4));
      }
      _mm512_store_si512(v + c, lo);
      _mm512_store_si512(v + 4 + c, hi);
    }
  }
}

// Vector t of a block holds elements 4t..4t+3 of each lane's row: the activation bytes 4t..4t+3,
// broadcast from the x tile (each load folds into its vpdpbusd).
template <int M>
void gemm(const uint8_t* panel, size_t nb, const uint8_t* xt, float* out) {
  __m512 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; ++b, panel += kPanelBlockBytes, xt += kXTileBlockBytes) {
    const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(panel));
    const __m512i* v = reinterpret_cast<const __m512i*>(panel + 64);
    const __m512i w0 = _mm512_load_si512(v), w1 = _mm512_load_si512(v + 1), w2 = _mm512_load_si512(v + 2),
                  w3 = _mm512_load_si512(v + 3), w4 = _mm512_load_si512(v + 4), w5 = _mm512_load_si512(v + 5),
                  w6 = _mm512_load_si512(v + 6), w7 = _mm512_load_si512(v + 7);
    const int32_t* q = reinterpret_cast<const int32_t*>(xt);  // 8 dwords a row
    const float* dx = reinterpret_cast<const float*>(xt + kXTileRows * 32);
    const int32_t* os = reinterpret_cast<const int32_t*>(xt + kXTileRows * 36);
    for (int r = 0; r < M; ++r) {
      const int32_t* qr = q + 8 * r;
      // Two chains of four, so each block's sum waits on four dependent vpdpbusd, not eight.
      __m512i s0 = _mm512_set1_epi32(os[r]), s1 = _mm512_setzero_si512();
      s0 = _mm512_dpbusd_epi32(s0, w0, _mm512_set1_epi32(qr[0]));
      s1 = _mm512_dpbusd_epi32(s1, w1, _mm512_set1_epi32(qr[1]));
      s0 = _mm512_dpbusd_epi32(s0, w2, _mm512_set1_epi32(qr[2]));
      s1 = _mm512_dpbusd_epi32(s1, w3, _mm512_set1_epi32(qr[3]));
      s0 = _mm512_dpbusd_epi32(s0, w4, _mm512_set1_epi32(qr[4]));
      s1 = _mm512_dpbusd_epi32(s1, w5, _mm512_set1_epi32(qr[5]));
      s0 = _mm512_dpbusd_epi32(s0, w6, _mm512_set1_epi32(qr[6]));
      s1 = _mm512_dpbusd_epi32(s1, w7, _mm512_set1_epi32(qr[7]));
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(dx[r]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), dd, acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) _mm512_storeu_ps(out + 16 * r, acc[r]);
}

void gemm_rows(const uint8_t* panel, size_t nb, const uint8_t* xt, int m, float* out) {
  switch (m) {
    case 1:
      return gemm<1>(panel, nb, xt, out);
    case 2:
      return gemm<2>(panel, nb, xt, out);
    case 3:
      return gemm<3>(panel, nb, xt, out);
    case 4:
      return gemm<4>(panel, nb, xt, out);
    case 5:
      return gemm<5>(panel, nb, xt, out);
    case 6:
      return gemm<6>(panel, nb, xt, out);
    case 7:
      return gemm<7>(panel, nb, xt, out);
    default:
      return gemm<8>(panel, nb, xt, out);
  }
}

}  // namespace

PanelKernel avx512_panel(uint32_t type) {
  switch (type) {  // GGMLType numbers
    case 2:
      return {pack<P::Q4_0>, gemm_rows, 8};
    case 6:
      return {pack<P::Q5_0>, gemm_rows, 16};
    case 8:
      return {pack<P::Q8_0>, gemm_rows, 128};
    case 20:
      return {pack<P::IQ4_NL>, gemm_rows, 128};
    case 39:
      return {pack<P::MXFP4>, gemm_rows, 128};
    default:
      return {nullptr, nullptr, 0};
  }
}

}  // namespace wick::cpu::qdot

#else  // not x86-64: no AVX-512 kernels

namespace wick::cpu::qdot {
PanelKernel avx512_panel(uint32_t) { return {nullptr, nullptr, 0}; }
}  // namespace wick::cpu::qdot

#endif

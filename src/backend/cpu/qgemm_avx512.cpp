// AVX-512 VNNI panel kernels of the CPU quantized matmul's prefill (qdot_kernels.hpp, PanelKernel):
// Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 weights against Q8_0 activations, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
// and IQ4_XS against Q8_K. Compiled with the same flags as qdot_avx512.cpp and called only when the
// CPU has them; includes nothing but qdot_kernels.hpp (which says why) and <immintrin.h>.
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
  // The table types' value as an unsigned byte: their signed level + 128.
  const __m512i lut =
      _mm512_broadcast_i32x4(K == P::IQ4_NL ? _mm_load_si128(reinterpret_cast<const __m128i*>(kIQ4NLPlus128))
                                            : _mm_load_si128(reinterpret_cast<const __m128i*>(kMXFP4Plus128)));
  for (size_t b = 0; b < nb; ++b, panel += kPanelBlockBytes) {
    const uint8_t* blk = w + b * T::BB;
    const __m512i head = gather(mask, idx, blk);  // the scale in the low bytes
    __m512 d;
    if constexpr (K == P::MXFP4) {  // e8m0 halved, as the decoder: 2^(e - 128), subnormal for e < 2
      const __m512i e = _mm512_and_si512(head, _mm512_set1_epi32(0xFF));
      const __mmask16 sub = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
      const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
      d = _mm512_castsi512_ps(
          _mm512_mask_blend_epi32(sub, normal, _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e)));
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
            lo,
            _mm512_and_si512(
                _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 4 * c), _mm512_set1_epi32(15)), spread), b4));
        hi = _mm512_or_si512(
            hi,
            _mm512_and_si512(
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
    const float* dx = reinterpret_cast<const float*>(xt + kXBlockD);
    const int32_t* os = reinterpret_cast<const int32_t*>(xt + kXBlockOff);
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

// ---- K-quants: 256-element super-blocks, 16 rows a panel (qdot_kernels.hpp's layout).
enum class KQ { Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS };

// Byte j (0..3) of each lane's dword as an int32 lane.
inline __m512i byte_of(__m512i v, int j) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(0xFF));
}

template <KQ K>
void pack_k(const uint8_t* w, size_t row_bytes, size_t rows, size_t nb, uint8_t* panel) {
  constexpr int BB = K == KQ::Q2_K   ? 84
                     : K == KQ::Q3_K ? 110
                     : K == KQ::Q4_K ? 144
                     : K == KQ::Q5_K ? 176
                     : K == KQ::Q6_K ? 210
                                     : 136;
  const __mmask16 mask = rows >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(int32_t(row_bytes)));
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03), m1 = _mm512_set1_epi8(0x01);
  for (size_t b = 0; b < nb; ++b, panel += kPanelSuperBytes) {
    const uint8_t* blk = w + b * BB;
    float* dd = reinterpret_cast<float*>(panel);
    __m512i* sc = reinterpret_cast<__m512i*>(panel + kPSuperScales);
    __m512i* mn = reinterpret_cast<__m512i*>(panel + kPSuperMins);
    __m512i* q = reinterpret_cast<__m512i*>(panel + kPSuperQ);
    if constexpr (K == KQ::Q3_K || K == KQ::IQ4_XS) {
      for (int g = 0; g < 4; ++g) _mm512_store_si512(mn + g, _mm512_setzero_si512());
      _mm512_store_ps(dd + 16, _mm512_setzero_ps());
    }
    if constexpr (K == KQ::Q2_K) {
      // 16 scale bytes at 0 (scale low nibble, min high), qs (64) at 16, f16 d and dmin at 80.
      // Element e: 2 bits of qs[32 (e / 128) + e % 32] at 2 ((e / 32) % 4), as Q3_K's.
      const __m512i head = gather(mask, idx, blk + 80);
      _mm512_store_ps(dd, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head)));
      _mm512_store_ps(dd + 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16))));
      __m512i mb[16];
      for (int c = 0; c < 4; ++c) {
        const __m512i v = gather(mask, idx, blk + 4 * c);
        for (int j = 0; j < 4; ++j) {
          const __m512i b8 = byte_of(v, j);
          _mm512_store_si512(sc + 4 * c + j, _mm512_and_si512(b8, _mm512_set1_epi32(15)));
          mb[4 * c + j] = _mm512_srli_epi32(b8, 4);
        }
      }
      for (int p = 0; p < 8; ++p)
        _mm512_store_si512(mn + p, _mm512_or_si512(mb[2 * p], _mm512_slli_epi32(mb[2 * p + 1], 16)));
      for (int c = 0; c < 8; ++c)
        for (int half = 0; half < 2; ++half) {
          const __m512i raw = gather(mask, idx, blk + 16 + 32 * half + 4 * c);
          for (int i = 0; i < 4; ++i)
            _mm512_store_si512(q + 8 * (4 * half + i) + c, _mm512_and_si512(_mm512_srli_epi16(raw, 2 * i), m2));
        }
      continue;
    }
    if constexpr (K == KQ::Q3_K) {
      // hmask (32) at 0, qs (64) at 32, 12 bytes of 6-bit scales at 96, f16 d at 108 (the high half
      // of the dword at 106). Element e: 2 bits of qs[32 (e / 128) + e % 32] at 2 ((e / 32) % 4), its
      // hmask bit (e / 32) of byte e % 32 set meaning +4: u = q + 4 h in 0..7, value u - 4.
      const __m512i dw = gather(mask, idx, blk + 106);
      _mm512_store_ps(dd, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dw, 16))));
      const __m512i A = gather(mask, idx, blk + 96), B = gather(mask, idx, blk + 100), C = gather(mask, idx, blk + 104);
      for (int g = 0; g < 16; ++g) {  // (low 4 bits of byte g % 8, nibble g / 8) | (2 bits of byte 8 + g % 4) << 4
        const __m512i lo4 = _mm512_and_si512(_mm512_srli_epi32(byte_of((g & 7) < 4 ? A : B, g & 3), 4 * (g >> 3)),
                                             _mm512_set1_epi32(15));
        const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi32(byte_of(C, g & 3), 2 * (g >> 2)), _mm512_set1_epi32(3));
        _mm512_store_si512(sc + g,
                           _mm512_sub_epi32(_mm512_or_si512(lo4, _mm512_slli_epi32(hi2, 4)), _mm512_set1_epi32(32)));
      }
      for (int c = 0; c < 8; ++c) {
        const __m512i h = gather(mask, idx, blk + 4 * c);
        for (int half = 0; half < 2; ++half) {
          const __m512i raw = gather(mask, idx, blk + 32 + 32 * half + 4 * c);
          for (int i = 0; i < 4; ++i) {  // chunk j = 4 half + i of 32 elements
            const int j = 4 * half + i;
            const __m512i qv = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * i), m2);
            const __m512i hv = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, j), m1), 2);
            _mm512_store_si512(q + 8 * j + c, _mm512_or_si512(qv, hv));
          }
        }
      }
      continue;
    }
    if constexpr (K == KQ::IQ4_XS) {
      // f16 d, u16 high scale bits at 2, 4 bytes of low scale nibbles at 4, qs (128) at 8: group g's
      // scale ((sl[g / 2] >> 4 (g % 2)) & 15 | ((sh >> 2g) & 3) << 4) - 32; its 16 bytes at 8 + 16g,
      // low nibbles elements 32g.., high 32g + 16.., through the IQ4_NL table (+ 128).
      const __m512i head = gather(mask, idx, blk), SL = gather(mask, idx, blk + 4);
      _mm512_store_ps(dd, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head)));
      const __m512i sh = _mm512_srli_epi32(head, 16);
      for (int g = 0; g < 8; ++g) {
        const __m512i lo4 = _mm512_and_si512(_mm512_srli_epi32(SL, 8 * (g >> 1) + 4 * (g & 1)), _mm512_set1_epi32(15));
        const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * g), _mm512_set1_epi32(3));
        _mm512_store_si512(sc + g,
                           _mm512_sub_epi32(_mm512_or_si512(lo4, _mm512_slli_epi32(hi2, 4)), _mm512_set1_epi32(32)));
        _mm512_store_si512(sc + 8 + g, _mm512_setzero_si512());
      }
      const __m512i lut = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIQ4NLPlus128)));
      for (int g = 0; g < 8; ++g)
        for (int c = 0; c < 4; ++c) {
          const __m512i raw = gather(mask, idx, blk + 8 + 16 * g + 4 * c);
          _mm512_store_si512(q + 8 * g + c, _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4)));
          _mm512_store_si512(q + 8 * g + 4 + c,
                             _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4)));
        }
      continue;
    }
    if constexpr (K == KQ::Q6_K) {
      // ql (128) at 0, qh (64) at 128, 16 int8 scales at 192, f16 d at 208 (read as the high half
      // of the dword at 206, so no lane reads past its block).
      const __m512i dw = gather(mask, idx, blk + 206);
      _mm512_store_ps(dd, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dw, 16))));
      _mm512_store_ps(dd + 16, _mm512_setzero_ps());
      for (int c = 0; c < 4; ++c) {
        const __m512i v = gather(mask, idx, blk + 192 + 4 * c);
        for (int j = 0; j < 4; ++j)  // sign-extended: byte j moved to the top of the lane, shifted down
          _mm512_store_si512(sc + 4 * c + j, _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * j), 24));
      }
      // Half n, dword c of a 32-byte run: elements 128n + 32i + 4c.. for i = 0..3 (the low
      // nibbles of ql bytes 64n + 4c.. and 64n + 32 + 4c.., then their high nibbles; qh's bit
      // pairs 0, 2, 4, 6 of bytes 32n + 4c..).
      for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 8; ++c) {
          const __m512i a = gather(mask, idx, blk + 64 * n + 4 * c), bq = gather(mask, idx, blk + 64 * n + 32 + 4 * c);
          const __m512i h = gather(mask, idx, blk + 128 + 32 * n + 4 * c);
          const __m512i lo[4] = {_mm512_and_si512(a, m4), _mm512_and_si512(bq, m4),
                                 _mm512_and_si512(_mm512_srli_epi16(a, 4), m4),
                                 _mm512_and_si512(_mm512_srli_epi16(bq, 4), m4)};
          for (int i = 0; i < 4; ++i) {
            const __m512i hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * i), m2), 4);
            _mm512_store_si512(q + 32 * n + 8 * i + c, _mm512_or_si512(lo[i], hi));
          }
        }
      continue;
    }
    // Q4_K / Q5_K: f16 d and dmin, 12 bytes of 6-bit scales and mins at 4, (Q5_K: qh, 32 at 16), qs.
    const __m512i head = gather(mask, idx, blk);
    _mm512_store_ps(dd, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head)));
    _mm512_store_ps(dd + 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16))));
    const __m512i A = gather(mask, idx, blk + 4), B = gather(mask, idx, blk + 8), C = gather(mask, idx, blk + 12);
    const __m512i c3f = _mm512_set1_epi32(0x3f3f3f3f), c0f = _mm512_set1_epi32(0x0f0f0f0f),
                  c03 = _mm512_set1_epi32(0x03030303);
    const __m512i sc_lo = _mm512_and_si512(A, c3f), mn_lo = _mm512_and_si512(B, c3f);
    const __m512i sc_hi =
        _mm512_or_si512(_mm512_and_si512(C, c0f), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(A, 6), c03), 4));
    const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(C, 4), c0f),
                                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(B, 6), c03), 4));
    for (int j = 0; j < 4; ++j) {
      _mm512_store_si512(sc + j, byte_of(sc_lo, j));
      _mm512_store_si512(sc + 4 + j, byte_of(sc_hi, j));
    }
    for (int g = 8; g < 16; ++g) _mm512_store_si512(sc + g, _mm512_setzero_si512());
    for (int p = 0; p < 2; ++p) {  // int16 pairs (mins 2p, 2p + 1) of groups 0-3, then 4-7
      _mm512_store_si512(mn + p,
                         _mm512_or_si512(byte_of(mn_lo, 2 * p), _mm512_slli_epi32(byte_of(mn_lo, 2 * p + 1), 16)));
      _mm512_store_si512(mn + 2 + p,
                         _mm512_or_si512(byte_of(mn_hi, 2 * p), _mm512_slli_epi32(byte_of(mn_hi, 2 * p + 1), 16)));
    }
    constexpr int QS = K == KQ::Q5_K ? 48 : 16;
    // Chunk j of 64 elements: byte l of qs[32j..] holds element 64j + l (low nibble) and 64j + 32 + l
    // (high); Q5_K's fifth bits of those are bits 2j and 2j + 1 of qh[l].
    for (int j = 0; j < 4; ++j)
      for (int c = 0; c < 8; ++c) {
        const __m512i raw = gather(mask, idx, blk + QS + 32 * j + 4 * c);
        __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if constexpr (K == KQ::Q5_K) {
          const __m512i h = gather(mask, idx, blk + 16 + 4 * c);
          lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * j), m1), 4));
          hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * j + 1), m1), 4));
        }
        _mm512_store_si512(q + 16 * j + c, lo);
        _mm512_store_si512(q + 16 * j + 8 + c, hi);
      }
  }
}

// G: elements a scale group (32: Q4_K / Q5_K with mins, IQ4_XS with its offset; 16: Q2_K with mins,
// Q3_K / Q6_K with their offsets); the offsets come from the x tile.
// Loop order: a group's weight vectors and scale stay in registers for all M rows; each row's
// int32 sum over the super-block is exact (|sum| < 2^31 with these types' scales).
template <int G, bool kMin, int M>
void gemm_k(const uint8_t* panel, size_t nb, const uint8_t* xt, float* out) {
  __m512 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; ++b, panel += kPanelSuperBytes, xt += kXTileSuperBytes) {
    const __m512i* sc = reinterpret_cast<const __m512i*>(panel + kPSuperScales);
    const __m512i* qv = reinterpret_cast<const __m512i*>(panel + kPSuperQ);
    const int32_t* xq = reinterpret_cast<const int32_t*>(xt);  // 64 dwords a row
    const float* dx = reinterpret_cast<const float*>(xt + kXSuperD);
    const int32_t* os = reinterpret_cast<const int32_t*>(xt + kXSuperOff);  // 16 a row
    // int16 pairs of x's sums: of each 32 (4 a row) or, for groups of 16, of each 16 (8 a row)
    const int32_t* bp = reinterpret_cast<const int32_t*>(xt + (G == 16 ? kXSuperPairs16 : kXSuperPairs32));
    __m512i isum[M];
    for (int r = 0; r < M; ++r) isum[r] = _mm512_setzero_si512();
    for (int g = 0; g < 256 / G; ++g) {
      const __m512i s = _mm512_load_si512(sc + g);
      __m512i wv[G / 4];
      for (int t = 0; t < G / 4; ++t) wv[t] = _mm512_load_si512(qv + g * (G / 4) + t);
      for (int r = 0; r < M; ++r) {
        const int32_t* x4 = xq + 64 * r + g * (G / 4);
        // The type's offset (-off times x's sums of 16, from the x tile); the min types have none.
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        if constexpr (!kMin && G == 16) {
          s0 = _mm512_set1_epi32(os[16 * r + g]);
        } else if constexpr (!kMin) {
          s0 = _mm512_set1_epi32(os[16 * r + 2 * g]);
          s1 = _mm512_set1_epi32(os[16 * r + 2 * g + 1]);
        }
        for (int t = 0; t < G / 4; t += 2) {
          s0 = _mm512_dpbusd_epi32(s0, wv[t], _mm512_set1_epi32(x4[t]));
          s1 = _mm512_dpbusd_epi32(s1, wv[t + 1], _mm512_set1_epi32(x4[t + 1]));
        }
        isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), s));
      }
    }
    const __m512 D = _mm512_load_ps(reinterpret_cast<const float*>(panel));
    for (int r = 0; r < M; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(D, _mm512_set1_ps(dx[r])), acc[r]);
    if constexpr (kMin) {  // - Dmin * sum_g mn_g * (x's sum over group g)
      const __m512 Dm = _mm512_load_ps(reinterpret_cast<const float*>(panel + kPSuperDmin));
      const __m512i* mn = reinterpret_cast<const __m512i*>(panel + kPSuperMins);
      constexpr int NP = G == 16 ? 8 : 4;  // min pairs
      __m512i mv[NP];
      for (int p = 0; p < NP; ++p) mv[p] = _mm512_load_si512(mn + p);
      for (int r = 0; r < M; ++r) {
        __m512i ms = _mm512_setzero_si512();
        for (int p = 0; p < NP; ++p) ms = _mm512_dpwssd_epi32(ms, mv[p], _mm512_set1_epi32(bp[NP * r + p]));
        acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(Dm, _mm512_set1_ps(dx[r])), acc[r]);
      }
    }
  }
  for (int r = 0; r < M; ++r) _mm512_storeu_ps(out + 16 * r, acc[r]);
}

// The kernels as PanelKernel::gemm: m (1..8) x rows, one instantiation per row count.
struct Blocks {
  template <int M>
  static void run(const uint8_t* panel, size_t nb, const uint8_t* xt, float* out) {
    gemm<M>(panel, nb, xt, out);
  }
};
template <int G, bool kMin>
struct Supers {
  template <int M>
  static void run(const uint8_t* panel, size_t nb, const uint8_t* xt, float* out) {
    gemm_k<G, kMin, M>(panel, nb, xt, out);
  }
};
template <class F>
void by_rows(const uint8_t* panel, size_t nb, const uint8_t* xt, int m, float* out) {
  switch (m) {
    case 1:
      return F::template run<1>(panel, nb, xt, out);
    case 2:
      return F::template run<2>(panel, nb, xt, out);
    case 3:
      return F::template run<3>(panel, nb, xt, out);
    case 4:
      return F::template run<4>(panel, nb, xt, out);
    case 5:
      return F::template run<5>(panel, nb, xt, out);
    case 6:
      return F::template run<6>(panel, nb, xt, out);
    case 7:
      return F::template run<7>(panel, nb, xt, out);
    default:
      return F::template run<8>(panel, nb, xt, out);
  }
}

}  // namespace

PanelKernel avx512_panel(uint32_t type) {
  switch (type) {  // GGMLType numbers
    case 2:
      return {pack<P::Q4_0>, by_rows<Blocks>, 8, false};
    case 6:
      return {pack<P::Q5_0>, by_rows<Blocks>, 16, false};
    case 8:
      return {pack<P::Q8_0>, by_rows<Blocks>, 128, false};
    case 20:
      return {pack<P::IQ4_NL>, by_rows<Blocks>, 128, false};
    case 39:
      return {pack<P::MXFP4>, by_rows<Blocks>, 128, false};
    case 12:
      return {pack_k<KQ::Q4_K>, by_rows<Supers<32, true>>, 0, true};
    case 13:
      return {pack_k<KQ::Q5_K>, by_rows<Supers<32, true>>, 0, true};
    case 10:
      return {pack_k<KQ::Q2_K>, by_rows<Supers<16, true>>, 0, true};
    case 11:
      return {pack_k<KQ::Q3_K>, by_rows<Supers<16, false>>, 4, true};
    case 14:
      return {pack_k<KQ::Q6_K>, by_rows<Supers<16, false>>, 32, true};
    case 23:
      return {pack_k<KQ::IQ4_XS>, by_rows<Supers<32, false>>, 128, true};
    default:
      return {nullptr, nullptr, 0, false};
  }
}

}  // namespace wick::cpu::qdot

#else  // not x86-64: no AVX-512 kernels

namespace wick::cpu::qdot {
PanelKernel avx512_panel(uint32_t) { return {nullptr, nullptr, 0, false}; }
}  // namespace wick::cpu::qdot

#endif

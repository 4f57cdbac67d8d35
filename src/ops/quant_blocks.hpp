#pragma once
// GGUF's quantized block formats (ggml's block_q4_0 ... block_mxfp4), read from the bytes exactly
// as a GGUF file stores them (little-endian, no padding), and the dequantization of one block to
// f32. Facts from llama.cpp's gguf-py (constants.py GGML_QUANT_SIZES, quants.py); the code is ours.
// Byte offsets instead of packed structs: the same code compiles for host and device and never
// depends on a compiler's struct layout or an aligned load.
//
// Results are bit-identical to gguf-py's NumPy dequantizers: each product and sum is rounded to
// f32 on its own, in the order gguf-py evaluates it (numeric.hpp's mul_rn/add_rn/sub_rn stop a
// compiler from fusing them into an FMA).
#include <cstddef>
#include <cstdint>

#include "ops/numeric.hpp"
#include "wick/quant.hpp"

namespace wick::quant {

// One row per ggml type: elements per block, bytes per block (GGML_QUANT_SIZES), and whether
// dequantize_block below decodes it.
struct GGMLTypeInfo {
  GGMLType type;
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
  bool dequant;
};

constexpr uint32_t QK_K = 256;  // super-block size of the k-quants and IQ4_XS

inline constexpr GGMLTypeInfo kGGMLTypes[] = {
    {GGMLType::F32, "F32", 1, 4, false},
    {GGMLType::F16, "F16", 1, 2, false},
    {GGMLType::Q4_0, "Q4_0", 32, 2 + 16, true},
    {GGMLType::Q4_1, "Q4_1", 32, 2 + 2 + 16, true},
    {GGMLType::Q5_0, "Q5_0", 32, 2 + 4 + 16, true},
    {GGMLType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    {GGMLType::Q8_0, "Q8_0", 32, 2 + 32, true},
    {GGMLType::Q8_1, "Q8_1", 32, 2 + 2 + 32, true},
    {GGMLType::Q2_K, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, true},
    {GGMLType::Q3_K, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true},
    {GGMLType::Q4_K, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12, true},
    {GGMLType::Q5_K, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, true},
    {GGMLType::Q6_K, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, true},
    {GGMLType::Q8_K, "Q8_K", QK_K, 4 + QK_K + QK_K / 8, true},
    {GGMLType::IQ2_XXS, "IQ2_XXS", QK_K, 2 + QK_K / 4, false},
    {GGMLType::IQ2_XS, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false},
    {GGMLType::IQ3_XXS, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false},
    {GGMLType::IQ1_S, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false},
    {GGMLType::IQ4_NL, "IQ4_NL", 32, 2 + 16, true},
    {GGMLType::IQ3_S, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false},
    {GGMLType::IQ2_S, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false},
    {GGMLType::IQ4_XS, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, true},
    {GGMLType::I8, "I8", 1, 1, false},
    {GGMLType::I16, "I16", 1, 2, false},
    {GGMLType::I32, "I32", 1, 4, false},
    {GGMLType::I64, "I64", 1, 8, false},
    {GGMLType::F64, "F64", 1, 8, false},
    {GGMLType::IQ1_M, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false},
    {GGMLType::BF16, "BF16", 1, 2, false},
    {GGMLType::TQ1_0, "TQ1_0", QK_K, 2 + 4 * 13, false},
    {GGMLType::TQ2_0, "TQ2_0", QK_K, 2 + 64, false},
    {GGMLType::MXFP4, "MXFP4", 32, 1 + 16, true},
    {GGMLType::NVFP4, "NVFP4", 64, 4 + 32, false},
    {GGMLType::Q1_0, "Q1_0", 128, 2 + 16, false},
    {GGMLType::Q2_0, "Q2_0", 64, 2 + 16, false},
};

// The row of a type id, or nullptr for an id ggml does not define (a corrupt or newer file).
constexpr const GGMLTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kGGMLTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}
constexpr const GGMLTypeInfo* ggml_type_info(GGMLType t) { return ggml_type_info(static_cast<uint32_t>(t)); }

namespace detail {

WICK_HD float ld_f16(const uint8_t* p) { return to_f32(f16::from_bits(static_cast<uint16_t>(p[0] | (p[1] << 8)))); }
WICK_HD uint32_t ld_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
WICK_HD float ld_f32(const uint8_t* p) { return wick::detail::bits_f32(ld_u32(p)); }

// Element j of a 32-element block whose 16 bytes hold elements j (low nibble) and j + 16 (high).
WICK_HD uint32_t nib32(const uint8_t* qs, uint32_t j) { return (qs[j & 15] >> ((j >> 4) * 4)) & 15u; }

// Q4_K/Q5_K: the 6-bit scale and min of sub-block g (0..7) from 12 bytes (llama.cpp
// get_scale_min_k4): bytes 0-3 the scales of 0-3, 4-7 their mins, 8-11 the low 4 bits of 4-7's
// scale (low nibble) and min (high nibble), whose top 2 bits sit in bytes 0-3 / 4-7's bits 6-7.
WICK_HD void scale_min_k4(const uint8_t* s, uint32_t g, uint32_t& sc, uint32_t& mn) {
  if (g < 4) {
    sc = s[g] & 63u;
    mn = s[g + 4] & 63u;
  } else {
    sc = (s[g + 4] & 15u) | ((s[g - 4] >> 2) & 0x30u);
    mn = (s[g + 4] >> 4) | ((s[g] >> 2) & 0x30u);
  }
}

// IQ4_NL / IQ4_XS's 16 non-linear levels.
WICK_HD float iq4nl_value(uint32_t q) {
  constexpr int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return float(kv[q]);
}

// MXFP4: the fp4 (e2m1) values doubled, and half the e8m0 scale (ggml_e8m0_to_fp32_half), so
// their product is the value. e < 2 gives the subnormals 2^-128 and 2^-127; e = 255 is 2^127
// (ggml does not decode it as NaN).
WICK_HD float mxfp4_value(uint32_t q) {
  constexpr int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return float(kv[q]);
}
WICK_HD float e8m0_half(uint32_t e) { return wick::detail::bits_f32(e < 2 ? (0x00200000u << e) : ((e - 1) << 23)); }

}  // namespace detail

// Dequantizes one block of `t` at `b` (block_bytes of the table) into block_elems floats at
// `out`. Returns false for a type it does not decode (the table's dequant column).
WICK_HD bool dequantize_block(GGMLType t, const uint8_t* b, float* out) {
  using namespace detail;
  switch (t) {
    case GGMLType::Q4_0: {  // f16 d, 16 bytes of nibbles: d * (q - 8)
      float d = ld_f16(b);
      for (uint32_t j = 0; j < 16; ++j) {
        out[j] = mul_rn(d, float(int(b[2 + j] & 15u) - 8));
        out[j + 16] = mul_rn(d, float(int(b[2 + j] >> 4) - 8));
      }
      return true;
    }
    case GGMLType::Q4_1: {  // f16 d, f16 m, nibbles: d * q + m
      float d = ld_f16(b), m = ld_f16(b + 2);
      for (uint32_t j = 0; j < 16; ++j) {
        out[j] = add_rn(mul_rn(d, float(b[4 + j] & 15u)), m);
        out[j + 16] = add_rn(mul_rn(d, float(b[4 + j] >> 4)), m);
      }
      return true;
    }
    case GGMLType::Q5_0: {  // f16 d, u32 of 5th bits, nibbles: d * (q - 16)
      float d = ld_f16(b);
      uint32_t qh = ld_u32(b + 2);
      for (uint32_t j = 0; j < 32; ++j) out[j] = mul_rn(d, float(int(nib32(b + 6, j) | (((qh >> j) & 1u) << 4)) - 16));
      return true;
    }
    case GGMLType::Q5_1: {  // f16 d, f16 m, u32 of 5th bits, nibbles: d * q + m
      float d = ld_f16(b), m = ld_f16(b + 2);
      uint32_t qh = ld_u32(b + 4);
      for (uint32_t j = 0; j < 32; ++j) out[j] = add_rn(mul_rn(d, float(nib32(b + 8, j) | (((qh >> j) & 1u) << 4))), m);
      return true;
    }
    case GGMLType::Q8_0: {  // f16 d, 32 int8: q * d
      float d = ld_f16(b);
      for (uint32_t j = 0; j < 32; ++j) out[j] = mul_rn(float(int8_t(b[2 + j])), d);
      return true;
    }
    case GGMLType::Q8_1: {  // f16 d, f16 s (= d * sum q, for dot products only), 32 int8: q * d
      float d = ld_f16(b);
      for (uint32_t j = 0; j < 32; ++j) out[j] = mul_rn(float(int8_t(b[4 + j])), d);
      return true;
    }
    case GGMLType::Q2_K: {  // 16 scale bytes (lo: scale, hi: min), 64 bytes of 2-bit q, f16 d, f16 dmin
      const uint8_t *sc = b, *qs = b + 16;
      float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
      for (uint32_t g = 0; g < 16; ++g) {
        float dl = mul_rn(d, float(sc[g] & 15u)), ml = mul_rn(dmin, float(sc[g] >> 4));
        for (uint32_t i = 0; i < 16; ++i) {
          uint32_t e = g * 16 + i, h = e >> 7, s = (e >> 5) & 3, l = e & 31;
          out[e] = sub_rn(mul_rn(dl, float((qs[h * 32 + l] >> (2 * s)) & 3u)), ml);
        }
      }
      return true;
    }
    case GGMLType::Q3_K: {  // 32 hmask bytes, 64 bytes of 2-bit q, 12 bytes of 6-bit scales, f16 d
      const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
      float d = ld_f16(b + 108);
      for (uint32_t g = 0; g < 16; ++g) {
        // scale g: low 4 bits from byte g % 8 (nibble g / 8), high 2 from byte 8 + g % 4 (pair g / 4)
        uint32_t s6 = ((sc[g & 7] >> (4 * (g >> 3))) & 15u) | (((sc[8 + (g & 3)] >> (2 * (g >> 2))) & 3u) << 4);
        float dl = mul_rn(d, float(int(s6) - 32));
        for (uint32_t i = 0; i < 16; ++i) {
          uint32_t e = g * 16 + i, h = e >> 7, s = (e >> 5) & 3, l = e & 31;
          int lo = (qs[h * 32 + l] >> (2 * s)) & 3;
          int hbit = (hm[l] >> (e >> 5)) & 1;  // a clear bit subtracts 4
          out[e] = mul_rn(dl, float(lo - (hbit ? 0 : 4)));
        }
      }
      return true;
    }
    case GGMLType::Q4_K:
    case GGMLType::Q5_K: {  // f16 d, f16 dmin, 12 scale bytes, [Q5_K: 32 bytes of 5th bits], nibbles
      bool five = t == GGMLType::Q5_K;
      float d = ld_f16(b), dmin = ld_f16(b + 2);
      const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
      for (uint32_t g = 0; g < 8; ++g) {
        uint32_t s, m;
        scale_min_k4(sc, g, s, m);
        float dl = mul_rn(d, float(s)), ml = mul_rn(dmin, float(m));
        for (uint32_t l = 0; l < 32; ++l) {
          uint32_t q = (qs[(g >> 1) * 32 + l] >> (4 * (g & 1))) & 15u;
          if (five) q |= ((qh[l] >> g) & 1u) << 4;
          out[g * 32 + l] = sub_rn(mul_rn(dl, float(q)), ml);
        }
      }
      return true;
    }
    case GGMLType::Q6_K: {  // 128 bytes low nibbles, 64 bytes of 2-bit highs, 16 int8 scales, f16 d
      const uint8_t *ql = b, *qh = b + 128, *sc = b + 192;
      float d = ld_f16(b + 208);
      float dl[16];
      for (uint32_t g = 0; g < 16; ++g) dl[g] = mul_rn(d, float(int8_t(sc[g])));
      // Each half of 128: ql byte l and l + 32 give elements l, l + 32 (low nibbles) and l + 64,
      // l + 96 (high); qh byte l gives their 5th-6th bits in pairs 0-1, 2-3, 4-5, 6-7.
      for (uint32_t h = 0; h < 2; ++h) {
        const uint8_t *l8 = ql + h * 64, *h8 = qh + h * 32;
        float* o = out + h * 128;
        const float* s = dl + h * 8;
        for (uint32_t l = 0; l < 32; ++l) {
          uint32_t is = l >> 4;
          o[l] = mul_rn(s[is], float(int((l8[l] & 15u) | ((h8[l] & 3u) << 4)) - 32));
          o[l + 32] = mul_rn(s[is + 2], float(int((l8[l + 32] & 15u) | (((h8[l] >> 2) & 3u) << 4)) - 32));
          o[l + 64] = mul_rn(s[is + 4], float(int((l8[l] >> 4) | (((h8[l] >> 4) & 3u) << 4)) - 32));
          o[l + 96] = mul_rn(s[is + 6], float(int((l8[l + 32] >> 4) | ((h8[l] >> 6) << 4)) - 32));
        }
      }
      return true;
    }
    case GGMLType::Q8_K: {  // f32 d, 256 int8, 16 int16 block sums (for dot products only)
      float d = ld_f32(b);
      for (uint32_t j = 0; j < QK_K; ++j) out[j] = mul_rn(d, float(int8_t(b[4 + j])));
      return true;
    }
    case GGMLType::IQ4_NL: {  // f16 d, nibbles indexing the 16 levels
      float d = ld_f16(b);
      for (uint32_t j = 0; j < 16; ++j) {
        out[j] = mul_rn(d, iq4nl_value(b[2 + j] & 15u));
        out[j + 16] = mul_rn(d, iq4nl_value(b[2 + j] >> 4));
      }
      return true;
    }
    case GGMLType::IQ4_XS: {  // f16 d, u16 scale high bits, 4 bytes scale low nibbles, 128 bytes nibbles
      float d = ld_f16(b);
      uint32_t sh = uint32_t(b[2]) | (uint32_t(b[3]) << 8);
      const uint8_t *sl = b + 4, *qs = b + 8;
      for (uint32_t g = 0; g < 8; ++g) {
        uint32_t s6 = ((sl[g >> 1] >> (4 * (g & 1))) & 15u) | (((sh >> (2 * g)) & 3u) << 4);
        float dl = mul_rn(d, float(int(s6) - 32));
        for (uint32_t j = 0; j < 16; ++j) {
          out[g * 32 + j] = mul_rn(dl, iq4nl_value(qs[g * 16 + j] & 15u));
          out[g * 32 + j + 16] = mul_rn(dl, iq4nl_value(qs[g * 16 + j] >> 4));
        }
      }
      return true;
    }
    case GGMLType::MXFP4: {  // e8m0 scale byte, nibbles of e2m1
      float d = e8m0_half(b[0]);
      for (uint32_t j = 0; j < 16; ++j) {
        out[j] = mul_rn(d, mxfp4_value(b[1 + j] & 15u));
        out[j + 16] = mul_rn(d, mxfp4_value(b[1 + j] >> 4));
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace wick::quant

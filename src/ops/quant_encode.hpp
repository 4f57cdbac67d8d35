#pragma once
// Block encoders (f32 -> GGUF block bytes) for host and device: the legacy weight types Q4_0,
// Q4_1, Q5_0, Q5_1 and the activation types Q8_0, Q8_1, Q8_K (the quantized matmuls encode their
// right-hand side with these on both backends). The k-quant, IQ4 and MXFP4 searches are host-only
// (backend/cpu/quantize.cpp).
//
// Each encoder gives the bytes llama.cpp's reference quantizer (ggml-quants.c
// quantize_row_*_ref, compiled without FMA contraction) writes; the legacy types and Q8_0 are also
// gguf-py's quantize_blocks byte for byte on finite input. Facts from those sources; the code is
// ours. Every product and sum that feeds a rounding decision goes through mul_rn/add_rn/sub_rn
// so nvcc cannot fuse it.
//
// NaN/Inf follow llama.cpp on x86: the maxima use its comparisons verbatim (`a > b ? a : b`,
// `amax < |v|`), so a NaN is skipped except by Q8_0/Q8_1's MAX when it is the block's last
// element; an element that scales to NaN or out of int range stores the low byte of x86's
// INT32_MIN (trunc_i32 below), the same on every device; f16 scales that are NaN are stored as
// ggml stores them (st_f16). NaN payloads are followed on the host only (nearest_int).
#include <math.h>

#include <cstdint>

#include "ops/numeric.hpp"
#include "ops/quant_blocks.hpp"

namespace wick::quant {

namespace detail {

WICK_HD void st_u16(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
// ggml's GGML_FP32_TO_FP16 (the portable one ggml-base uses): round to nearest even, a NaN
// becomes sign | 0x7E00 (its payload dropped, where from_f32 keeps it).
WICK_HD void st_f16(uint8_t* p, float f) {
  const uint32_t b = wick::detail::f32_bits(f);
  st_u16(p, (b & 0x7fffffffu) > 0x7f800000u ? ((b >> 16) & 0x8000u) | 0x7e00u : from_f32<f16>(f).bits);
}
WICK_HD void st_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
WICK_HD void st_f32(uint8_t* p, float f) { st_u32(p, wick::detail::f32_bits(f)); }

// ggml's MAX(a, b): ((a) > (b) ? (a) : (b)), NaN behaviour included.
WICK_HD float ggml_max(float a, float b) { return a > b ? a : b; }

// llama.cpp's nearest_int: adding 1.5 * 2^23 leaves round-half-to-even(x) in the low mantissa
// bits (exact for |x| < 2^22, which every caller guarantees). A NaN gives its payload's low 22
// bits on the host, as in ggml (the add keeps the payload and sets the quiet bit): 0 for the
// default NaN. A GPU's arithmetic returns one canonical NaN instead, so the device gives 0, the
// host's answer for the NaNs that arithmetic makes.
WICK_HD int nearest_int(float x) {
#if WICK_DEVICE_COMPILE
  if (!(x == x)) return 0;
#endif
  uint32_t i = wick::detail::f32_bits(add_rn(x, 12582912.f));
  return int(i & 0x007fffffu) - 0x00400000;
}

// C's float -> int conversion as x86's cvttss2si performs it (what ggml's `(int8_t)f`,
// `(uint8_t)f` and `roundf` stores compile to): truncation, and INT32_MIN for NaN or a value
// out of int32's range (whose low byte, 0, is what then lands in an int8).
WICK_HD int trunc_i32(float x) { return (x >= -2147483648.0f && x < 2147483648.0f) ? int(x) : -2147483647 - 1; }

// C's roundf (half away from zero) then ggml's conversion to an integer.
WICK_HD int round_to_int(float x) { return trunc_i32(::roundf(x)); }

// ggml's q = MIN(qmax, (int8_t)(v)) of the legacy quantizers, as the byte it stores.
WICK_HD uint8_t legacy_q(float v, int qmax) {
  int q = int8_t(trunc_i32(v));
  return uint8_t(q < qmax ? q : qmax);
}

}  // namespace detail

// ---- the legacy weight types (quantize_row_q4_0_ref ... q5_1_ref; gguf-py's quantizers give the
// same bytes for finite input).

// Q4_0: d = max / -8 with max the signed value of largest magnitude (the first on ties),
// q = MIN(15, trunc(x / d + 8.5)); low nibbles hold elements 0-15, high nibbles 16-31.
WICK_HD void quantize_block_q4_0(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < ::fabsf(x[j])) {
      amax = ::fabsf(x[j]);
      max = x[j];
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;  // a NaN d is "true" in ggml's `d ? 1/d : 0` too
  detail::st_f16(out, d);
  for (int j = 0; j < 16; ++j) {
    uint8_t q0 = detail::legacy_q(add_rn(mul_rn(x[j], id), 8.5f), 15);
    uint8_t q1 = detail::legacy_q(add_rn(mul_rn(x[j + 16], id), 8.5f), 15);
    out[2 + j] = uint8_t(q0 | (q1 << 4));
  }
}

// Q4_1: d = (max - min) / 15, m = min, q = MIN(15, trunc((x - min) / d + 0.5)).
WICK_HD void quantize_block_q4_1(const float* x, uint8_t* out) {
  float min = 3.402823466e38f, max = -3.402823466e38f;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = sub_rn(max, min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  detail::st_f16(out, d);
  detail::st_f16(out + 2, min);
  for (int j = 0; j < 16; ++j) {
    uint8_t q0 = detail::legacy_q(add_rn(mul_rn(sub_rn(x[j], min), id), 0.5f), 15);
    uint8_t q1 = detail::legacy_q(add_rn(mul_rn(sub_rn(x[j + 16], min), id), 0.5f), 15);
    out[4 + j] = uint8_t(q0 | (q1 << 4));
  }
}

// Q5_0: d = max / -16, q = MIN(31, trunc(x / d + 16.5)); the 5th bits go to a u32 (bit j for
// element j), the low nibbles as Q4_0's.
WICK_HD void quantize_block_q5_0(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < ::fabsf(x[j])) {
      amax = ::fabsf(x[j]);
      max = x[j];
    }
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  detail::st_f16(out, d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    uint8_t q0 = detail::legacy_q(add_rn(mul_rn(x[j], id), 16.5f), 31);
    uint8_t q1 = detail::legacy_q(add_rn(mul_rn(x[j + 16], id), 16.5f), 31);
    out[6 + j] = uint8_t((q0 & 15u) | ((q1 & 15u) << 4));
    qh |= uint32_t((q0 & 0x10u) >> 4) << j;
    qh |= uint32_t((q1 & 0x10u) >> 4) << (j + 16);
  }
  detail::st_u32(out + 2, qh);
}

// Q5_1: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5) (ggml does not clip it).
WICK_HD void quantize_block_q5_1(const float* x, uint8_t* out) {
  float min = 3.402823466e38f, max = -3.402823466e38f;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = sub_rn(max, min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  detail::st_f16(out, d);
  detail::st_f16(out + 2, min);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    uint8_t q0 = uint8_t(detail::trunc_i32(add_rn(mul_rn(sub_rn(x[j], min), id), 0.5f)));
    uint8_t q1 = uint8_t(detail::trunc_i32(add_rn(mul_rn(sub_rn(x[j + 16], min), id), 0.5f)));
    out[8 + j] = uint8_t((q0 & 15u) | ((q1 & 15u) << 4));
    qh |= uint32_t((q0 & 0x10u) >> 4) << j;
    qh |= uint32_t((q1 & 0x10u) >> 4) << (j + 16);
  }
  detail::st_u32(out + 4, qh);
}

// ---- the activation types

// Q8_0: 32 floats -> f16 d = amax / 127, 32 int8 q = roundf(x / d) (34 bytes).
WICK_HD void quantize_block_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = detail::ggml_max(amax, ::fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  detail::st_f16(out, d);
  for (int j = 0; j < 32; ++j) out[2 + j] = uint8_t(int8_t(detail::round_to_int(mul_rn(x[j], id))));
}

// Q8_1: as Q8_0, plus f16 s = sum(q) * d (f32 product of the integer sum and the f32 d, as
// ggml computes it), laid out d, s, q (36 bytes).
WICK_HD void quantize_block_q8_1(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = detail::ggml_max(amax, ::fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    int q = detail::round_to_int(mul_rn(x[j], id));
    out[4 + j] = uint8_t(int8_t(q));
    sum += int8_t(q);
  }
  detail::st_f16(out, d);
  detail::st_f16(out + 2, mul_rn(float(sum), d));
}

// Q8_K: 256 floats -> f32 d, 256 int8, 16 int16 sums of 16 q each (292 bytes). The scale comes
// from the signed value of largest magnitude (the first one on ties): q = nearest(-127 / max *
// x), clipped at 127, d = 1 / (-127 / max). An all-zero block is all zero bytes.
WICK_HD void quantize_block_q8_K(const float* x, uint8_t* out) {
  float max = 0.0f, amax = 0.0f;
  for (int j = 0; j < 256; ++j) {
    float ax = ::fabsf(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    for (int j = 0; j < 292; ++j) out[j] = 0;
    return;
  }
  const float iscale = -127.0f / max;
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) {
      int v = detail::nearest_int(mul_rn(iscale, x[g * 16 + i]));
      v = v < 127 ? v : 127;
      out[4 + g * 16 + i] = uint8_t(int8_t(v));
      sum += int8_t(v);
    }
    detail::st_u16(out + 4 + 256 + 2 * g, uint32_t(uint16_t(int16_t(sum))));
  }
  detail::st_f32(out, 1.0f / iscale);
}

}  // namespace wick::quant

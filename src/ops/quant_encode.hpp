#pragma once
// Block encoders (f32 -> GGUF block bytes) for host and device. The activation types Q8_0, Q8_1
// and Q8_K live here because the quantized matmuls encode their right-hand side with them on
// both backends; the weight types' searches are host-only (backend/cpu/quantize.cpp).
//
// Each encoder gives the bytes llama.cpp's reference quantizer (ggml-quants.c
// quantize_row_*_ref, compiled without FMA contraction) writes; Q8_0 is also gguf-py's
// Q8_0.quantize_blocks byte for byte. Facts from those sources; the code is ours. Every product
// and sum that feeds a rounding decision goes through mul_rn/add_rn so nvcc cannot fuse it.
//
// NaN/Inf: the maxima use llama.cpp's comparisons verbatim (`a > b ? a : b`), so a NaN is
// skipped by the amax of Q8_K and only survives Q8_0/Q8_1's MAX when it is the block's last
// element; an element that scales to NaN stores q = 0 (what x86's conversion of the default
// NaN gives in llama.cpp), the same on every device.
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
WICK_HD void st_f16(uint8_t* p, float f) { st_u16(p, from_f32<f16>(f).bits); }
WICK_HD void st_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
WICK_HD void st_f32(uint8_t* p, float f) { st_u32(p, wick::detail::f32_bits(f)); }

// ggml's MAX(a, b): ((a) > (b) ? (a) : (b)), NaN behaviour included.
WICK_HD float ggml_max(float a, float b) { return a > b ? a : b; }

// llama.cpp's nearest_int: adding 1.5 * 2^23 leaves round-half-to-even(x) in the low mantissa
// bits (exact for |x| < 2^22, which every caller guarantees). NaN gives 0, see above.
WICK_HD int nearest_int(float x) {
  if (!(x == x)) return 0;
  uint32_t i = wick::detail::f32_bits(add_rn(x, 12582912.f));
  return int(i & 0x007fffffu) - 0x00400000;
}

// C's roundf (half away from zero) as an int: the quantized values stay within int8's range,
// so only NaN needs a rule.
WICK_HD int round_to_int(float x) { return x == x ? int(::roundf(x)) : 0; }

}  // namespace detail

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

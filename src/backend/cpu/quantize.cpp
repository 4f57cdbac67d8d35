// CPU quantizers: f32/f16/bf16/f64 rows -> GGUF blocks, for every type wick decodes.
//
// The bytes are what llama.cpp writes for the same f32 values without an importance matrix
// (llama-quantize -> ggml_quantize_chunk; for the activation types Q8_1/Q8_K, ggml's
// quantize_row_*_ref): checked byte for byte by tests/test_quantize.cpp against
// tests/fixtures/quant_llama.json. The legacy and activation types are the host+device encoders
// of ops/quant_encode.hpp; the searches of the k-quants (make_qx_quants, make_q3_quants,
// make_qkx2_quants), IQ4_NL/IQ4_XS (quantize_row_iq4_nl_impl with ntry = 7, what
// ggml_quantize_chunk uses) and MXFP4 live here. Facts from ggml-quants.c; the code is ours.
//
// Bit-exactness rests on evaluating every float expression as ggml's C does: f32 operations in
// the same order and association, no FMA contraction (x86-64's baseline ISA has no FMA, which is
// how both libggml-base and wick build by default), and ggml's integer conversions
// (quant::detail::trunc_i32, nearest_int).
#include <math.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "ops/numeric.hpp"
#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"
#include "wick/error.hpp"

namespace wick::cpu {

namespace {

using quant::QK_K;
using quant::detail::nearest_int;
using quant::detail::st_f16;

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: a group below it is all zero

int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// make_qx_quants with rmse_type 1 and no weights (the only form the reference quantizers use:
// Q6_K): symmetric levels in [-nmax, nmax - 1] stored as l + nmax, the scale refined over 18
// nearby inverse scales by the weighted (w = x^2) least squares fit.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    float ax = fabsf(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -float(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = int8_t(l + nmax);
    float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = int8_t(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// make_q3_quants with do_rmse (Q3_K): levels in [-nmax, nmax - 1], then up to 5 passes that move
// one element at a time to the level that improves the weighted (w = x^2) fit.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    float ax = fabsf(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -float(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = int8_t(l);
    float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * float(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * float(L[i]) * float(L[i]);
        int new_l = clampi(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * float(new_l);
          sl2 += w * float(new_l) * float(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = int8_t(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qkx2_quants (Q2_K, Q4_K, Q5_K): asymmetric levels [0, nmax] with x ~ scale * l - the_min,
// the (scale, min) pair refined over nstep + 1 inverse scales by weighted least squares; the
// error is absolute (use_mad) or squared.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(clampi(l, 0, nmax));
    float diff = scale * float(L[i]) + min - x[i];
    diff = use_mad ? fabsf(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = uint8_t(l);
      float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * float(Laux[i]) + this_min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Packs 256 2-bit levels as the k-quants store them: byte l of each 32-byte quarter-run holds
// elements l, l + 32, l + 64, l + 96 of its 128 in bit pairs 0-1 ... 6-7.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (uint32_t j = 0; j < QK_K; j += 128)
    for (uint32_t l = 0; l < 32; ++l)
      qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q2_K: 16 groups of 16, each fitted by make_qkx2_quants (weights |x|, absolute error); the
// group scales and mins become 4-bit multiples of d = max_scale / 15 and dmin = max_min / 15,
// and every element is re-leveled against the rounded scales.
void quantize_q2_K(const float* x, uint8_t* out) {
  uint8_t L[QK_K], Laux[16];
  float weights[16], mins[16], scales[16];
  uint8_t* sc = out;
  uint8_t* qs = out + 16;
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
    scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    float iscale = 15.f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = uint8_t(nearest_int(iscale * scales[j]));
    st_f16(out + 80, max_scale / 15.f);
  } else {
    for (int j = 0; j < 16; ++j) sc[j] = 0;
    st_f16(out + 80, 0.f);
  }
  if (max_min > 0) {
    float iscale = 15.f / max_min;
    for (int j = 0; j < 16; ++j) sc[j] = uint8_t(sc[j] | (nearest_int(iscale * mins[j]) << 4));
    st_f16(out + 82, max_min / 15.f);
  } else {
    st_f16(out + 82, 0.f);
  }
  const float d_all = quant::detail::ld_f16(out + 80), dmin_all = quant::detail::ld_f16(out + 82);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * float(sc[j] & 0xF);
    if (d == 0) continue;
    const float dm = dmin_all * float(sc[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = uint8_t(clampi(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
  }
  pack_2bit(L, qs);
}

// Q3_K: 16 groups of 16 fitted by make_q3_quants (levels -4..3); the group scales become 6-bit
// signed multiples of d = max_scale / -32 (max_scale: the signed scale of largest magnitude).
void quantize_q3_K(const float* x, uint8_t* out) {
  int8_t L[QK_K];
  float scales[16];
  uint8_t *hmask = out, *qs = out + 32, *sc = out + 96;
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    float scale = fabsf(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(sc, 0, 12);
  if (max_scale != 0) {
    float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int8_t l = int8_t(nearest_int(iscale * scales[j]));  // ggml stores it in an int8_t first
      l = int8_t(clampi(l, -32, 31) + 32);
      if (j < 8)
        sc[j] = uint8_t(l & 0xF);
      else
        sc[j - 8] = uint8_t(sc[j - 8] | ((l & 0xF) << 4));
      l = int8_t(l >> 4);
      sc[j % 4 + 8] = uint8_t(sc[j % 4 + 8] | (l << (2 * (j / 4))));
    }
    st_f16(out + 108, 1 / iscale);
  } else {
    st_f16(out + 108, 0.f);
  }
  const float d_all = quant::detail::ld_f16(out + 108);
  for (int j = 0; j < 16; ++j) {
    int s = j < 8 ? (sc[j] & 0xF) : (sc[j - 8] >> 4);
    s = (s | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    float d = d_all * float(s);
    if (d == 0) continue;
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = int8_t(clampi(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
  }
  // The high bit of element j goes to bit j / 32 of hmask byte j % 32; the low two bits as Q2_K.
  std::memset(hmask, 0, 32);
  uint8_t low[QK_K];
  for (uint32_t j = 0; j < QK_K; ++j) {
    int l = L[j];
    if (l > 3) {
      hmask[j % 32] = uint8_t(hmask[j % 32] | (1u << (j / 32)));
      l -= 4;
    }
    low[j] = uint8_t(l);
  }
  pack_2bit(low, qs);
}

// Q4_K / Q5_K: 8 groups of 32 fitted by make_qkx2_quants (weights sqrt(mean x^2) + |x|, squared
// error); the group scales and mins become 6-bit multiples of d = max_scale / 63 and
// dmin = max_min / 63, packed as quant_blocks.hpp's scale_min_k4 reads them.
void quantize_q45_K(const float* x, uint8_t* out, bool five) {
  const int nmax = five ? 31 : 15;
  uint8_t L[QK_K], Laux[32];
  float weights[32], mins[8], scales[8];
  uint8_t* sc = out + 4;
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, five ? -0.5f : -1.f, 0.1f,
                                 five ? 15 : 20, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
    uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] = uint8_t(sc[j - 4] | ((ls >> 4) << 6));
      sc[j] = uint8_t(sc[j] | ((lm >> 4) << 6));
    }
  }
  st_f16(out, max_scale / 63.f);
  st_f16(out + 2, max_min / 63.f);
  const float d_all = quant::detail::ld_f16(out), dmin_all = quant::detail::ld_f16(out + 2);
  for (uint32_t j = 0; j < 8; ++j) {
    uint32_t s, m;
    quant::detail::scale_min_k4(sc, j, s, m);
    const float d = d_all * float(s);
    if (d == 0) continue;
    const float dm = dmin_all * float(m);
    for (int ii = 0; ii < 32; ++ii) L[32 * j + ii] = uint8_t(clampi(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
  if (!five) {
    uint8_t* q = out + 16;
    for (uint32_t j = 0; j < QK_K; j += 64, q += 32)
      for (uint32_t l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    return;
  }
  // Q5_K: the 5th bit of element n + j (n a multiple of 64) goes to qh byte j, bit 2 * (n / 64),
  // that of element n + j + 32 to the bit above it.
  uint8_t *qh = out + 16, *ql = out + 48;
  std::memset(qh, 0, 32);
  uint8_t m1 = 1, m2 = 2;
  for (uint32_t n = 0; n < QK_K; n += 64, ql += 32) {
    for (uint32_t j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = uint8_t(l1 | (l2 << 4));
    }
    m1 = uint8_t(m1 << 2);
    m2 = uint8_t(m2 << 2);
  }
}

// Q6_K: 16 groups of 16 fitted by make_qx_quants (levels -32..31); the group scales become int8
// multiples of d = max_scale / -128. A block whose scales are all below GROUP_MAX_EPS is zero.
void quantize_q6_K(const float* x, uint8_t* out) {
  int8_t L[QK_K];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
    scales[ib] = scale;
    const float abs_scale = fabsf(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(out, 0, 210);
    return;
  }
  uint8_t *ql = out, *qh = out + 128;
  auto* sc = reinterpret_cast<int8_t*>(out + 192);
  float iscale = -128.f / max_scale;
  st_f16(out + 208, 1 / iscale);
  for (int ib = 0; ib < 16; ++ib) sc[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
  const float d_all = quant::detail::ld_f16(out + 208);
  for (int j = 0; j < 16; ++j) {
    float d = d_all * float(sc[j]);
    if (d == 0) continue;
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = int8_t(clampi(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
  }
  for (uint32_t j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
    for (uint32_t l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = uint8_t(q1 | (q3 << 4));
      ql[l + 32] = uint8_t(q2 | (q4 << 4));
      qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                      ((L[j + l + 96] >> 4) << 6));
    }
  }
}

// ---- IQ4_NL / IQ4_XS: the 16 non-linear levels of quant_blocks.hpp (iq4nl_value).
constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ggml's best_index_int8: the nearest of the sorted levels (the lower one unless the upper is
// strictly nearer); below the first / above the last clamp. ggml bisects; counting the inner
// levels not above x finds the same bracket (its lower end is the last level with !(x < v), NaN
// included: bracket 14-15) without the unpredictable branches, the search's main cost.
int best_index_iq4(float x) {
  if (x <= float(kIq4nl[0])) return 0;
  if (x >= float(kIq4nl[15])) return 15;
  int ml = 0;
  for (int k = 1; k < 15; ++k) ml += !(x < float(kIq4nl[k]));
  const int mu = ml + 1;
  return x - float(kIq4nl[ml]) < float(kIq4nl[mu]) - x ? ml : mu;
}

// quantize_row_iq4_nl_impl without quant weights (weights x^2), ntry = 7: per 32-element block a
// scale from the largest value, refined over 15 trial scales by weighted least squares. IQ4_NL
// (n = 32) stores that scale as f16; IQ4_XS (n = 256) stores 6-bit multiples of
// d = max_scale / -32 and re-levels every block against them.
void quantize_iq4(const float* x, int n, uint8_t* out) {
  constexpr int ntry = 7;
  const bool xs = n == int(QK_K);
  uint8_t* q4 = out + (xs ? 8 : 2);
  uint8_t L[QK_K];
  float scales[8], weight[32];
  std::memset(q4, 0, size_t(n / 2));
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < n / 32; ++ib) {
    const float* xb = x + ib * 32;
    uint8_t* Lb = L + ib * 32;
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      float ax = fabsf(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = -max / float(kIq4nl[0]);
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      int l = best_index_iq4(id * xb[j]);
      Lb[j] = uint8_t(l);
      float q = float(kIq4nl[l]), w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = float(itry + kIq4nl[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        float q = float(kIq4nl[best_index_iq4(id * xb[j])]), w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    float abs_d = fabsf(d);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = d;
    }
  }
  if (xs) {
    uint8_t* scales_l = out + 4;
    uint32_t scales_h = 0;
    float d = -max_scale / 32;
    st_f16(out, d);
    float id = d != 0 ? 1 / d : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
      int l = clampi(nearest_int(id * scales[ib]), -32, 31);
      float dl = d * float(l);
      float idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[ib * 32 + j] = uint8_t(best_index_iq4(idl * x[ib * 32 + j]));
      l += 32;
      const uint8_t l_l = uint8_t(l & 0xf), l_h = uint8_t(l >> 4);
      if (ib % 2 == 0)
        scales_l[ib / 2] = l_l;
      else
        scales_l[ib / 2] = uint8_t(scales_l[ib / 2] | (l_l << 4));
      scales_h |= uint32_t(l_h) << (2 * (ib % 8));
    }
    quant::detail::st_u16(out + 2, scales_h);
  } else {
    st_f16(out, scales[0]);
    float id = scales[0] != 0 ? 1 / scales[0] : 0;
    for (int j = 0; j < 32; ++j) L[j] = uint8_t(best_index_iq4(id * x[j]));
  }
  for (int i = 0; i < n / 32; ++i)
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = uint8_t(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

// MXFP4: the shared e8m0 exponent e = floor(log2(amax)) - 2 + 127 (ggml's cast of that float to
// uint8_t, x86 semantics), then each element to the fp4 (e2m1) level nearest x / 2^(e-127)
// (the first on ties).
void quantize_mxfp4(const float* x, uint8_t* out) {
  constexpr int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  float amax = 0;
  for (int j = 0; j < 32; ++j)
    if (amax < fabsf(x[j])) amax = fabsf(x[j]);
  // log2f from the C library, as ggml calls it: only amax a few ulp below a power of two could
  // round differently in another libm.
  const uint8_t e = amax > 0 ? uint8_t(quant::detail::trunc_i32(floorf(log2f(amax)) - 2 + 127)) : 0;
  const float d = quant::detail::e8m0_half(e);
  out[0] = e;
  auto best = [&](float v) {
    int bi = 0;
    float be = fabsf(float(kv[0]) * d - v);
    for (int i = 1; i < 16; ++i) {
      float err = fabsf(float(kv[i]) * d - v);
      if (err < be) {
        bi = i;
        be = err;
      }
    }
    return bi;
  };
  for (int j = 0; j < 16; ++j) out[1 + j] = uint8_t(best(x[j]) | (best(x[j + 16]) << 4));
}

// One block of `t` from its block_elems floats.
void quantize_block(GGMLType t, const float* x, uint8_t* out) {
  switch (t) {
    case GGMLType::Q4_0:
      return quant::quantize_block_q4_0(x, out);
    case GGMLType::Q4_1:
      return quant::quantize_block_q4_1(x, out);
    case GGMLType::Q5_0:
      return quant::quantize_block_q5_0(x, out);
    case GGMLType::Q5_1:
      return quant::quantize_block_q5_1(x, out);
    case GGMLType::Q8_0:
      return quant::quantize_block_q8_0(x, out);
    case GGMLType::Q8_1:
      return quant::quantize_block_q8_1(x, out);
    case GGMLType::Q8_K:
      return quant::quantize_block_q8_K(x, out);
    case GGMLType::Q2_K:
      return quantize_q2_K(x, out);
    case GGMLType::Q3_K:
      return quantize_q3_K(x, out);
    case GGMLType::Q4_K:
      return quantize_q45_K(x, out, false);
    case GGMLType::Q5_K:
      return quantize_q45_K(x, out, true);
    case GGMLType::Q6_K:
      return quantize_q6_K(x, out);
    case GGMLType::IQ4_NL:
      return quantize_iq4(x, 32, out);
    case GGMLType::IQ4_XS:
      return quantize_iq4(x, int(QK_K), out);
    case GGMLType::MXFP4:
      return quantize_mxfp4(x, out);
    default:
      throw Error(ErrorKind::Unsupported, std::string("quantize: the CPU has no quantizer for ") + ggml_type_name(t) +
                                              "; pick one of " + ggml_supported_types());
  }
}

template <class T>
float load_f32(const T* p, size_t i) {
  if constexpr (std::is_same_v<T, double>)
    return float(p[i]);  // round to nearest even, once
  else if constexpr (std::is_same_v<T, float>)
    return p[i];
  else
    return to_f32(p[i]);  // f16 / bf16: exact
}

}  // namespace

StoragePtr CpuStorage::quantize(const Layout& l, const QuantDims& q) const {
  const quant::GGMLTypeInfo* info = quant::ggml_type_info(q.type);
  if (!info || !info->dequant)
    throw Error(ErrorKind::Unsupported, std::string("quantize: the CPU has no quantizer for ") +
                                            ggml_type_name(q.type) + "; pick one of " + ggml_supported_types());
  const size_t be = info->block_elems, bb = info->block_bytes;
  const size_t blocks_per_row = q.cols / be, row_bytes = blocks_per_row * bb;
  auto out = new_storage(q.rows * row_bytes, DType::U8);
  if (q.rows == 0 || q.cols == 0) return out;
  struct Ctx {
    const CpuStorage* self;
    size_t offset, cols, be, bb, blocks_per_row, row_bytes;
    GGMLType type;
    uint8_t* out;
  } ctx{this, l.offset, q.cols, be, bb, blocks_per_row, row_bytes, q.type, out->ptr<uint8_t>()};
  // One row per chunk: rows are independent (no quantizer here has row-level state without an
  // importance matrix), and even a 256-element row is a few microseconds of search.
  parallel_chunks(
      q.rows,
      [](void* p, size_t r) {
        const Ctx& c = *static_cast<const Ctx*>(p);
        std::vector<float> row(c.cols);
        const size_t start = c.offset + r * c.cols;
        switch (c.self->dtype()) {
          case DType::F32:
            std::memcpy(row.data(), c.self->ptr<float>() + start, c.cols * 4);
            break;
          case DType::F16:
            for (size_t i = 0; i < c.cols; ++i) row[i] = load_f32(c.self->ptr<f16>() + start, i);
            break;
          case DType::BF16:
            for (size_t i = 0; i < c.cols; ++i) row[i] = load_f32(c.self->ptr<bf16>() + start, i);
            break;
          case DType::F64:
            for (size_t i = 0; i < c.cols; ++i) row[i] = load_f32(c.self->ptr<double>() + start, i);
            break;
          default:
            throw Error(ErrorKind::DType, std::string("quantize: needs f32, f16, bf16 or f64 values, got ") +
                                              dtype_name(c.self->dtype()) + "; cast with to_dtype(F32)");
        }
        uint8_t* dst = c.out + r * c.row_bytes;
        for (size_t b = 0; b < c.blocks_per_row; ++b) quantize_block(c.type, row.data() + b * c.be, dst + b * c.bb);
      },
      &ctx);
  return out;
}

}  // namespace wick::cpu

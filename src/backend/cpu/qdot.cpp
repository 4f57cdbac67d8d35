// The portable scalar kernels of every supported weight type, and the run-time choice of the
// kernel level (qdot.hpp). Each weight block is decoded once to small integers and integer group
// scales, then dotted with the m activation rows in int32; floats only scale the block sums.
#include "backend/cpu/qdot.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/options.hpp"
#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"
#include "wick/error.hpp"

namespace wick::cpu::qdot {
namespace {

using quant::detail::ld_f16;
using quant::detail::ld_f32;

// ---- 32-element blocks (Q8_0 activations): w_j = a * q_j + b.
struct Dec32 {
  int32_t q[32];
  float a, b;
};

constexpr int8_t kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int8_t kMXFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

template <GGMLType T>
void dec32(const uint8_t* b, Dec32& o) {
  o.b = 0;
  if constexpr (T == GGMLType::Q4_0 || T == GGMLType::Q4_1) {
    const bool one = T == GGMLType::Q4_1;
    const uint8_t* qs = b + (one ? 4 : 2);
    const int off = one ? 0 : 8;
    for (int j = 0; j < 16; ++j) {
      o.q[j] = (qs[j] & 15) - off;
      o.q[j + 16] = (qs[j] >> 4) - off;
    }
    o.a = ld_f16(b);
    if (one) o.b = ld_f16(b + 2);
  } else if constexpr (T == GGMLType::Q5_0 || T == GGMLType::Q5_1) {
    const bool one = T == GGMLType::Q5_1;
    const uint8_t* qs = b + (one ? 8 : 6);
    uint32_t qh;
    std::memcpy(&qh, b + (one ? 4 : 2), 4);  // little-endian, as the file
    const int off = one ? 0 : 16;
    for (int j = 0; j < 16; ++j) {
      o.q[j] = int((qs[j] & 15) | (((qh >> j) & 1) << 4)) - off;
      o.q[j + 16] = int((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off;
    }
    o.a = ld_f16(b);
    if (one) o.b = ld_f16(b + 2);
  } else if constexpr (T == GGMLType::Q8_0 || T == GGMLType::Q8_1) {
    const uint8_t* qs = b + (T == GGMLType::Q8_1 ? 4 : 2);  // Q8_1's s is for activations only
    for (int j = 0; j < 32; ++j) o.q[j] = int8_t(qs[j]);
    o.a = ld_f16(b);
  } else if constexpr (T == GGMLType::IQ4_NL || T == GGMLType::MXFP4) {
    const bool mx = T == GGMLType::MXFP4;
    const int8_t* kv = mx ? kMXFP4 : kIQ4NL;
    const uint8_t* qs = b + (mx ? 1 : 2);
    for (int j = 0; j < 16; ++j) {
      o.q[j] = kv[qs[j] & 15];
      o.q[j + 16] = kv[qs[j] >> 4];
    }
    o.a = mx ? quant::detail::e8m0_half(b[0]) : ld_f16(b);
  }
}

template <GGMLType T, size_t BB>
void row32(const uint8_t* w, size_t nb, const XRow* x, int m, float* out) {
  for (int r = 0; r < m; ++r) out[r] = 0;
  Dec32 dq;
  for (size_t ib = 0; ib < nb; ++ib) {
    dec32<T>(w + ib * BB, dq);
    for (int r = 0; r < m; ++r) {
      const int8_t* xq = x[r].q + ib * 32;
      int32_t sumi = 0;
      for (int j = 0; j < 32; ++j) sumi += dq.q[j] * xq[j];
      const float dx = x[r].d[ib];
      out[r] += dq.a * dx * float(sumi);
      if (dq.b != 0) out[r] += dq.b * dx * float(x[r].s[ib]);
    }
  }
}

// ---- 256-element super-blocks (Q8_K activations): w_j = D * sc_g * q_j - M * mn_g, groups of G.
struct Dec256 {
  int32_t q[256];
  int32_t sc[16], mn[16];
  float D, M;
  int G;  // 16 or 32
};

template <GGMLType T>
void dec256(const uint8_t* b, Dec256& o) {
  o.M = 0;
  for (int g = 0; g < 16; ++g) o.mn[g] = 0;
  if constexpr (T == GGMLType::Q2_K) {
    const uint8_t *sc = b, *qs = b + 16;
    o.D = ld_f16(b + 80);
    o.M = ld_f16(b + 82);
    o.G = 16;
    for (int g = 0; g < 16; ++g) {
      o.sc[g] = sc[g] & 15;
      o.mn[g] = sc[g] >> 4;
    }
    for (int e = 0; e < 256; ++e) o.q[e] = (qs[(e >> 7) * 32 + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
  } else if constexpr (T == GGMLType::Q3_K) {
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    o.D = ld_f16(b + 108);
    o.G = 16;
    for (int g = 0; g < 16; ++g)
      o.sc[g] = int(((sc[g & 7] >> (4 * (g >> 3))) & 15) | (((sc[8 + (g & 3)] >> (2 * (g >> 2))) & 3) << 4)) - 32;
    for (int e = 0; e < 256; ++e) {
      const int l = e & 31;
      o.q[e] = ((qs[(e >> 7) * 32 + l] >> (2 * ((e >> 5) & 3))) & 3) - (((hm[l] >> (e >> 5)) & 1) ? 0 : 4);
    }
  } else if constexpr (T == GGMLType::Q4_K || T == GGMLType::Q5_K) {
    const bool five = T == GGMLType::Q5_K;
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
    o.D = ld_f16(b);
    o.M = ld_f16(b + 2);
    o.G = 32;
    for (uint32_t g = 0; g < 8; ++g) {
      uint32_t s, mn;
      quant::detail::scale_min_k4(sc, g, s, mn);
      o.sc[g] = int32_t(s);
      o.mn[g] = int32_t(mn);
      for (int l = 0; l < 32; ++l) {
        int q = (qs[(g >> 1) * 32 + l] >> (4 * (g & 1))) & 15;
        if (five) q |= ((qh[l] >> g) & 1) << 4;
        o.q[g * 32 + l] = q;
      }
    }
  } else if constexpr (T == GGMLType::Q6_K) {
    const uint8_t *ql = b, *qh = b + 128;
    o.D = ld_f16(b + 208);
    o.G = 16;
    for (int g = 0; g < 16; ++g) o.sc[g] = int8_t(b[192 + g]);
    for (int h = 0; h < 2; ++h) {
      const uint8_t *l8 = ql + h * 64, *h8 = qh + h * 32;
      int32_t* q = o.q + h * 128;
      for (int l = 0; l < 32; ++l) {
        q[l] = ((l8[l] & 15) | ((h8[l] & 3) << 4)) - 32;
        q[l + 32] = ((l8[l + 32] & 15) | (((h8[l] >> 2) & 3) << 4)) - 32;
        q[l + 64] = ((l8[l] >> 4) | (((h8[l] >> 4) & 3) << 4)) - 32;
        q[l + 96] = ((l8[l + 32] >> 4) | ((h8[l] >> 6) << 4)) - 32;
      }
    }
  } else if constexpr (T == GGMLType::Q8_K) {
    o.D = ld_f32(b);
    o.G = 16;
    for (int g = 0; g < 16; ++g) o.sc[g] = 1;
    for (int e = 0; e < 256; ++e) o.q[e] = int8_t(b[4 + e]);
  } else if constexpr (T == GGMLType::IQ4_XS) {
    o.D = ld_f16(b);
    o.G = 32;
    const uint32_t sh = uint32_t(b[2]) | (uint32_t(b[3]) << 8);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int g = 0; g < 8; ++g) {
      o.sc[g] = int(((sl[g >> 1] >> (4 * (g & 1))) & 15) | (((sh >> (2 * g)) & 3) << 4)) - 32;
      for (int j = 0; j < 16; ++j) {
        o.q[g * 32 + j] = kIQ4NL[qs[g * 16 + j] & 15];
        o.q[g * 32 + j + 16] = kIQ4NL[qs[g * 16 + j] >> 4];
      }
    }
  }
}

template <GGMLType T, size_t BB>
void row256(const uint8_t* w, size_t nb, const XRow* x, int m, float* out) {
  for (int r = 0; r < m; ++r) out[r] = 0;
  Dec256 dq;
  for (size_t ib = 0; ib < nb; ++ib) {
    dec256<T>(w + ib * BB, dq);
    const int ng = 256 / dq.G;
    for (int r = 0; r < m; ++r) {
      const int8_t* xq = x[r].q + ib * 256;
      const int16_t* bs = x[r].bs + ib * 16;
      int32_t sumi = 0, summ = 0;
      for (int g = 0; g < ng; ++g) {
        int32_t s = 0;
        for (int j = g * dq.G; j < (g + 1) * dq.G; ++j) s += dq.q[j] * xq[j];
        sumi += dq.sc[g] * s;
        const int32_t xs = dq.G == 16 ? bs[g] : bs[2 * g] + bs[2 * g + 1];
        summ += dq.mn[g] * xs;
      }
      const float dx = x[r].d[ib];
      out[r] += dq.D * dx * float(sumi);
      if (dq.M != 0) out[r] -= dq.M * dx * float(summ);
    }
  }
}

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::Avx2;
#endif
  return Isa::Scalar;
}

std::atomic<int> g_isa{-1};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

Isa best_isa() {
  static const Isa best = detect();
  return best;
}

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v >= 0) return Isa(v);
  Isa isa = best_isa();
  if (const backend::CpuIsa e = backend::options().cpu_isa; e != backend::CpuIsa::Auto) {
    const Isa want = e == backend::CpuIsa::Scalar ? Isa::Scalar : e == backend::CpuIsa::Avx2 ? Isa::Avx2 : Isa::Avx512;
    if (int(want) < int(isa)) isa = want;  // more than the CPU has: the best it has
  }
  g_isa.store(int(isa), std::memory_order_relaxed);
  return isa;
}

void set_isa(Isa isa) {
  if (int(isa) > int(best_isa()))
    throw Error(ErrorKind::Unsupported, std::string("qmatmul: the CPU kernel level ") + isa_name(isa) +
                                            " is not supported by this CPU (best: " + isa_name(best_isa()) +
                                            "); pick a lower one");
  g_isa.store(int(isa), std::memory_order_relaxed);
}

GGMLType act_type(GGMLType t) { return quant::ggml_type_info(t)->block_elems == 256 ? GGMLType::Q8_K : GGMLType::Q8_0; }

RowDot scalar_kernel(GGMLType t) {
  switch (t) {
#define WICK_K32(T) \
  case GGMLType::T: \
    return row32<GGMLType::T, quant::ggml_type_info(GGMLType::T)->block_bytes>;
#define WICK_K256(T) \
  case GGMLType::T:  \
    return row256<GGMLType::T, quant::ggml_type_info(GGMLType::T)->block_bytes>;
    WICK_K32(Q4_0)
    WICK_K32(Q4_1)
    WICK_K32(Q5_0)
    WICK_K32(Q5_1)
    WICK_K32(Q8_0)
    WICK_K32(Q8_1)
    WICK_K32(IQ4_NL)
    WICK_K32(MXFP4)
    WICK_K256(Q2_K)
    WICK_K256(Q3_K)
    WICK_K256(Q4_K)
    WICK_K256(Q5_K)
    WICK_K256(Q6_K)
    WICK_K256(Q8_K)
    WICK_K256(IQ4_XS)
#undef WICK_K32
#undef WICK_K256
    default:
      throw Error(ErrorKind::Unsupported, std::string("qmatmul: no CPU kernel for ggml type ") +
                                              quant::ggml_type_info(t)->name +
                                              "; supported: " + ggml_supported_types());
  }
}

void quantize_row_q8_K(const float* x, size_t nb, int8_t* q, float* d, int16_t* bs, Isa isa) {
  size_t ib = 0;
  while (ib < nb) {
    if (isa == Isa::Avx512) ib += avx512_quantize_q8_K(x + ib * 256, nb - ib, q + ib * 256, d + ib, bs + ib * 16);
    if (ib == nb) break;
    uint8_t blk[292];  // the shared encoder, then unpacked
    quant::quantize_block_q8_K(x + ib * 256, blk);
    d[ib] = quant::detail::ld_f32(blk);
    std::memcpy(q + ib * 256, blk + 4, 256);
    std::memcpy(bs + ib * 16, blk + 260, 32);  // little-endian int16, as the file
    ++ib;
  }
}

void quantize_row_q8_0(const float* x, size_t nb, int8_t* q, float* d, int32_t* s, float* sd, int8_t* qn, Isa isa) {
  size_t ib = 0;
  while (ib < nb) {
    if (isa == Isa::Avx512) ib += avx512_quantize_q8_0(x + ib * 32, nb - ib, q + ib * 32, d + ib, s + ib, sd + ib);
    if (ib == nb) break;
    uint8_t blk[34];  // the shared encoder, then unpacked
    quant::quantize_block_q8_0(x + ib * 32, blk);
    d[ib] = quant::detail::ld_f16(blk);
    std::memcpy(q + ib * 32, blk + 2, 32);
    int32_t sum = 0;
    for (int t = 0; t < 32; ++t) sum += int8_t(blk[2 + t]);
    s[ib] = sum;
    sd[ib] = float(sum) * d[ib];
    ++ib;
  }
  if (!qn) return;
  for (size_t g = 0; g + 4 <= nb; g += 4)  // lows of A B C D, then highs
    for (size_t i = 0; i < 4; ++i) {
      std::memcpy(qn + g * 32 + 16 * i, q + (g + i) * 32, 16);
      std::memcpy(qn + g * 32 + 64 + 16 * i, q + (g + i) * 32 + 16, 16);
    }
}

PanelKernel panel_kernel(GGMLType t, Isa isa) {
  return isa == Isa::Avx512 ? avx512_panel(uint32_t(t)) : PanelKernel{nullptr, nullptr, 0, false};
}

RowDot kernel(GGMLType t, Isa isa) {
  RowDot k = nullptr;
  if (isa == Isa::Avx512) k = avx512_kernel(uint32_t(t));
  if (!k && int(isa) >= int(Isa::Avx2)) k = avx2_kernel(uint32_t(t));
  return k ? k : scalar_kernel(t);
}

}  // namespace wick::cpu::qdot

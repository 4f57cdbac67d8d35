#pragma once
// Integer dot products of one GGUF weight block with activations quantized to Q8_1 (32-element
// blocks: f16 d, f16 s, 32 int8; quant_encode.hpp's quantize_block_q8_1), for host and device.
// The GPU matrix-vector kernels (backend/gpu/kernels/qmatmul.cu) run these; the CPU tests run the
// same code through dot4_i8's portable fallback against dequantize_block (quant_blocks.hpp).
//
// A weight block of QK elements covers QK / 32 activation blocks and is split into C chunks; a
// chunk's integer weights are unpacked once into int8x4 words and dotted with M activation rows
// (the rows share each weight load). Every weight type is d_w * q_w (+ an offset): the offsets
// (-8 d for Q4_0, the mins of Q4_1/Q4_K/...) are applied to the chunk's integer sum of the
// quantized activations (dot4 with 0x01010101), so each chunk's sum is exact in int32 and is
// scaled once: sum_chunk d_x * (d_w * sum(q_w q_x) + m_w * sum(q_x)). Layouts from llama.cpp's
// gguf-py (quants.py); the code is ours.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/dot4.hpp"
#include "ops/quant_blocks.hpp"

namespace wick::quant::dot {

constexpr int kQ8_1Bytes = 36;  // f16 d, f16 s, 32 int8

// Loop unrolling in the device pass only (a host compiler warns about the pragma).
#if WICK_DEVICE_COMPILE
#define WICK_QDOT_UNROLL _Pragma("unroll")
#else
#define WICK_QDOT_UNROLL
#endif

// Loads of an int32 from block bytes at the alignment the block layout guarantees.
WICK_HD int ld_a4(const uint8_t* p) {
#if WICK_DEVICE_COMPILE
  return *reinterpret_cast<const int*>(p);
#else
  int v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
WICK_HD uint32_t ld_u16(const uint8_t* p) {
#if WICK_DEVICE_COMPILE
  return *reinterpret_cast<const uint16_t*>(p);
#else
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8);
#endif
}
WICK_HD int ld_a2(const uint8_t* p) { return int(ld_u16(p) | (ld_u16(p + 2) << 16)); }
WICK_HD int ld_a1(const uint8_t* p) {
  return int(uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24));
}
// 4N bytes at any alignment as N words. On the device: the aligned words that cover them, shifted
// into place (N or N + 1 loads instead of 4N byte or 2N halfword ones: MXFP4's 8-byte chunks start at
// odd bytes, Q8_0's 16-byte ones 2 bytes into every other 34-byte block); the last word is only read
// when the bytes reach into it, so no word past the last byte's is touched.
template <int N>
WICK_HD void ld_words(const uint8_t* p, int (&q)[N]) {
#if WICK_DEVICE_COMPILE
  const uint32_t off = uint32_t(reinterpret_cast<uintptr_t>(p) & 3u), sh = 8u * off;
  const auto* a = reinterpret_cast<const uint32_t*>(p - off);  // from p, so loads stay global ones
  uint32_t w[N + 1];
  WICK_QDOT_UNROLL
  for (int i = 0; i < N; ++i) w[i] = a[i];
  w[N] = sh ? a[N] : 0u;
  WICK_QDOT_UNROLL
  for (int i = 0; i < N; ++i) q[i] = int(uint32_t(((uint64_t(w[i + 1]) << 32) | w[i]) >> sh));
#else
  for (int i = 0; i < N; ++i) q[i] = ld_a1(p + 4 * i);
#endif
}
// An f16 scale from its bits (the low 16 of b), and one loaded from block bytes.
WICK_HD float h_bits(uint32_t b) { return to_f32(f16::from_bits(uint16_t(b & 0xFFFFu))); }
WICK_HD float ld_h(const uint8_t* p) { return h_bits(ld_u16(p)); }

constexpr int kOnes = 0x01010101;
constexpr int kNib = 0x0F0F0F0F;

// PTX's prmt (__byte_perm): byte i of the result is byte (s >> 4i) & 7 of the 8 bytes y:x. The
// host and AMD passes emulate it, so the CPU tests run the same selector arithmetic.
WICK_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if WICK_HAS_BYTE_PERM
  return __byte_perm(x, y, s);
#else
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t k = (s >> (4 * i)) & 7u;
    r |= (((k < 4 ? x : y) >> (8 * (k & 3))) & 0xFFu) << (8 * i);
  }
  return r;
#endif
}

// The bytes of q (each 0..15) looked up in a 16-entry int8 table held as four little-endian
// words t[0..3]: entries 0-7 and 8-15 picked by the low 3 bits, then one of the two by bit 3.
WICK_HD int lut16(int q, const uint32_t (&t)[4]) {
  const uint32_t u = uint32_t(q) & 0x07070707u, h = uint32_t(q) & 0x08080808u;
  const uint32_t sel = (u & 7u) | ((u >> 4) & 0x70u) | ((u >> 8) & 0x700u) | ((u >> 12) & 0x7000u);
  const uint32_t lo = byte_perm(t[0], t[1], sel), hi = byte_perm(t[2], t[3], sel);
  const uint32_t sel2 = 0x3210u | ((h >> 1) & 0x4u) | ((h >> 5) & 0x40u) | ((h >> 9) & 0x400u) | ((h >> 13) & 0x4000u);
  return int(byte_perm(lo, hi, sel2));
}
// IQ4_NL's levels and MXFP4's doubled e2m1 values (quant_blocks.hpp), as lut16 tables.
WICK_HD void iq4nl_table(uint32_t (&t)[4]) {
  t[0] = 0xBFAD9881u;  // -127 -104 -83 -65
  t[1] = 0xF6EADDCFu;  // -49 -35 -22 -10
  t[2] = 0x26190D01u;  // 1 13 25 38
  t[3] = 0x71594535u;  // 53 69 89 113
}
WICK_HD void mxfp4_table(uint32_t (&t)[4]) {
  t[0] = 0x03020100u;  // 0 1 2 3
  t[1] = 0x0C080604u;  // 4 6 8 12
  t[2] = 0xFDFEFF00u;  // 0 -1 -2 -3
  t[3] = 0xF4F8FAFCu;  // -4 -6 -8 -12
}

// Activation block b (of the weight block's QK / 32) of row r: its f32 scale and int word i.
struct XRows {
  const uint8_t* p;  // the first activation block of this weight block, row 0
  size_t row_bytes;  // bytes between rows
  WICK_HD const uint8_t* blk(int r, int b) const { return p + size_t(r) * row_bytes + size_t(b) * kQ8_1Bytes; }
  WICK_HD float d(int r, int b) const { return ld_h(blk(r, b)); }
  WICK_HD int q(int r, int b, int i) const { return ld_a4(blk(r, b) + 4 + 4 * i); }
};

// sum(w_i * x_i) and sum(x_i) over n words of one activation block of row r.
template <int N>
WICK_HD void dots(const int (&w)[N], const XRows& x, int r, int b, int i0, int& s, int& sx) {
  s = 0;
  sx = 0;
  WICK_QDOT_UNROLL
  for (int i = 0; i < N; ++i) {
    const int xi = x.q(r, b, i0 + i);
    s = dot4_i8(w[i], xi, s);
    sx = dot4_i8(kOnes, xi, sx);
  }
}

// 5th bits: bit j of b (j = 0..3) moved to bit 4 of byte j.
WICK_HD int spread4(uint32_t b) {
  return int(((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25));
}

// ---- the 32-element types: C = 2 chunks; chunk c holds elements 8c..8c+7 and 16+8c..16+8c+7
// (qs bytes 8c..8c+7: low nibbles the first run, high nibbles the second) except Q8_0/Q8_1, whose
// chunk c is elements 16c..16c+15.

// The nibble types: d, offset (m, or a multiple of d), the two low / two high 4-bit words.
template <int M>
WICK_HD void nib_dot(float d, float m, const int (&lo)[2], const int (&hi)[2], const XRows& x, int c, float (&acc)[M]) {
  WICK_QDOT_UNROLL
  for (int r = 0; r < M; ++r) {
    int s0, sx0, s1, sx1;
    dots<2>(lo, x, r, 0, 2 * c, s0, sx0);
    dots<2>(hi, x, r, 0, 4 + 2 * c, s1, sx1);
    acc[r] += x.d(r, 0) * (d * float(s0 + s1) + m * float(sx0 + sx1));
  }
}

template <GGMLType T>
struct Dot;

template <>
struct Dot<GGMLType::Q4_0> {
  static constexpr int QK = 32, BB = 18, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    // The 8 bytes sit 2 bytes into the 18-byte block. Several rows of x: as 2 or 3 aligned words
    // (H200, 2-8 rows of 4096 x 11008: 5-8% faster); one row: as 4 halfwords (there the words were
    // 3-9% slower; build/bench_gpu_qmatvec).
    int v[2];
    if constexpr (M > 1) {
      ld_words(w + 2 + 8 * c, v);
    } else {
      v[0] = ld_a2(w + 2 + 8 * c), v[1] = ld_a2(w + 6 + 8 * c);
    }
    const int lo[2] = {v[0] & kNib, v[1] & kNib}, hi[2] = {(v[0] >> 4) & kNib, (v[1] >> 4) & kNib};
    const float d = ld_h(w);
    nib_dot<M>(d, -8.0f * d, lo, hi, x, c, acc);
  }
};
template <>
struct Dot<GGMLType::Q4_1> {
  static constexpr int QK = 32, BB = 20, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const int v0 = ld_a4(w + 4 + 8 * c), v1 = ld_a4(w + 8 + 8 * c);
    const int lo[2] = {v0 & kNib, v1 & kNib}, hi[2] = {(v0 >> 4) & kNib, (v1 >> 4) & kNib};
    nib_dot<M>(ld_h(w), ld_h(w + 2), lo, hi, x, c, acc);
  }
};
// Q5_0/Q5_1: bit j of qh is the 5th bit of element j.
template <>
struct Dot<GGMLType::Q5_0> {
  static constexpr int QK = 32, BB = 22, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const uint32_t qh = uint32_t(ld_a2(w + 2));
    const int v0 = ld_a2(w + 6 + 8 * c), v1 = ld_a2(w + 10 + 8 * c);
    const int lo[2] = {(v0 & kNib) | spread4(qh >> (8 * c)), (v1 & kNib) | spread4(qh >> (8 * c + 4))};
    const int hi[2] = {((v0 >> 4) & kNib) | spread4(qh >> (16 + 8 * c)),
                       ((v1 >> 4) & kNib) | spread4(qh >> (20 + 8 * c))};
    const float d = ld_h(w);
    nib_dot<M>(d, -16.0f * d, lo, hi, x, c, acc);
  }
};
template <>
struct Dot<GGMLType::Q5_1> {
  static constexpr int QK = 32, BB = 24, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const uint32_t qh = uint32_t(ld_a4(w + 4));
    const int v0 = ld_a4(w + 8 + 8 * c), v1 = ld_a4(w + 12 + 8 * c);
    const int lo[2] = {(v0 & kNib) | spread4(qh >> (8 * c)), (v1 & kNib) | spread4(qh >> (8 * c + 4))};
    const int hi[2] = {((v0 >> 4) & kNib) | spread4(qh >> (16 + 8 * c)),
                       ((v1 >> 4) & kNib) | spread4(qh >> (20 + 8 * c))};
    nib_dot<M>(ld_h(w), ld_h(w + 2), lo, hi, x, c, acc);
  }
};
// Plain int8 weights: d, then 32 int8 at byte `qs`.
template <int M, int kQs, bool kAligned4>
WICK_HD void q8_dot(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
  int q[4];
  if constexpr (kAligned4) {
    WICK_QDOT_UNROLL
    for (int i = 0; i < 4; ++i) q[i] = ld_a4(w + kQs + 16 * c + 4 * i);
  } else {
    ld_words(w + kQs + 16 * c, q);
  }
  const float d = ld_h(w);
  WICK_QDOT_UNROLL
  for (int r = 0; r < M; ++r) {
    int s, sx;
    dots<4>(q, x, r, 0, 4 * c, s, sx);
    acc[r] += x.d(r, 0) * (d * float(s));
  }
}
template <>
struct Dot<GGMLType::Q8_0> {
  static constexpr int QK = 32, BB = 34, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    q8_dot<M, 2, false>(w, c, x, acc);
  }
};
template <>
struct Dot<GGMLType::Q8_1> {
  static constexpr int QK = 32, BB = 36, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    q8_dot<M, 4, true>(w, c, x, acc);
  }
};
// ---- Whole block pairs (the staged matrix-vector kernel of qmatmul.cu, one row of x). Two
// consecutive blocks of Q4_0 (2 x 18 bytes) or Q8_0 (2 x 34) are whole 4-byte words, so the kernel
// reads a pair from shared memory as words (an odd word stride: no bank conflicts) and unpacks both
// blocks here. x of a pair: both Q8_1 blocks' int8 words, scales and exact sums of q.
struct alignas(16) XPair {  // 80 bytes, so the pairs of a staged row stay 16-byte aligned
  int q[16];  // block 0's 8 words (elements 0-31), then block 1's
  float d[2];
  int s[2];  // sum of the block's 32 int8: the integer side of Q4_0's -8 offset
};
// Half h (block h of the pair) of an XPair from one Q8_1 block.
WICK_HD void set_xpair_half(XPair& p, int h, const uint8_t* q8_1) {
  const XRows x{q8_1, 0};
  int sum = 0;
  WICK_QDOT_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int q = x.q(0, 0, i);
    p.q[8 * h + i] = q;
    sum = dot4_i8(kOnes, q, sum);
  }
  p.d[h] = x.d(0, 0);
  p.s[h] = sum;
}

// Block 0's int word i from a pair whose blocks start with a 2-byte scale: bytes 2 + 4i .. 5 + 4i,
// which straddle words i and i + 1.
WICK_HD int pair_word0(const uint32_t* w, int i) { return int((w[i] >> 16) | (w[i + 1] << 16)); }

template <GGMLType T>
struct PairDot;

template <>
struct PairDot<GGMLType::Q4_0> {
  static constexpr int kWords = 9;  // 36 bytes; block 1 = d in word 4's high half, qs in words 5..8
  WICK_HD static float run(const uint32_t (&w)[kWords], const XPair& x) {
    int s0 = 0, s1 = 0;
    WICK_QDOT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int a = pair_word0(w, i), b = int(w[5 + i]);
      s0 = dot4_i8(a & kNib, x.q[i], s0);
      s0 = dot4_i8((a >> 4) & kNib, x.q[4 + i], s0);
      s1 = dot4_i8(b & kNib, x.q[8 + i], s1);
      s1 = dot4_i8((b >> 4) & kNib, x.q[12 + i], s1);
    }
    return h_bits(w[0]) * (x.d[0] * float(s0 - 8 * x.s[0])) + h_bits(w[4] >> 16) * (x.d[1] * float(s1 - 8 * x.s[1]));
  }
};
template <>
struct PairDot<GGMLType::Q8_0> {
  static constexpr int kWords = 17;  // 68 bytes; block 1 = d in word 8's high half, qs in words 9..16
  WICK_HD static float run(const uint32_t (&w)[kWords], const XPair& x) {
    int s0 = 0, s1 = 0;
    WICK_QDOT_UNROLL
    for (int i = 0; i < 8; ++i) {
      s0 = dot4_i8(pair_word0(w, i), x.q[i], s0);
      s1 = dot4_i8(int(w[9 + i]), x.q[8 + i], s1);
    }
    return h_bits(w[0]) * (x.d[0] * float(s0)) + h_bits(w[8] >> 16) * (x.d[1] * float(s1));
  }
};

// Table types: the nibbles index int8 levels; d * level.
template <int M>
WICK_HD void lut_dot(float d, int v0, int v1, const uint32_t (&t)[4], const XRows& x, int c, float (&acc)[M]) {
  const int lo[2] = {lut16(v0 & kNib, t), lut16(v1 & kNib, t)};
  const int hi[2] = {lut16((v0 >> 4) & kNib, t), lut16((v1 >> 4) & kNib, t)};
  WICK_QDOT_UNROLL
  for (int r = 0; r < M; ++r) {
    int s0, sx0, s1, sx1;
    dots<2>(lo, x, r, 0, 2 * c, s0, sx0);
    dots<2>(hi, x, r, 0, 4 + 2 * c, s1, sx1);
    acc[r] += (x.d(r, 0) * float(s0 + s1)) * d;  // d last: MXFP4's scale may be as small as 2^-128
  }
}
template <>
struct Dot<GGMLType::IQ4_NL> {
  static constexpr int QK = 32, BB = 18, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    uint32_t t[4];
    iq4nl_table(t);
    lut_dot<M>(ld_h(w), ld_a2(w + 2 + 8 * c), ld_a2(w + 6 + 8 * c), t, x, c, acc);
  }
};
template <>
struct Dot<GGMLType::MXFP4> {
  static constexpr int QK = 32, BB = 17, C = 2;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    uint32_t t[4];
    mxfp4_table(t);
    int v[2];
    ld_words(w + 1 + 8 * c, v);
    lut_dot<M>(detail::e8m0_half(w[0]), v[0], v[1], t, x, c, acc);
  }
};

// ---- the 256-element types: C = 8 or 16 chunks, each touching several activation blocks.

// Q4_K/Q5_K: chunk c = qs group p = c / 2 (sub-blocks 2p: low nibbles, 2p + 1: high) at bytes
// 16t..16t+15, t = c % 2; both sub-blocks' elements 16t..16t+15. The 12 scale bytes are read as
// three words and decoded as detail::scale_min_k4 does.
template <int M, bool kFive>
WICK_HD void qk45_dot(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
  const int p = c >> 1, t = c & 1;
  const uint8_t* qs = w + (kFive ? 48 : 16) + 32 * p + 16 * t;
  int v[4], h[4] = {0, 0, 0, 0};
  uint32_t sw[3];
  float d, dmin;
#if WICK_DEVICE_COMPILE
  // Blocks of 144 / 176 bytes in rows of whole blocks from a 16-byte aligned start (qmatvec checks
  // it): the header (d, dmin, 12 scale bytes), the chunk's 16 qs bytes and Q5_K's 16 qh bytes are
  // one 16-byte load each instead of 9 (13) narrow ones.
  const uint4 hd = *reinterpret_cast<const uint4*>(w), qv = *reinterpret_cast<const uint4*>(qs);
  v[0] = int(qv.x), v[1] = int(qv.y), v[2] = int(qv.z), v[3] = int(qv.w);
  if (kFive) {
    const uint4 hv = *reinterpret_cast<const uint4*>(w + 16 + 16 * t);
    h[0] = int(hv.x), h[1] = int(hv.y), h[2] = int(hv.z), h[3] = int(hv.w);
  }
  sw[0] = hd.y, sw[1] = hd.z, sw[2] = hd.w;
  d = h_bits(hd.x), dmin = h_bits(hd.x >> 16);
#else
  WICK_QDOT_UNROLL
  for (int i = 0; i < 4; ++i) {
    v[i] = ld_a4(qs + 4 * i);
    if (kFive) h[i] = ld_a4(w + 16 + 16 * t + 4 * i);
  }
  sw[0] = uint32_t(ld_a4(w + 4)), sw[1] = uint32_t(ld_a4(w + 8)), sw[2] = uint32_t(ld_a4(w + 12));
  d = ld_h(w), dmin = ld_h(w + 2);
#endif
  WICK_QDOT_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int g = 2 * p + half;
    // bytes g - 4, g, g + 4 of the scales sit at byte g % 4 of words 0, 1, 2 (g >= 4); bytes g and
    // g + 4 at byte g of words 0 and 1 (g < 4)
    const uint32_t sh = 8u * uint32_t(g & 3);
    const uint32_t b0 = (sw[0] >> sh) & 0xFFu, b1 = (sw[1] >> sh) & 0xFFu, b2 = (sw[2] >> sh) & 0xFFu;
    const uint32_t sc = g < 4 ? (b0 & 63u) : ((b2 & 15u) | ((b0 >> 2) & 0x30u));
    const uint32_t mn = g < 4 ? (b1 & 63u) : ((b2 >> 4) | ((b1 >> 2) & 0x30u));
    int q[4];
    WICK_QDOT_UNROLL
    for (int i = 0; i < 4; ++i) {
      q[i] = (v[i] >> (4 * half)) & kNib;
      if (kFive) q[i] |= ((h[i] >> g) & kOnes) << 4;
    }
    const float dl = d * float(sc), ml = dmin * float(mn);
    WICK_QDOT_UNROLL
    for (int r = 0; r < M; ++r) {
      int s, sx;
      dots<4>(q, x, r, g, 4 * t, s, sx);
      acc[r] += x.d(r, g) * (dl * float(s) - ml * float(sx));
    }
  }
}
template <>
struct Dot<GGMLType::Q4_K> {
  static constexpr int QK = 256, BB = 144, C = 8;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    qk45_dot<M, false>(w, c, x, acc);
  }
};
template <>
struct Dot<GGMLType::Q5_K> {
  static constexpr int QK = 256, BB = 176, C = 8;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    qk45_dot<M, true>(w, c, x, acc);
  }
};
// Q6_K: chunk c = half h = c / 4 and l0 = 8 (c % 4): ql words at l0 and 32 + l0, the qh words at
// l0 give elements l0..l0+7 of the half's four 32-element sub-blocks (activation blocks 4h + j),
// whose 16-element scale groups are 8h + l0 / 16 + 2j.
template <>
struct Dot<GGMLType::Q6_K> {
  static constexpr int QK = 256, BB = 210, C = 8;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const int h = c >> 2, l0 = 8 * (c & 3);
    int q[4][2];
    WICK_QDOT_UNROLL
    for (int i = 0; i < 2; ++i) {
      const int ql0 = ld_a2(w + 64 * h + l0 + 4 * i), ql1 = ld_a2(w + 64 * h + 32 + l0 + 4 * i);
      const int qh = ld_a2(w + 128 + 32 * h + l0 + 4 * i);
      q[0][i] = (ql0 & kNib) | ((qh & 0x03030303) << 4);
      q[1][i] = (ql1 & kNib) | (((qh >> 2) & 0x03030303) << 4);
      q[2][i] = ((ql0 >> 4) & kNib) | (((qh >> 4) & 0x03030303) << 4);
      q[3][i] = ((ql1 >> 4) & kNib) | (((qh >> 6) & 0x03030303) << 4);
    }
    const float d = ld_h(w + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(w + 192 + 8 * h + (l0 >> 4));
    WICK_QDOT_UNROLL
    for (int r = 0; r < M; ++r) {
      float a = 0.0f;
      WICK_QDOT_UNROLL
      for (int j = 0; j < 4; ++j) {
        int s, sx;
        dots<2>(q[j], x, r, 4 * h + j, l0 >> 2, s, sx);
        a += x.d(r, 4 * h + j) * float(int(sc[2 * j]) * (s - 32 * sx));
      }
      acc[r] += d * a;
    }
  }
};
// Q2_K/Q3_K: chunk c = half h = c / 8 and l0 = 4 (c % 8): the 2-bit word at l0 holds elements
// l0..l0+3 of the half's four sub-blocks (shift 2j for sub-block j, activation block 4h + j);
// their 16-element scale group is 2 (4h + j) + l0 / 16.
template <>
struct Dot<GGMLType::Q2_K> {
  static constexpr int QK = 256, BB = 84, C = 16;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const int h = c >> 3, l0 = 4 * (c & 7);
    const int v = ld_a4(w + 16 + 32 * h + l0);
    const float d = ld_h(w + 80), dmin = ld_h(w + 82);
    WICK_QDOT_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int b = 4 * h + j, sc = w[2 * b + (l0 >> 4)];
      const int q = (v >> (2 * j)) & 0x03030303;
      const float dl = d * float(sc & 15), ml = dmin * float(sc >> 4);
      WICK_QDOT_UNROLL
      for (int r = 0; r < M; ++r) {
        const int xi = x.q(r, b, l0 >> 2);
        acc[r] += x.d(r, b) * (dl * float(dot4_i8(q, xi, 0)) - ml * float(dot4_i8(kOnes, xi, 0)));
      }
    }
  }
};
template <>
struct Dot<GGMLType::Q3_K> {
  static constexpr int QK = 256, BB = 110, C = 16;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const int h = c >> 3, l0 = 4 * (c & 7);
    const int v = ld_a2(w + 32 + 32 * h + l0), hm = ld_a2(w + l0);
    const uint8_t* sc = w + 96;
    const float d = ld_h(w + 108);
    WICK_QDOT_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int b = 4 * h + j, g = 2 * b + (l0 >> 4);
      const int s6 = ((sc[g & 7] >> (4 * (g >> 3))) & 15) | (((sc[8 + (g & 3)] >> (2 * (g >> 2))) & 3) << 4);
      // a clear high bit subtracts 4: q = lo + 4 hbit - 4
      const int q = ((v >> (2 * j)) & 0x03030303) | (((hm >> b) & kOnes) << 2);
      const float dl = d * float(s6 - 32);
      WICK_QDOT_UNROLL
      for (int r = 0; r < M; ++r) {
        const int xi = x.q(r, b, l0 >> 2);
        acc[r] += x.d(r, b) * (dl * float(dot4_i8(q, xi, 0) - 4 * dot4_i8(kOnes, xi, 0)));
      }
    }
  }
};
// Q8_K: f32 d, 256 int8; chunk c = elements 16c..16c+15 (activation block c / 2).
template <>
struct Dot<GGMLType::Q8_K> {
  static constexpr int QK = 256, BB = 292, C = 16;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    int q[4];
    WICK_QDOT_UNROLL
    for (int i = 0; i < 4; ++i) q[i] = ld_a4(w + 4 + 16 * c + 4 * i);
    const float d = detail::ld_f32(w);
    WICK_QDOT_UNROLL
    for (int r = 0; r < M; ++r) {
      int s, sx;
      dots<4>(q, x, r, c >> 1, 4 * (c & 1), s, sx);
      acc[r] += x.d(r, c >> 1) * (d * float(s));
    }
  }
};
// IQ4_XS: 8 sub-blocks of 32 laid out as IQ4_NL's blocks (16 bytes each), 6-bit scales; chunk c
// = sub-block c / 2, IQ4_NL's chunk c % 2.
template <>
struct Dot<GGMLType::IQ4_XS> {
  static constexpr int QK = 256, BB = 136, C = 16;
  template <int M>
  WICK_HD static void run(const uint8_t* w, int c, const XRows& x, float (&acc)[M]) {
    const int g = c >> 1, t = c & 1;
    const uint32_t sh = ld_u16(w + 2);
    const int s6 = int(((w[4 + (g >> 1)] >> (4 * (g & 1))) & 15u) | (((sh >> (2 * g)) & 3u) << 4));
    uint32_t tb[4];
    iq4nl_table(tb);
    const uint8_t* qs = w + 8 + 16 * g;
    const XRows xg{x.p + size_t(g) * kQ8_1Bytes, x.row_bytes};
    lut_dot<M>(ld_h(w) * float(s6 - 32), ld_a4(qs + 8 * t), ld_a4(qs + 4 + 8 * t), tb, xg, t, acc);
  }
};

// f(Dot<T>) for a supported block type; false for any other.
template <class F>
bool dispatch_dot(GGMLType t, F&& f) {
  switch (t) {
#define WICK_QDOT_CASE(T)  \
  case GGMLType::T:        \
    f(Dot<GGMLType::T>{}); \
    return true;
    WICK_QDOT_CASE(Q4_0)
    WICK_QDOT_CASE(Q4_1)
    WICK_QDOT_CASE(Q5_0)
    WICK_QDOT_CASE(Q5_1)
    WICK_QDOT_CASE(Q8_0)
    WICK_QDOT_CASE(Q8_1)
    WICK_QDOT_CASE(Q2_K)
    WICK_QDOT_CASE(Q3_K)
    WICK_QDOT_CASE(Q4_K)
    WICK_QDOT_CASE(Q5_K)
    WICK_QDOT_CASE(Q6_K)
    WICK_QDOT_CASE(Q8_K)
    WICK_QDOT_CASE(IQ4_NL)
    WICK_QDOT_CASE(IQ4_XS)
    WICK_QDOT_CASE(MXFP4)
#undef WICK_QDOT_CASE
    default:
      return false;
  }
}

}  // namespace wick::quant::dot

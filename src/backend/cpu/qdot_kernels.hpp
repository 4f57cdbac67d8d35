#pragma once
// What the SIMD kernel files (qdot_avx2.cpp, qdot_avx512.cpp) share with the rest of the backend.
// They are compiled with -mavx2 / -mavx512*, so they include nothing but this header, qdot_x86.hpp
// (their own helpers, internal to each file) and <immintrin.h>: an inline function they shared with the library
// (std::vector, wick's headers) would get an AVX-512 copy that the linker may pick for callers on any CPU.
#include <cstddef>
#include <cstdint>

namespace wick::cpu::qdot {

// One quantized activation row of k elements.
struct XRow {
  const int8_t* q;    // k values, 64-byte aligned
  const float* d;     // scale per block (k / 32 for Q8_0, k / 256 for Q8_K)
  const int32_t* s;   // Q8_0: sum of the block's 32 q (for offsets such as Q4_0's -8)
  const int16_t* bs;  // Q8_K: sums of each 16 q (k / 16 of them, as block_q8_K's bsums)
  const float* sd;    // Q8_0: s * d per block in f32 (a weight offset's share, in the float domain)
  // Q8_0: q regrouped per 4 blocks A B C D (128 values) as [A 0-15, B 0-15, C 0-15, D 0-15, A 16-31,
  // ..., D 16-31], the order of the low and high nibbles of 4 blocks' 16-byte runs loaded side by
  // side, so the AVX-512 nibble kernels dot them without permuting weights. Whole groups only.
  const int8_t* qn;
};

// IQ4_NL's 16 levels and MXFP4's (e2m1 doubled) as unsigned bytes, level + 128: the tables the
// AVX-512 kernels shuffle nibbles through (data, so sharing it is safe; see above).
alignas(16) inline constexpr uint8_t kIQ4NLPlus128[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                          129, 141, 153, 166, 181, 197, 217, 241};
alignas(16) inline constexpr uint8_t kMXFP4Plus128[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                                          128, 127, 126, 125, 124, 122, 120, 116};

// out[r] = dot(weight row w (nb blocks of its type), activation row x[r]) for r < m (1..8):
// each weight block is decoded once for all m rows.
using RowDot = void (*)(const uint8_t* w, size_t nb, const XRow* x, int m, float* out);

// The level's kernel for ggml type id `type` (GGMLType's number), or nullptr where it has none.
RowDot avx2_kernel(uint32_t type);
RowDot avx512_kernel(uint32_t type);

// Prefill (more than 8 activation rows): weight rows 16 at a time are repacked into a panel whose
// vector lanes are the 16 rows, the quants as unsigned bytes, 4 consecutive elements of a row per
// lane (vector v of a block: elements 4v..4v+3), so one vpdpbusd is 64 products of 16 rows against
// 4 activation bytes broadcast, and scales are applied once per 16 rows. RowDot spends most of its
// instructions on scales and lane shuffles there; the repack is paid once per panel for all rows.
//
// 32-element types whose value is d * (u - off) (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4), per block:
// 16 f32 scales, 8 byte vectors. 256-element super-blocks (Q4_K, Q5_K: D * sc_g * u - Dmin * mn_g
// over groups of 32, Q2_K over groups of 16; IQ4_XS: D * sc_g * (u - 128) over 32; Q3_K: D * sc_g *
// (u - 4) and Q6_K: D * sc_g * (u - 32) over groups of 16), per super-block: the layout below.
constexpr size_t kPanelRows = 16;
constexpr size_t kPanelBlockBytes = 64 + 8 * 64;
// Byte offsets in a super-block's panel: 16 f32 D, 16 f32 Dmin, 16 int32 vectors of group scales
// (group g's in vector g), 8 vectors of int16 min pairs (groups 2p, 2p + 1 in vector p; groups of 32
// use the first 4), 64 quant vectors.
constexpr size_t kPSuperDmin = 64, kPSuperScales = 128, kPSuperMins = kPSuperScales + 16 * 64;
constexpr size_t kPSuperQ = kPSuperMins + 8 * 64, kPanelSuperBytes = kPSuperQ + 64 * 64;
// The activation rows the panel kernels take, 8 at a time interleaved per block (one pointer walks
// them, where 8 XRows' 24 pointers spilled); slots past the last row are zero. Per block of 32:
// 8 x 32 quant bytes, 8 f32 scales, 8 int32 -off * s (the weight offset's share of the block
// sum, exact). Per super-block of 256: 8 x 256 quant bytes, 8 f32 scales, 8 x 16 int32 -off *
// (sum of each 16), 8 x 4 int16 pairs of the sums of each 32 and 8 x 8 pairs of the sums of each
// 16 (for the mins).
constexpr size_t kXTileRows = 8;
constexpr size_t kXBlockD = kXTileRows * 32, kXBlockOff = kXTileRows * 36, kXTileBlockBytes = kXTileRows * 40;
constexpr size_t kXSuperD = kXTileRows * 256, kXSuperOff = kXTileRows * 260, kXSuperPairs32 = kXTileRows * 324;
constexpr size_t kXSuperPairs16 = kXTileRows * 340, kXTileSuperBytes = kXTileRows * 372;
struct PanelKernel {
  // Rows [0, rows) (rows <= 16) of w, row_bytes apart, nb blocks each, into panel (nb *
  // kPanel{Block,Super}Bytes bytes, 64-byte aligned); lanes from rows on hold no row and are not stored.
  void (*pack)(const uint8_t* w, size_t row_bytes, size_t rows, size_t nb, uint8_t* panel);
  // out[r * 16 + lane] = dot(the panel's row lane, activation row r of xtile) for r < m (1..8).
  void (*gemm)(const uint8_t* panel, size_t nb, const uint8_t* xtile, int m, float* out);
  int32_t off;  // the unsigned value's offset: Q4_0 8, Q5_0 16, Q3_K 4, Q6_K 32, Q8_0 / IQ4_NL / MXFP4 / IQ4_XS 128
  bool super;   // 256-element super-blocks (the K-quants' layouts above)
};
// The AVX-512 VNNI panel kernel of ggml type id `type`; pack is nullptr where it has none.
PanelKernel avx512_panel(uint32_t type);

// Q8_0 activation blocks of 32 floats from x, the values quant::quantize_block_q8_0 encodes: q, the
// f16 scale as a float in d, the sum of q in s and s * d in sd, block after block. Returns the first
// block it left to the scalar encoder (nb when none), which the caller encodes and then resumes.
size_t avx512_quantize_q8_0(const float* x, size_t nb, int8_t* q, float* d, int32_t* s, float* sd);
// Q8_K blocks of 256 floats likewise (quant::quantize_block_q8_K's values): q, d, the 16 sums of
// each 16 in bs, block after block; returns the first block it left to the scalar encoder.
size_t avx512_quantize_q8_K(const float* x, size_t nb, int8_t* q, float* d, int16_t* bs);

}  // namespace wick::cpu::qdot

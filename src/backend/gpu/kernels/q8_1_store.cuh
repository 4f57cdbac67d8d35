#pragma once
// Q8_1 blocks (quant_encode.hpp's quantize_block_q8_1 bytes: f16 d, f16 d * sum(q), 32 int8)
// written from registers by a group of lanes. The activation quantization kernel of
// kernels/qmatmul.cu uses it, and so do the kernels that produce a quantized product's input
// (norms, silu_mul in kernels/nn.cu): they hand the matrix-vector path its Q8_1 rows themselves,
// one kernel fewer per product.
#include <cstdint>

#include "backend/gpu/device_utils.cuh"
#include "ops/quant_dot.hpp"
#include "ops/quant_encode.hpp"

namespace wick::gpu {

// One lane's share of a Q8_1 block of 32 consecutive values held P per lane by L = 32 / P lanes of
// one aligned group (group lane j holds elements P j .. P j + P - 1): its int8 values, 4 to a word
// (P == 1: the low byte), and the block's scale and sum, the same in every lane of the group.
template <int P> struct Q8_1Lane {
  uint32_t q[P >= 4 ? P / 4 : 1];
  float d;  // amax / 127 before its f16 rounding (the quants are v / d, rounded)
  int sum;  // of the block's 32 int8
};

// Every lane of the wave calls it (xor shuffles below L stay inside the group).
template <int P>
__device__ __forceinline__ Q8_1Lane<P> encode_q8_1(const float (&v)[P], int j) {
  static_assert(P == 1 || P == 4 || P == 8, "a lane holds 1, 4 or 8 of a block's 32 values");
  constexpr int L = 32 / P;
  // ggml's running MAX(amax, |x_j|) from 0: a NaN replaces the running value and the next element
  // replaces the NaN, so it is the max after the last NaN (NaN when that is the last element).
  int last_nan = -1;
#pragma unroll
  for (int i = 0; i < P; ++i)
    if (v[i] != v[i]) last_nan = P * j + i;
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) {
    const int other = shfl_xor(last_nan, o);
    last_nan = other > last_nan ? other : last_nan;
  }
  float am = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i)
    if (P * j + i > last_nan) am = ::fmaxf(am, ::fabsf(v[i]));
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) am = ::fmaxf(am, shfl_xor(am, o));
  const float amax = last_nan == 31 ? wick::detail::bits_f32(0x7fc00000u) : am;
  Q8_1Lane<P> r;
  r.d = amax / 127.0f;
  const float id = r.d != 0.0f ? 1.0f / r.d : 0.0f;
  int sum = 0;
#pragma unroll
  for (int w = 0; w < (P >= 4 ? P / 4 : 1); ++w) r.q[w] = 0;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int8_t b = int8_t(quant::detail::round_to_int(mul_rn(v[i], id)));
    r.q[i / 4] |= uint32_t(uint8_t(b)) << (8 * (i % 4));
    sum += b;
  }
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) sum += shfl_xor(sum, o);
  r.sum = sum;
  return r;
}

// The block's bytes from encode_q8_1's lanes; a group with `valid` false passes zeros and stores
// nothing. `out` is the block's first byte (4-byte aligned).
template <int P>
__device__ __forceinline__ void store_q8_1(const float (&v)[P], int j, bool valid, uint8_t* out) {
  const Q8_1Lane<P> r = encode_q8_1<P>(v, j);
  if (!valid) return;
  uint8_t* qs = out + 4 + P * j;
  if constexpr (P == 1) {
    qs[0] = uint8_t(r.q[0]);
  } else {
#pragma unroll
    for (int w = 0; w < P / 4; ++w)  // 4-byte aligned: blocks are 36 bytes, the quants start at 4
      reinterpret_cast<uint32_t*>(qs)[w] = r.q[w];
  }
  if (j == 0) {
    quant::detail::st_f16(out, r.d);
    quant::detail::st_f16(out + 2, mul_rn(float(r.sum), r.d));
  }
}

}  // namespace wick::gpu

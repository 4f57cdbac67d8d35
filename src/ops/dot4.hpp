#pragma once
// The 4-way int8 dot product of the quantized matrix-vector kernels, on host and device:
// dot4_i8(a, b, acc) = acc + sum over the four bytes i of int8(a_i) * int8(b_i). One instruction
// where the target has it (capabilities.hpp's WICK_DOT4): __dp4a on NVIDIA sm_61+,
// __builtin_amdgcn_sdot4 on AMD targets with the dot1 instructions, __builtin_amdgcn_sudot4
// (both operands flagged signed) on RDNA3/4; elsewhere, and in every host pass, four multiplies.
// None of them saturates (clamp = false): the sums of a block never come near 2^31.
#include <cstdint>

#include "ops/capabilities.hpp"

namespace wick {

WICK_HD int dot4_i8_portable(int a, int b, int acc) {
  for (int i = 0; i < 4; ++i) acc += int(int8_t(uint32_t(a) >> (8 * i))) * int(int8_t(uint32_t(b) >> (8 * i)));
  return acc;
}

WICK_HD int dot4_i8(int a, int b, int acc) {
#if WICK_DOT4 == 1
  return __dp4a(a, b, acc);
#elif WICK_DOT4 == 2
  return __builtin_amdgcn_sdot4(a, b, acc, false);
#elif WICK_DOT4 == 3
  return __builtin_amdgcn_sudot4(true, a, true, b, acc, false);
#else
  return dot4_i8_portable(a, b, acc);
#endif
}

}  // namespace wick

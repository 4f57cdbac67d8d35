#pragma once
// Random GGUF weight blocks for the quantized dot-product tests (test_quant_dot, the GPU
// test_gpu_qmatmul): random bytes, so every bit of every packed field is exercised, with the
// scale fields replaced by finite values of a sane range (random f16 bits would be Inf/NaN or
// 2^15-sized). The mins of Q4_K/Q5_K/Q2_K stay below a quarter of d, so a row's largest |w|
// bounds each sub-block's offset (the tests' float-rounding term relies on it).
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/quant_blocks.hpp"

namespace wick::test {

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f16(v).bits;
  p[0] = uint8_t(h);
  p[1] = uint8_t(h >> 8);
}

// n_blocks blocks of `t`, deterministic in seed.
inline std::vector<uint8_t> random_qblocks(GGMLType t, size_t n_blocks, uint32_t seed) {
  const quant::GGMLTypeInfo* info = quant::ggml_type_info(t);
  const size_t bb = info->block_bytes;
  std::vector<uint8_t> out(n_blocks * bb);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  for (auto& b : out) b = uint8_t(byte(rng));
  for (size_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = out.data() + i * bb;
    const float d = mag(rng) * 0.01f * (byte(rng) & 1 ? -1.0f : 1.0f), pos = mag(rng) * 0.01f;
    switch (t) {
      case GGMLType::Q4_0:
      case GGMLType::Q5_0:
      case GGMLType::Q8_0:
      case GGMLType::IQ4_NL:
      case GGMLType::IQ4_XS:
        put_f16(b, d);
        break;
      case GGMLType::Q4_1:
      case GGMLType::Q5_1:
        put_f16(b, pos);
        put_f16(b + 2, d * 4.0f);  // the min, either sign
        break;
      case GGMLType::Q8_1:
        put_f16(b, d);
        put_f16(b + 2, 0.0f);  // s: only activations use it
        break;
      case GGMLType::Q4_K:
      case GGMLType::Q5_K:
        put_f16(b, pos);
        put_f16(b + 2, pos * mag(rng) * 0.25f);
        break;
      case GGMLType::Q2_K:
        put_f16(b + 80, pos);
        put_f16(b + 82, pos * mag(rng) * 0.25f);
        break;
      case GGMLType::Q3_K:
        put_f16(b + 108, d);
        break;
      case GGMLType::Q6_K:
        put_f16(b + 208, d);
        break;
      case GGMLType::Q8_K: {
        std::memcpy(b, &d, 4);
        break;
      }
      case GGMLType::MXFP4:
        b[0] = uint8_t(118 + byte(rng) % 8);  // 2^-10 .. 2^-3 (halved: e8m0_half)
        break;
      default:
        break;
    }
  }
  return out;
}

}  // namespace wick::test

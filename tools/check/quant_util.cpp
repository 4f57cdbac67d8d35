// Random valid GGUF blocks (see quant_util.hpp). Byte offsets of the scale fields are ggml's
// block layouts (block_q4_0 ... block_mxfp4, as gguf-py's quants.py reads them).
#include "check/quant_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "wick/dtype.hpp"

namespace wick::check {
namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// [0.5, 1.5): scales spread over a factor 3, never zero.
double unit(uint64_t& s) { return 0.5 + double(splitmix(s) >> 11) * 0x1.0p-53; }

void put_f16(uint8_t* p, double v) {
  uint16_t b = f32_to_f16_bits(float(v));
  p[0] = uint8_t(b & 0xff);
  p[1] = uint8_t(b >> 8);
}
void put_f32(uint8_t* p, double v) {
  float f = float(v);
  std::memcpy(p, &f, 4);
}

// Where a block keeps its main scale, and its second one (dmin/m) if any; -1: none.
struct ScaleAt {
  int d, m;
};
ScaleAt scale_at(GGMLType t) {
  switch (t) {
    case GGMLType::Q4_1:
    case GGMLType::Q5_1:
    case GGMLType::Q4_K:
    case GGMLType::Q5_K:
      return {0, 2};
    case GGMLType::Q2_K:
      return {80, 82};
    case GGMLType::Q3_K:
      return {108, -1};
    case GGMLType::Q6_K:
      return {208, -1};
    default:
      return {0, -1};  // Q4_0 Q5_0 Q8_0 Q8_1 Q8_K(f32) IQ4_NL IQ4_XS; MXFP4's byte 0 is e8m0
  }
}

// Base magnitude of d (and of dmin/m): |w| up to about 0.5..1 given each type's quant range.
double base_d(GGMLType t) {
  switch (t) {
    case GGMLType::Q4_0:
    case GGMLType::Q4_1:
      return 0.05;
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
      return 0.025;
    case GGMLType::Q2_K:
      return 0.02;
    case GGMLType::Q4_K:
      return 0.001;
    case GGMLType::Q5_K:
      return 0.0005;
    case GGMLType::Q6_K:
      return 0.0002;
    case GGMLType::IQ4_XS:
      return 0.0001;
    default:
      return 0.003;  // Q8_0 Q8_1 Q8_K Q3_K IQ4_NL
  }
}

}  // namespace

std::vector<GGMLType> supported_qtypes() {
  std::vector<GGMLType> out;
  for (uint32_t id = 0; id < 64; ++id) {
    auto t = static_cast<GGMLType>(id);
    bool ok = false;
    try {
      ok = ggml_type_supported(t);
    } catch (const std::exception&) {
    }
    if (ok) out.push_back(t);
  }
  return out;
}

std::vector<uint8_t> random_qblocks(GGMLType t, size_t rows, size_t cols, uint64_t seed) {
  const size_t be = ggml_block_size(t), bb = ggml_type_size(t);
  if (cols % be != 0)
    throw std::invalid_argument(std::string("random_qblocks: ") + ggml_type_name(t) + " rows must be whole blocks");
  const size_t nblocks = rows * (cols / be);
  std::vector<uint8_t> out(nblocks * bb);
  uint64_t s = seed * 0x2545f4914f6cdd1dull + uint64_t(t);
  for (size_t i = 0; i < out.size(); i += 8) {
    uint64_t r = splitmix(s);
    std::memcpy(out.data() + i, &r, std::min<size_t>(8, out.size() - i));
  }
  const ScaleAt at = scale_at(t);
  const double base = base_d(t);
  for (size_t b = 0; b < nblocks; ++b) {
    uint8_t* p = out.data() + b * bb;
    switch (t) {
      case GGMLType::MXFP4:
        p[0] = uint8_t(120 + splitmix(s) % 5);
        break;
      case GGMLType::Q8_K: {
        put_f32(p, base * unit(s));
        for (int g = 0; g < 16; ++g) {  // bsums: the 16 sums of 16 int8 quants
          int sum = 0;
          for (int j = 0; j < 16; ++j) sum += int8_t(p[4 + g * 16 + j]);
          const int16_t v = int16_t(sum);
          std::memcpy(p + 260 + 2 * g, &v, 2);
        }
        break;
      }
      case GGMLType::Q8_1: {
        const double d = double(f16_bits_to_f32(f32_to_f16_bits(float(base * unit(s)))));
        put_f16(p, d);
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += int8_t(p[4 + j]);
        put_f16(p + 2, d * sum);
        break;
      }
      default:
        put_f16(p + at.d, base * unit(s));
        // Q4_1/Q5_1's offset m of either sign; the k-quants' dmin positive (w = d*sc*q - dmin*m).
        if (at.m >= 0) {
          const bool signed_m = t == GGMLType::Q4_1 || t == GGMLType::Q5_1;
          put_f16(p + at.m, signed_m ? 0.8 * (unit(s) - 1.0) : base * unit(s));
        }
    }
  }
  return out;
}

void set_special_scales(GGMLType t, std::vector<uint8_t>& blocks, size_t rows, size_t cols) {
  if (rows < 2) return;
  const size_t bb = ggml_type_size(t), row_bytes = cols / ggml_block_size(t) * bb;
  uint8_t* r0 = blocks.data();
  uint8_t* r1 = blocks.data() + row_bytes;
  if (t == GGMLType::MXFP4) {
    r0[0] = 255;
    r1[0] = 0;
  } else if (t == GGMLType::Q8_K) {
    put_f32(r0, std::numeric_limits<double>::infinity());
    put_f32(r1, std::numeric_limits<double>::quiet_NaN());
  } else {
    const int d = scale_at(t).d;
    put_f16(r0 + d, std::numeric_limits<double>::infinity());
    put_f16(r1 + d, std::numeric_limits<double>::quiet_NaN());
  }
}

bool qtype_uses_q8_1_sum(GGMLType t) { return t == GGMLType::Q4_1 || t == GGMLType::Q5_1; }

std::vector<double> block_offsets(GGMLType t, const std::vector<uint8_t>& blocks, size_t rows, size_t cols) {
  const size_t bb = ggml_type_size(t), nb = rows * (cols / ggml_block_size(t));
  std::vector<double> out(nb, 0.0);
  if (!qtype_uses_q8_1_sum(t)) return out;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* p = blocks.data() + b * bb + 2;
    out[b] = std::abs(double(f16_bits_to_f32(uint16_t(p[0] | (p[1] << 8)))));
  }
  return out;
}

}  // namespace wick::check

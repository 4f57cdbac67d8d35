#pragma once
// Philox-4x32-10 (Salmon et al., SC'11), written once for host and device. Element i of a
// random tensor with seed s is a pure function of (s, i), so every backend, thread count
// and launch shape gives the same numbers.
#include <cmath>
#include <cstdint>

#include "ops/capabilities.hpp"
#include "wick/config.hpp"

namespace wick {

struct Philox4 {
  uint32_t v[4];
};

WICK_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  *lo = uint32_t(p);
}

WICK_HD Philox4 philox4x32_10(uint64_t counter, uint64_t seed) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c0, &hi0, &lo0);
    philox_mulhilo(0xCD9E8D57u, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 53 random bits, from the first two words for element i.
WICK_HD double philox_uniform(uint64_t seed, uint64_t i) {
  Philox4 r = philox4x32_10(i, seed);
  uint64_t bits = (uint64_t(r.v[0]) << 21) ^ uint64_t(r.v[1] >> 11);
  return double(bits & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller from the words of element i (u1 in (0, 1], u2 in [0, 1)).
WICK_HD double philox_normal(uint64_t seed, uint64_t i) {
  Philox4 r = philox4x32_10(i, seed);
  double u1 = (double(r.v[0]) + 1.0) * (1.0 / 4294967296.0);
  double u2 = double(r.v[1]) * (1.0 / 4294967296.0);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// x * scale + shift, rounded twice as written: device compilers would otherwise fuse it
// into an FMA and the GPU's numbers would differ from the CPU's in the last bit.
WICK_HD double mul_add_unfused(double x, double scale, double shift) {
#if WICK_DEVICE_COMPILE
  return __dadd_rn(__dmul_rn(x, scale), shift);
#else
  return x * scale + shift;
#endif
}

}  // namespace wick

#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "wick/config.hpp"

namespace wick {

// The one list of dtypes, Candle's ten in Candle's order: X(Enum, name, C++ type, bytes, is_float).
// The enum, kAllDTypes, dtype_size/name/is_float, dtype_of, the dtype dispatch
// (src/ops/dtype_dispatch.hpp) and the parity harness's host decode follow from it. The C++
// types f16, bf16 and f8e4m3 are defined below; the list is only expanded after them where the
// type is used.
#define WICK_DTYPES(X)                 \
  X(U8, "u8", uint8_t, 1, false)       \
  X(U32, "u32", uint32_t, 4, false)    \
  X(I16, "i16", int16_t, 2, false)     \
  X(I32, "i32", int32_t, 4, false)     \
  X(I64, "i64", int64_t, 8, false)     \
  X(BF16, "bf16", bf16, 2, true)       \
  X(F16, "f16", f16, 2, true)          \
  X(F32, "f32", float, 4, true)        \
  X(F64, "f64", double, 8, true)       \
  X(F8E4M3, "f8e4m3", f8e4m3, 1, true)

#define WICK_DTYPE_ENUM(E, ...) E,
enum class DType : uint8_t { WICK_DTYPES(WICK_DTYPE_ENUM) };
#undef WICK_DTYPE_ENUM
#define WICK_DTYPE_VALUE(E, ...) DType::E,
constexpr DType kAllDTypes[] = {WICK_DTYPES(WICK_DTYPE_VALUE)};
#undef WICK_DTYPE_VALUE
constexpr int kNumDTypes = int(sizeof(kAllDTypes) / sizeof(kAllDTypes[0]));

#define WICK_DTYPE_SIZE(E, n, T, bytes, is_float) \
  case DType::E: return bytes;
#define WICK_DTYPE_NAME(E, n, T, bytes, is_float) \
  case DType::E: return n;
#define WICK_DTYPE_IS_FLOAT(E, n, T, bytes, is_float) \
  case DType::E: return is_float;
constexpr size_t dtype_size(DType d) {
  switch (d) { WICK_DTYPES(WICK_DTYPE_SIZE) }
  return 0;
}
// "u8", "f32", ... as Candle and safetensors-lowercase
constexpr const char* dtype_name(DType d) {
  switch (d) { WICK_DTYPES(WICK_DTYPE_NAME) }
  return "?";
}
// bf16 f16 f32 f64 f8e4m3
constexpr bool dtype_is_float(DType d) {
  switch (d) { WICK_DTYPES(WICK_DTYPE_IS_FLOAT) }
  return false;
}
#undef WICK_DTYPE_SIZE
#undef WICK_DTYPE_NAME
#undef WICK_DTYPE_IS_FLOAT
constexpr bool dtype_is_int(DType d) { return !dtype_is_float(d); }
DType dtype_from_name(const std::string& name);  // throws Error(DType) for unknown names

namespace detail {
WICK_HD uint32_t f32_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
}
WICK_HD float bits_f32(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
// Round-to-nearest-even of m >> shift (shift >= 1).
WICK_HD uint32_t rne_shift(uint32_t m, uint32_t shift) {
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1))) ? 1u : 0u);
}
}  // namespace detail

// IEEE binary16. Conversions are exact round-to-nearest-even in plain C++; the library's GPU
// code uses the hardware instructions instead (src/ops/numeric.hpp), which give the same bits
// for every non-NaN value (a NaN stays NaN but its payload may differ).
WICK_HD uint16_t f32_to_f16_bits(float f) {
  uint32_t x = detail::f32_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 (and inf) -> inf
  if (a >= 0x38800000u) {                                  // normal half
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return uint16_t(sign | ((r - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return uint16_t(sign);  // <= 2^-25 rounds to zero (tie to even)
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  return uint16_t(sign | detail::rne_shift(m, 126 - e));  // subnormal, unit 2^-24
}
WICK_HD float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return detail::bits_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = float(m) * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return detail::bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

// bfloat16: the top half of an f32, rounded to nearest even.
WICK_HD uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = detail::f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
WICK_HD float bf16_bits_to_f32(uint16_t b) { return detail::bits_f32(uint32_t(b) << 16); }

// OCP float8 E4M3FN: bias 7, no infinities, 0x7f/0xff are NaN, largest finite 448.
// Out of range follows PyTorch: magnitudes that round past 448 (>= 464, and inf) become NaN,
// keeping the sign; there is no saturation. NaN stays NaN.
WICK_HD uint8_t f32_to_f8e4m3_bits(float f) {
  uint32_t x = detail::f32_bits(f), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  if (a >= 0x43f00000u) return uint8_t(sign | 0x7fu);  // >= 480, inf, NaN
  if (a >= 0x3c800000u) {                              // normal: >= 2^-6
    uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
    return uint8_t(sign | ((r - 0x3c000000u) >> 20));  // may round up to 0x7f = NaN (464..480)
  }
  if (a <= 0x3a800000u) return uint8_t(sign);  // <= 2^-10 rounds to zero
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  return uint8_t(sign | detail::rne_shift(m, 141 - e));  // subnormal, unit 2^-9
}
WICK_HD float f8e4m3_bits_to_f32(uint8_t b) {
  uint32_t sign = uint32_t(b & 0x80u) << 24, e = (b >> 3) & 0xfu, m = b & 7u;
  if ((b & 0x7fu) == 0x7fu) return detail::bits_f32(sign | 0x7fc00000u);
  if (e == 0) {
    float v = float(m) * 0.001953125f;  // m * 2^-9
    return sign ? -v : v;
  }
  return detail::bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

// Storage types. Arithmetic on them goes through float (see src/ops/numeric.hpp).
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  WICK_HD explicit f16(float f) : bits(f32_to_f16_bits(f)) {}
  WICK_HD static f16 from_bits(uint16_t b) { f16 h; h.bits = b; return h; }
  WICK_HD explicit operator float() const { return f16_bits_to_f32(bits); }
};
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  WICK_HD explicit bf16(float f) : bits(f32_to_bf16_bits(f)) {}
  WICK_HD static bf16 from_bits(uint16_t b) { bf16 h; h.bits = b; return h; }
  WICK_HD explicit operator float() const { return bf16_bits_to_f32(bits); }
};
struct f8e4m3 {
  uint8_t bits = 0;
  f8e4m3() = default;
  WICK_HD explicit f8e4m3(float f) : bits(f32_to_f8e4m3_bits(f)) {}
  WICK_HD static f8e4m3 from_bits(uint8_t b) { f8e4m3 h; h.bits = b; return h; }
  WICK_HD explicit operator float() const { return f8e4m3_bits_to_f32(bits); }
};

// C++ type <-> DType.
template <class T> struct dtype_of;
#define WICK_DTYPE_OF(E, n, T, ...) \
  template <> struct dtype_of<T> { static constexpr DType value = DType::E; };
WICK_DTYPES(WICK_DTYPE_OF)
#undef WICK_DTYPE_OF
#define WICK_DTYPE_BYTES(E, n, T, bytes, ...) static_assert(sizeof(T) == bytes, "dtype list: bytes of " n);
WICK_DTYPES(WICK_DTYPE_BYTES)
#undef WICK_DTYPE_BYTES
template <class T> constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace wick

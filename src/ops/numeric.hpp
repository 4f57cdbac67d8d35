#pragma once
// Numeric building blocks shared by every backend (host and device): the compute type of
// each storage type, and the casts between the ten dtypes.
#include <cstdint>
#include <type_traits>

#include "ops/capabilities.hpp"
#include "wick/dtype.hpp"

namespace wick {

template <class T> struct is_small_float : std::false_type {};
template <> struct is_small_float<f16> : std::true_type {};
template <> struct is_small_float<bf16> : std::true_type {};
template <> struct is_small_float<f8e4m3> : std::true_type {};
template <class T> constexpr bool is_small_float_v = is_small_float<T>::value;
template <class T> constexpr bool is_float_v = is_small_float_v<T> || std::is_floating_point_v<T>;

// Arithmetic happens in compute_t: f32 for the 1- and 2-byte floats, the type itself otherwise.
template <class T> using compute_t = std::conditional_t<is_small_float_v<T>, float, T>;
// Accumulators for sums: f32 for small floats, f64 for f64, the type itself for integers
// (integer sums wrap like the type, as Candle's).
template <class T> using acc_t = compute_t<T>;

// The small-float conversions of all library code (never the storage types' own operators,
// whose plain-C++ software path would cost ~15 integer instructions per element on a GPU):
// the hardware instruction where the device has one, the exact software RNE of wick/dtype.hpp
// elsewhere (the CPU). Both give the same bits for every non-NaN value.
WICK_HD float to_f32(f16 h) {
#if WICK_HW_F16
  return hw::f16_bits_to_f32(h.bits);
#else
  return f16_bits_to_f32(h.bits);
#endif
}
WICK_HD float to_f32(bf16 h) { return bf16_bits_to_f32(h.bits); }  // a shift: no instruction needed
WICK_HD float to_f32(f8e4m3 h) { return f8e4m3_bits_to_f32(h.bits); }
template <class T> WICK_HD T from_f32(float f) {
  static_assert(is_small_float_v<T>, "from_f32 rounds f32 to f16, bf16 or f8e4m3");
  if constexpr (std::is_same_v<T, f16>) {
#if WICK_HW_F16
    return f16::from_bits(hw::f32_to_f16_bits(f));
#else
    return f16::from_bits(f32_to_f16_bits(f));
#endif
  } else if constexpr (std::is_same_v<T, bf16>) {
#if WICK_HAS_HW_BF16
    return bf16::from_bits(hw::f32_to_bf16_bits(f));
#else
    return bf16::from_bits(f32_to_bf16_bits(f));
#endif
  } else {
    return f8e4m3::from_bits(f32_to_f8e4m3_bits(f));
  }
}

template <class T> WICK_HD compute_t<T> to_compute(T x) {
  if constexpr (is_small_float_v<T>) return to_f32(x);
  else return x;
}

// Float -> integer follows Rust's `as` (what Candle does): truncate toward zero, saturate at
// the type's bounds, NaN -> 0. Integer -> integer wraps (two's complement).
template <class To> WICK_HD To saturating_float_to_int(double d) {
  constexpr int kBits = int(sizeof(To) * 8);
  if (!(d == d)) return To(0);
  if constexpr (std::is_signed_v<To>) {
    const double lim = double(uint64_t(1) << (kBits - 1));  // 2^(bits-1), exact in f64
    if (d >= lim) return To(~(uint64_t(1) << (kBits - 1)));
    if (d <= -lim) return To(uint64_t(1) << (kBits - 1));
  } else {
    const double lim = kBits == 64 ? 18446744073709551616.0 : double(uint64_t(1) << kBits);
    if (d >= lim) return To(~To(0));
    if (d <= 0.0) return To(0);
  }
  return To(d);  // in range: truncation toward zero
}

// f64 -> f32 rounding to odd: a later round-to-nearest-even to f16/bf16/f8 of the result
// equals a single rounding of the f64 (24 bits >= target bits + 2).
WICK_HD float f64_to_f32_round_odd(double x) {
  float f = float(x);
  double back = double(f);
  if (back == x || f != f) return f;
  uint32_t u = detail::f32_bits(f);
  if ((u & 1u) == 0) u = (back < 0 ? -back : back) > (x < 0 ? -x : x) ? u - 1 : u + 1;
  return detail::bits_f32(u);
}

// The one cast between any two of the ten types.
template <class To, class From> WICK_HD To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_small_float_v<To>) {
    if constexpr (is_small_float_v<From>) return from_f32<To>(to_f32(x));
    else if constexpr (std::is_same_v<From, float>) return from_f32<To>(x);
    else return from_f32<To>(f64_to_f32_round_odd(double(x)));  // f64 and integers round once
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (is_small_float_v<From>) return To(to_f32(x));
    else return To(x);
  } else {  // integer destination
    if constexpr (is_small_float_v<From>) return saturating_float_to_int<To>(double(to_f32(x)));
    else if constexpr (std::is_floating_point_v<From>) return saturating_float_to_int<To>(double(x));
    else return To(x);  // integer -> integer wraps
  }
}

// a op b rounded on its own, never contracted with a neighbouring add or multiply into an FMA
// (resampling weights and the GGUF dequantizers must give the same bits on host and device).
#if defined(__clang__)
#define WICK_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define WICK_NO_CONTRACT
#endif
WICK_HD float mul_rn(float a, float b) {
#if WICK_DEVICE_CUDA
  return __fmul_rn(a, b);
#else
  WICK_NO_CONTRACT
  return a * b;
#endif
}
WICK_HD double mul_rn(double a, double b) {
#if WICK_DEVICE_CUDA
  return __dmul_rn(a, b);
#else
  WICK_NO_CONTRACT
  return a * b;
#endif
}
WICK_HD float add_rn(float a, float b) {
#if WICK_DEVICE_CUDA
  return __fadd_rn(a, b);
#else
  WICK_NO_CONTRACT
  return a + b;
#endif
}
WICK_HD float sub_rn(float a, float b) {
#if WICK_DEVICE_CUDA
  return __fsub_rn(a, b);
#else
  WICK_NO_CONTRACT
  return a - b;
#endif
}

}  // namespace wick

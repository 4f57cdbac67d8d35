#pragma once
// The math of every unary element-wise op, written once for the CPU loops and GPU kernels.
// Each functor takes and returns the compute type (float, double, or an integer type):
// backends convert 1- and 2-byte floats to f32 before and round once after.
// Whether an op is defined on integers is its dtype class in op_table.hpp.
#include <math.h>

#include <cstdint>
#include <type_traits>

#include "wick/config.hpp"

namespace wick {

// Float math under one name per function for f32 and f64; the global C functions exist
// on the host and in CUDA/HIP device code alike.
namespace fmath {
#define WICK_FMATH1(name)                                          \
  WICK_HD float name(float x) { return ::name##f(x); }             \
  WICK_HD double name(double x) { return ::name(x); }
WICK_FMATH1(exp)
WICK_FMATH1(expm1)
WICK_FMATH1(log)
WICK_FMATH1(sin)
WICK_FMATH1(cos)
WICK_FMATH1(tanh)
WICK_FMATH1(sqrt)
WICK_FMATH1(fabs)
WICK_FMATH1(erf)
WICK_FMATH1(ceil)
WICK_FMATH1(floor)
WICK_FMATH1(round)  // half away from zero
#undef WICK_FMATH1
WICK_HD float pow(float x, float e) { return ::powf(x, e); }
WICK_HD double pow(double x, double e) { return ::pow(x, e); }
}  // namespace fmath

// Wrapping integer arithmetic: done in an unsigned type of at least 32 bits so that neither
// signed overflow nor promotion to int (u16*u16) can be undefined behaviour.
template <class T>
using wrap_uint_t = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
template <class T> WICK_HD T wrap_add(T a, T b) { return T(wrap_uint_t<T>(a) + wrap_uint_t<T>(b)); }
template <class T> WICK_HD T wrap_sub(T a, T b) { return T(wrap_uint_t<T>(a) - wrap_uint_t<T>(b)); }
template <class T> WICK_HD T wrap_mul(T a, T b) { return T(wrap_uint_t<T>(a) * wrap_uint_t<T>(b)); }
template <class T> WICK_HD T wrap_neg(T a) { return T(wrap_uint_t<T>(0) - wrap_uint_t<T>(a)); }

namespace uop {

struct Exp {
  template <class T> WICK_HD T operator()(T x) const { return fmath::exp(x); }
};
struct Log {
  template <class T> WICK_HD T operator()(T x) const { return fmath::log(x); }
};
struct Sin {
  template <class T> WICK_HD T operator()(T x) const { return fmath::sin(x); }
};
struct Cos {
  template <class T> WICK_HD T operator()(T x) const { return fmath::cos(x); }
};
struct Tanh {
  template <class T> WICK_HD T operator()(T x) const { return fmath::tanh(x); }
};
struct Neg {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return -x;
    else return wrap_neg(x);
  }
};
struct Recip {
  template <class T> WICK_HD T operator()(T x) const { return T(1) / x; }
};
struct Sqr {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x * x;
    else return wrap_mul(x, x);
  }
};
struct Sqrt {
  template <class T> WICK_HD T operator()(T x) const { return fmath::sqrt(x); }
};
struct Abs {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return fmath::fabs(x);
    else if constexpr (std::is_unsigned_v<T>) return x;
    else return x < 0 ? wrap_neg(x) : x;  // abs(INT_MIN) wraps to INT_MIN
  }
};
// PyTorch gelu(approximate="tanh") and Candle's gelu.
struct Gelu {
  template <class T> WICK_HD T operator()(T x) const {
    const T k = T(0.7978845608028654);  // sqrt(2/pi)
    return T(0.5) * x * (T(1) + fmath::tanh(k * x * (T(1) + T(0.044715) * x * x)));
  }
};
struct GeluErf {
  template <class T> WICK_HD T operator()(T x) const {
    return T(0.5) * x * (T(1) + fmath::erf(x * T(0.7071067811865476)));
  }
};
struct Erf {
  template <class T> WICK_HD T operator()(T x) const { return fmath::erf(x); }
};
// NaN stays NaN (relu(x) == maximum(x, 0), which propagates NaN).
struct Relu {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else return x < T(0) ? T(0) : x;
  }
};
// Stable for large |x|: exp(-|x|) never overflows.
struct Sigmoid {
  template <class T> WICK_HD T operator()(T x) const {
    T z = fmath::exp(-fmath::fabs(x));
    T s = T(1) / (T(1) + z);
    return x >= T(0) ? s : z * s;
  }
};
struct Silu {
  template <class T> WICK_HD T operator()(T x) const { return x * Sigmoid{}(x); }
};
// Integers are already whole: ceil/floor/round are the identity.
struct Ceil {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return fmath::ceil(x);
    else return x;
  }
};
struct Floor {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return fmath::floor(x);
    else return x;
  }
};
struct Round {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return fmath::round(x);
    else return x;
  }
};
// sign(NaN) = NaN and sign(+-0) = +-0: returning x itself when it is neither > 0 nor < 0.
struct Sign {
  template <class T> WICK_HD T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x > 0 ? T(1) : T(0);
    else return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
  }
};

// Parametrised ops. mul/add/e/alpha are already in the compute type.
template <class T> struct Affine {
  T mul, add;
  WICK_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x * mul + add;
    else return wrap_add(wrap_mul(x, mul), add);
  }
};
template <class T> struct Powf {
  T e;
  WICK_HD T operator()(T x) const { return fmath::pow(x, e); }
};
// x for x > 0, alpha * (exp(x) - 1) otherwise; expm1 keeps small negative x accurate.
template <class T> struct Elu {
  T alpha;
  WICK_HD T operator()(T x) const { return x > T(0) ? x : alpha * fmath::expm1(x); }
};

}  // namespace uop
}  // namespace wick

// Element-wise composites of Candle's Tensor API built from other Tensor methods, so every
// backend gets them: round_to.
#include <cmath>
#include <string>

#include "core/checks.hpp"

namespace wick {

// Candle's (x * 10^d).round() * (1 / 10^d), in the compute type (f32 for the half types, which
// round once per step). round() is half away from zero.
Tensor Tensor::round_to(int decimals) const {
  check_defined(*this, "round_to");
  if (dtype_is_int(dtype_)) {
    // Candle multiplies by 10^d cast to the integer type (0 for d < 0, then 0.01 -> 0 for d > 0)
    // and returns zeros; an integer already has no decimals, so d >= 0 leaves it unchanged.
    if (decimals >= 0) return copy();
    throw Error(ErrorKind::DType, "round_to: decimals " + std::to_string(decimals) + " on the integer tensor " +
                                      describe(*this) + " would round to a multiple of 10^" +
                                      std::to_string(-decimals) +
                                      ", which wick does not do on integers; convert with to_dtype(DType::F64) "
                                      "first (decimals >= 0 leaves integers unchanged)");
  }
  const double mult = std::pow(10.0, double(decimals));
  // The factors are used in the compute type: f64 for f64, f32 for the rest.
  const bool f64 = dtype_ == DType::F64;
  const double m = f64 ? mult : double(float(mult)), inv = f64 ? 1.0 / mult : double(float(1.0 / mult));
  if (!std::isfinite(m) || m == 0 || !std::isfinite(inv) || inv == 0)
    throw Error(ErrorKind::Argument, "round_to: 10^" + std::to_string(decimals) + " is out of range for " +
                                         std::string(dtype_name(dtype_)) + " arithmetic (" + describe(*this) +
                                         "); use |decimals| <= " + (f64 ? "308" : "38"));
  return affine(mult, 0.0).round().affine(1.0 / mult, 0.0);
}

}  // namespace wick

#pragma once
// Runs f with a value of the C++ type of a runtime DType: f(T{}) for T in the ten types.
// Host-only (throws); shared by the core and every backend, .cpp and .cu files alike.
#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/numeric.hpp"
#include "wick/dtype.hpp"
#include "wick/error.hpp"

namespace wick {

template <class F> decltype(auto) dispatch_dtype(DType d, F&& f) {
  switch (d) {  // one case per row of the dtype list (WICK_DTYPES, wick/dtype.hpp)
#define WICK_DTYPE_CASE(E, n, T, ...) \
  case DType::E: return f(T{});
    WICK_DTYPES(WICK_DTYPE_CASE)
#undef WICK_DTYPE_CASE
  }
  throw Error(ErrorKind::Internal, "dispatch_dtype: unknown dtype");
}

// Index dtypes accepted by index_select/gather/scatter/index_add.
template <class F> decltype(auto) dispatch_index_dtype(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::U8: return f(uint8_t{});
    case DType::U32: return f(uint32_t{});
    case DType::I16: return f(int16_t{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    default:
      throw Error(ErrorKind::DType, std::string(op) + ": indices must be u8, u32, i16, i32 or i64, got " +
                                        dtype_name(d) + "; convert them with to_dtype(DType::U32)");
  }
}

// The error of a float-only op (exp, powf, elu, softmax, ...) called on an integer dtype.
[[noreturn]] inline void float_only(const char* op, DType d) {
  throw Error(ErrorKind::DType, std::string(op) + ": not defined for integer dtype " + dtype_name(d) +
                                    "; convert with to_dtype(DType::F32) first");
}

// Calls f(T{}) for the float dtypes; integer dtypes are an Error(DType) naming op.
template <class F> decltype(auto) dispatch_float(DType d, const char* op, F&& f) {
  using R = std::invoke_result_t<F&, float>;
  return dispatch_dtype(d, [&](auto tag) -> R {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) return f(tag);
    else float_only(op, d);
  });
}

}  // namespace wick

#pragma once
// Runs f with a value of the C++ type of a runtime DType: f(T{}) for T in the ten types.
#include <cstdint>

#include "wick/dtype.hpp"
#include "wick/error.hpp"

namespace wick {

template <class F> decltype(auto) dispatch_dtype(DType d, F&& f) {
  switch (d) {
    case DType::U8: return f(uint8_t{});
    case DType::U32: return f(uint32_t{});
    case DType::I16: return f(int16_t{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    case DType::BF16: return f(bf16{});
    case DType::F16: return f(f16{});
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::F8E4M3: return f(f8e4m3{});
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

}  // namespace wick

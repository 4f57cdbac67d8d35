#include "wick/dtype.hpp"

#include "wick/error.hpp"

namespace wick {

size_t dtype_size(DType d) {
  switch (d) {
    case DType::U8: case DType::F8E4M3: return 1;
    case DType::I16: case DType::BF16: case DType::F16: return 2;
    case DType::U32: case DType::I32: case DType::F32: return 4;
    case DType::I64: case DType::F64: return 8;
  }
  return 0;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::U8: return "u8";
    case DType::U32: return "u32";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F8E4M3: return "f8e4m3";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType d : kAllDTypes)
    if (name == dtype_name(d)) return d;
  throw Error(ErrorKind::DType, "unknown dtype '" + name +
                                    "'; use one of u8 u32 i16 i32 i64 bf16 f16 f32 f64 f8e4m3");
}

bool dtype_is_float(DType d) {
  return d == DType::BF16 || d == DType::F16 || d == DType::F32 || d == DType::F64 || d == DType::F8E4M3;
}

}  // namespace wick

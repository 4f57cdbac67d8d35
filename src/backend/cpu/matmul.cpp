// Placeholder until this family lands: every entry reports that it is missing.
#include "backend/cpu/cpu_storage.hpp"

namespace wick::cpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the cpu backend yet");
}

StoragePtr CpuStorage::matmul(const Storage& rhs, const MatmulDims& d, const Layout& lhs_l, const Layout& rhs_l) const { missing("matmul"); }

}  // namespace wick::cpu

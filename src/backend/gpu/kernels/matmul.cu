// Placeholder until this family lands on the GPU: every entry reports that it is missing.
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the gpu backend yet");
}

StoragePtr GpuStorage::matmul(const Storage& /*rhs*/, const MatmulDims& /*d*/, const Layout& /*lhs_l*/, const Layout& /*rhs_l*/) const { missing("matmul"); }

}  // namespace wick::gpu

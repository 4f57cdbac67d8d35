// Placeholder until this family lands on the GPU: every entry reports that it is missing.
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the gpu backend yet");
}

StoragePtr GpuStorage::reduce(ReduceOp /*op*/, const Layout& /*l*/, const std::vector<size_t>& /*dims*/) const { missing("reduce"); }
StoragePtr GpuStorage::cumsum(const Layout& /*l*/, size_t /*dim*/) const { missing("cumsum"); }
StoragePtr GpuStorage::arg_sort(const Layout& /*l*/, bool /*ascending*/) const { missing("arg_sort"); }

}  // namespace wick::gpu

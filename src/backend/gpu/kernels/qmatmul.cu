// GPU quantized matmul (issue 8 in progress: being written; the entry exists so the contract
// compiles).
#include <string>

#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

StoragePtr GpuStorage::qmatmul(const QuantDims& q, const Storage&, const Layout&) const {
  throw Error(ErrorKind::Unsupported, std::string("qmatmul: GPU kernels for ") + ggml_type_name(q.type) +
                                          " are not built yet");
}

}  // namespace wick::gpu

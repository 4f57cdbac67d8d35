// GPU quantized blocks (issue 8 in progress: being written; the entries exist so the contract
// compiles).
#include <string>

#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

StoragePtr GpuStorage::dequantize(const QuantDims& q, DType) const {
  throw Error(ErrorKind::Unsupported, std::string("dequantize: GPU kernels for ") + ggml_type_name(q.type) +
                                          " are not built yet");
}
StoragePtr GpuStorage::quantize(const Layout&, const QuantDims& q) const {
  throw Error(ErrorKind::Unsupported, std::string("quantize: GPU kernels for ") + ggml_type_name(q.type) +
                                          " are not built yet");
}
StoragePtr GpuStorage::qembedding(const QuantDims& q, const Storage&, const Layout&, DType) const {
  throw Error(ErrorKind::Unsupported, std::string("embedding: GPU kernels for ") + ggml_type_name(q.type) +
                                          " are not built yet");
}

}  // namespace wick::gpu

// CPU quantizers (issue 8 in progress: being written; the storage entry exists so the contract
// compiles).
#include "backend/cpu/cpu_storage.hpp"

namespace wick::cpu {

StoragePtr CpuStorage::quantize(const Layout&, const QuantDims& q) const {
  throw Error(ErrorKind::Unsupported, std::string("quantize: the CPU quantizer for ") + ggml_type_name(q.type) +
                                          " is not built yet");
}

}  // namespace wick::cpu

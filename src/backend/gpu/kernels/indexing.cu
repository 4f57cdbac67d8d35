// Placeholder until this family lands on the GPU: every entry reports that it is missing.
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the gpu backend yet");
}

StoragePtr GpuStorage::index_select(const Storage& /*ids*/, const Layout& /*l*/, const Layout& /*ids_l*/, size_t /*dim*/) const { missing("index_select"); }
StoragePtr GpuStorage::gather(const Layout& /*l*/, const Storage& /*ids*/, const Layout& /*ids_l*/, size_t /*dim*/) const { missing("gather"); }
void GpuStorage::scatter_set(const Layout& /*l*/, const Storage& /*ids*/, const Layout& /*ids_l*/, const Storage& /*src*/, const Layout& /*src_l*/, size_t /*dim*/) { missing("scatter_set"); }
void GpuStorage::scatter_add_set(const Layout& /*l*/, const Storage& /*ids*/, const Layout& /*ids_l*/, const Storage& /*src*/, const Layout& /*src_l*/, size_t /*dim*/) { missing("scatter_add_set"); }
StoragePtr GpuStorage::index_add(const Layout& /*l*/, const Storage& /*ids*/, const Layout& /*ids_l*/, const Storage& /*src*/, const Layout& /*src_l*/, size_t /*dim*/) const { missing("index_add"); }

}  // namespace wick::gpu

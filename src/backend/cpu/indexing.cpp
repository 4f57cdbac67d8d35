// Placeholder until this family lands: every entry reports that it is missing.
#include "backend/cpu/cpu_storage.hpp"

namespace wick::cpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the cpu backend yet");
}

StoragePtr CpuStorage::index_select(const Storage& ids, const Layout& l, const Layout& ids_l, size_t dim) const { missing("index_select"); }
StoragePtr CpuStorage::gather(const Layout& l, const Storage& ids, const Layout& ids_l, size_t dim) const { missing("gather"); }
void CpuStorage::scatter_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src, const Layout& src_l, size_t dim) { missing("scatter_set"); }
void CpuStorage::scatter_add_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src, const Layout& src_l, size_t dim) { missing("scatter_add_set"); }
StoragePtr CpuStorage::index_add(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src, const Layout& src_l, size_t dim) const { missing("index_add"); }

}  // namespace wick::cpu

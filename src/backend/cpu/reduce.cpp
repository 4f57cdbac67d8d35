// Placeholder until this family lands: every entry reports that it is missing.
#include "backend/cpu/cpu_storage.hpp"

namespace wick::cpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the cpu backend yet");
}

StoragePtr CpuStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const { missing("reduce"); }
StoragePtr CpuStorage::cumsum(const Layout& l, size_t dim) const { missing("cumsum"); }
StoragePtr CpuStorage::arg_sort(const Layout& l, bool ascending) const { missing("arg_sort"); }

}  // namespace wick::cpu

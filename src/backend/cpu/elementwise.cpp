// Placeholder until this family lands: every entry reports that it is missing.
#include "backend/cpu/cpu_storage.hpp"

namespace wick::cpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the cpu backend yet");
}

StoragePtr CpuStorage::affine(const Layout& l, double mul, double add) const { missing("affine"); }
StoragePtr CpuStorage::powf(const Layout& l, double e) const { missing("powf"); }
StoragePtr CpuStorage::elu(const Layout& l, double alpha) const { missing("elu"); }
StoragePtr CpuStorage::unary(UnaryOp op, const Layout& l) const { missing("unary"); }
StoragePtr CpuStorage::binary(BinaryOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const { missing("binary"); }
StoragePtr CpuStorage::cmp(CmpOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const { missing("cmp"); }
StoragePtr CpuStorage::where_cond(const Layout& l, const Storage& t, const Layout& t_l, const Storage& f, const Layout& f_l) const { missing("where_cond"); }

}  // namespace wick::cpu

// Placeholder until this family lands on the GPU: every entry reports that it is missing.
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the gpu backend yet");
}

StoragePtr GpuStorage::affine(const Layout& /*l*/, double /*mul*/, double /*add*/) const { missing("affine"); }
StoragePtr GpuStorage::powf(const Layout& /*l*/, double /*e*/) const { missing("powf"); }
StoragePtr GpuStorage::elu(const Layout& /*l*/, double /*alpha*/) const { missing("elu"); }
StoragePtr GpuStorage::unary(UnaryOp /*op*/, const Layout& /*l*/) const { missing("unary"); }
StoragePtr GpuStorage::binary(BinaryOp /*op*/, const Storage& /*rhs*/, const Layout& /*lhs_l*/, const Layout& /*rhs_l*/) const { missing("binary"); }
StoragePtr GpuStorage::cmp(CmpOp /*op*/, const Storage& /*rhs*/, const Layout& /*lhs_l*/, const Layout& /*rhs_l*/) const { missing("cmp"); }
StoragePtr GpuStorage::where_cond(const Layout& /*l*/, const Storage& /*t*/, const Layout& /*t_l*/, const Storage& /*f*/, const Layout& /*f_l*/) const { missing("where_cond"); }

}  // namespace wick::gpu

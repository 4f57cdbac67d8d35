// Placeholder until this family lands on the GPU: every entry reports that it is missing.
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

[[noreturn]] static void missing(const char* op) {
  throw Error(ErrorKind::Unsupported, std::string(op) + ": not implemented on the gpu backend yet");
}

StoragePtr GpuStorage::conv1d(const Layout& /*l*/, const Storage& /*kernel*/, const Layout& /*kernel_l*/, const Conv1dShape& /*s*/) const { missing("conv1d"); }
StoragePtr GpuStorage::conv_transpose1d(const Layout& /*l*/, const Storage& /*kernel*/, const Layout& /*kernel_l*/, const Conv1dShape& /*s*/) const { missing("conv_transpose1d"); }
StoragePtr GpuStorage::conv2d(const Layout& /*l*/, const Storage& /*kernel*/, const Layout& /*kernel_l*/, const Conv2dShape& /*s*/) const { missing("conv2d"); }
StoragePtr GpuStorage::conv_transpose2d(const Layout& /*l*/, const Storage& /*kernel*/, const Layout& /*kernel_l*/, const Conv2dShape& /*s*/) const { missing("conv_transpose2d"); }
StoragePtr GpuStorage::avg_pool2d(const Layout& /*l*/, size_t /*kh*/, size_t /*kw*/, size_t /*sh*/, size_t /*sw*/) const { missing("avg_pool2d"); }
StoragePtr GpuStorage::max_pool2d(const Layout& /*l*/, size_t /*kh*/, size_t /*kw*/, size_t /*sh*/, size_t /*sw*/) const { missing("max_pool2d"); }
StoragePtr GpuStorage::upsample_nearest1d(const Layout& /*l*/, size_t /*out_l*/) const { missing("upsample_nearest1d"); }
StoragePtr GpuStorage::upsample_nearest2d(const Layout& /*l*/, size_t /*out_h*/, size_t /*out_w*/) const { missing("upsample_nearest2d"); }
StoragePtr GpuStorage::upsample_bilinear2d(const Layout& /*l*/, size_t /*out_h*/, size_t /*out_w*/, bool /*align_corners*/, std::optional<double> /*scale_h*/, std::optional<double> /*scale_w*/) const { missing("upsample_bilinear2d"); }

}  // namespace wick::gpu

#pragma once
// The backends the core reaches, chosen at link time (as MLX's backend/no_gpu): the CPU backend
// always; for the GPU, src/backend/gpu in a WICK_GPU=cuda|rocm build or src/backend/no_gpu in a
// CPU-only one (CMake compiles exactly one of the two). The core calls backends only through
// this header and storage.hpp, so it includes no backend header and has no #if on the GPU.
#include <optional>
#include <string>

#include "backend/storage.hpp"

namespace wick::registry {

Backend& cpu_backend();  // src/backend/cpu/registry.cpp
// A CPU storage over read-only memory kept alive by `owner` (a file mapping), without a copy.
StoragePtr cpu_borrow(const void* data, size_t numel, DType dtype, std::shared_ptr<const void> owner);
int cpu_threads();  // threads the CPU backend runs an op on (OMP_NUM_THREADS or the affinity mask)

// The GPU backend linked into this build: Cuda or Rocm, or none (src/backend/no_gpu).
std::optional<DeviceKind> gpu_kind();
int gpu_device_count();                // 0 when no driver or no device (always 0 without a GPU backend)
std::string gpu_unavailable_reason();  // why gpu_device_count() is 0, for `wick info`
Backend& gpu_backend(int ordinal);     // opens the device; Error(Device) naming the reason
DeviceInfo gpu_device_info(int ordinal);
MemoryStats gpu_memory_stats(int ordinal);
void gpu_empty_cache(int ordinal);
void gpu_reset_peak_memory(int ordinal);

}  // namespace wick::registry

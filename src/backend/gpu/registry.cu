// The GPU half of backend/registry.hpp in a WICK_GPU=cuda|rocm build.
#include "backend/gpu/allocator.hpp"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/registry.hpp"

namespace wick::registry {

std::optional<DeviceKind> gpu_kind() { return gpu::built_kind(); }
int gpu_device_count() { return gpu::device_count(); }
std::string gpu_unavailable_reason() { return gpu::unavailable_reason(); }
Backend& gpu_backend(int ordinal) { return gpu::backend(ordinal); }
DeviceInfo gpu_device_info(int ordinal) { return gpu::device_info(ordinal); }
MemoryStats gpu_memory_stats(int ordinal) { return gpu::memory_stats(ordinal); }
void gpu_empty_cache(int ordinal) { gpu::empty_cache(ordinal); }
void gpu_reset_peak_memory(int ordinal) { gpu::reset_peak_memory(ordinal); }

}  // namespace wick::registry

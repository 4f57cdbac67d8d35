// The GPU half of backend/registry.hpp in a build without a GPU backend (WICK_GPU=off): no
// kind, no devices. The core asks gpu_kind() first, so the entries that need a device are
// reached only by a caller that skipped that check; they say what the build lacks.
#include "backend/registry.hpp"

#include "wick/error.hpp"

namespace wick::registry {

namespace {
[[noreturn]] void no_gpu(const char* what) {
  throw Error(ErrorKind::Device, std::string(what) +
                                     ": this build of wick has no GPU backend; rebuild with -DWICK_GPU=cuda or "
                                     "-DWICK_GPU=rocm");
}
}  // namespace

std::optional<DeviceKind> gpu_kind() { return std::nullopt; }
int gpu_device_count() { return 0; }
std::string gpu_unavailable_reason() { return "this build of wick has no GPU backend"; }
Backend& gpu_backend(int) { no_gpu("gpu_backend"); }
DeviceInfo gpu_device_info(int) { no_gpu("device_info"); }
MemoryStats gpu_memory_stats(int) { no_gpu("memory_stats"); }
void gpu_empty_cache(int) {}  // nothing is cached
void gpu_reset_peak_memory(int) {}

}  // namespace wick::registry

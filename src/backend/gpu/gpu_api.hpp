#pragma once
// What the core sees of the GPU backend: no vendor headers here.
#include <string>

#include "backend/storage.hpp"

namespace wick::gpu {

DeviceKind built_kind();           // Cuda or Rocm
int device_count();                // 0 when no driver or no device
std::string unavailable_reason();  // why device_count() is 0, for `wick info`
Backend& backend(int ordinal);     // opens the device; Error(Device) naming the reason
DeviceInfo device_info(int ordinal);
MemoryStats memory_stats(int ordinal);
void empty_cache(int ordinal);
std::string built_targets();       // e.g. "80;90" or "gfx90a;gfx942"

}  // namespace wick::gpu

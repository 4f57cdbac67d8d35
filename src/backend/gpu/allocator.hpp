#pragma once
// The caching allocator of allocator.cu, as device.cu creates and drains it. Kernels allocate
// through device_alloc / Scratch (gpu_storage.hpp).
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

Allocator* make_allocator(int ordinal);  // one per opened device
void release_all_cached(Allocator* a);   // frees every cached block (exit handler)
void reset_peak_memory(int ordinal);     // MemoryStats::peak restarts from the bytes in use now

}  // namespace wick::gpu

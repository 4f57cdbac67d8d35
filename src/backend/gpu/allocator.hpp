#pragma once
// The caching allocator of allocator.cu, as device.cu creates and drains it. Kernels allocate
// through device_alloc / Scratch (gpu_storage.hpp).
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

Allocator* make_allocator(int ordinal);  // one per opened device
void release_all_cached(Allocator* a);   // frees every cached block (exit handler)
void reset_peak_memory(int ordinal);     // MemoryStats::peak restarts from the bytes in use now

// Graph capture (graph.cu): while a pool is open, every block handed out belongs to it, and a freed
// block of a live pool goes back to that pool, not to the shared cache: a recorded graph writes its
// intermediates at fixed addresses on every replay, so nothing else may be given them until the
// graph is gone (then free_pool returns them to the cache).
int open_pool(int ordinal);              // returns the pool id; allocations go to it until close_pool
void close_pool(int ordinal);
void free_pool(int ordinal, int pool);

}  // namespace wick::gpu

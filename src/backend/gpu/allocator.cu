// A caching allocator per device: freed blocks are kept by size and reused. All wick work on
// a device runs on one stream, so a block freed after a kernel was queued can be handed to
// later work on that stream without waiting.
#include "backend/gpu/allocator.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

class Allocator {
 public:
  explicit Allocator(int ordinal) : ordinal_(ordinal) {}

  void* allocate(size_t bytes) {
    const size_t size = round_up(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    // best fit among cached blocks no more than twice the request (bounded waste)
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      void* p = it->second;
      cached_ -= it->first;
      in_use_ += it->first;
      peak_ = std::max(peak_, in_use_);
      sizes_[p] = it->first;
      free_.erase(it);
      return p;
    }
    void* p = nullptr;
    gpuError_t e = gpuMalloc(&p, size);
    if (e != gpuSuccess) {
      (void)gpuGetLastError();
      release_cached_locked();  // give the cache back once and retry
      e = gpuMalloc(&p, size);
    }
    if (e != gpuSuccess) {
      (void)gpuGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)gpuMemGetInfo(&free_b, &total_b);
      (void)gpuGetLastError();
      throw Error(ErrorKind::OutOfMemory,
                  std::string(WICK_GPU_VENDOR) + ":" + std::to_string(ordinal_) + ": cannot allocate " +
                      std::to_string(bytes) + " bytes (" + std::to_string(free_b) + " of " + std::to_string(total_b) +
                      " bytes free, " + std::to_string(in_use_) + " held by live wick tensors); free tensors or "
                      "use smaller shapes");
    }
    in_use_ += size;
    peak_ = std::max(peak_, in_use_);
    sizes_[p] = size;
    return p;
  }

  void release(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    in_use_ -= it->second;
    cached_ += it->second;
    free_.emplace(it->second, p);
    sizes_.erase(it);
  }

  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return MemoryStats{in_use_, cached_, peak_};
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    peak_ = in_use_;
  }

 private:
  static size_t round_up(size_t b) {
    if (b == 0) b = 1;
    const size_t q = b < (size_t(1) << 20) ? 512 : (size_t(1) << 20);  // small: 512 B, large: 1 MiB
    return (b + q - 1) / q * q;
  }
  void release_cached_locked() {
    for (auto& [size, p] : free_) (void)gpuFree(p);
    (void)gpuGetLastError();
    free_.clear();
    cached_ = 0;
  }

  int ordinal_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::map<void*, size_t> sizes_;
  size_t in_use_ = 0, cached_ = 0, peak_ = 0;  // bytes, rounded up as allocated
};

Allocator* make_allocator(int ordinal) { return new Allocator(ordinal); }
void release_all_cached(Allocator* a) { a->release_cached(); }

DeviceBuffer device_alloc(int ordinal, size_t bytes) {
  DeviceContext& c = context(ordinal);
  DeviceGuard g(ordinal);
  return DeviceBuffer{c.alloc->allocate(bytes), bytes, ordinal};
}

void device_free(const DeviceBuffer& b) {
  if (b.ptr) context(b.ordinal).alloc->release(b.ptr);
}

MemoryStats memory_stats(int ordinal) { return context(ordinal).alloc->stats(); }
void reset_peak_memory(int ordinal) { context(ordinal).alloc->reset_peak(); }
void empty_cache(int ordinal) {
  DeviceGuard g(ordinal);
  context(ordinal).alloc->release_cached();
}

}  // namespace wick::gpu

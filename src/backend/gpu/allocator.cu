// A caching allocator per device: freed blocks are kept by size and reused. All wick work on
// a device runs on one stream, so a block freed after a kernel was queued can be handed to
// later work on that stream without waiting. Graph captures get private pools (allocator.hpp).
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
    // While a graph records, its own freed blocks first (they stay in use: the graph owns them).
    if (open_ != 0) {
      auto& pf = pools_[open_];
      auto it = best_fit(pf, size);
      if (it != pf.end()) {
        void* p = it->second;
        blocks_[p] = Block{it->first, open_};
        pf.erase(it);
        return p;
      }
    }
    auto it = best_fit(free_, size);
    if (it != free_.end()) {
      void* p = it->second;
      cached_ -= it->first;
      in_use_ += it->first;
      peak_ = std::max(peak_, in_use_);
      blocks_[p] = Block{it->first, open_};
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
    blocks_[p] = Block{size, open_};
    return p;
  }

  void release(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(p);
    if (it == blocks_.end()) return;
    const Block b = it->second;
    blocks_.erase(it);
    auto pool = pools_.find(b.pool);
    if (pool != pools_.end()) {  // a live graph's block: kept for it, still counted in use
      pool->second.emplace(b.size, p);
      return;
    }
    in_use_ -= b.size;
    cached_ += b.size;
    free_.emplace(b.size, p);
  }

  int open_pool() {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_ != 0)
      throw Error(ErrorKind::Argument, "Graph::capture: a capture is already recording on " +
                                           std::string(WICK_GPU_VENDOR) + ":" + std::to_string(ordinal_) +
                                           "; captures cannot nest");
    open_ = next_pool_++;
    pools_[open_];
    return open_;
  }
  void close_pool() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = 0;
  }
  // The pool's free blocks go to the cache; its blocks still held by tensors go there when freed.
  void free_pool(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto pool = pools_.find(id);
    if (pool == pools_.end()) return;
    for (auto& [size, p] : pool->second) {
      in_use_ -= size;
      cached_ += size;
      free_.emplace(size, p);
    }
    pools_.erase(pool);
    if (open_ == id) open_ = 0;
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
  using FreeList = std::multimap<size_t, void*>;
  struct Block {
    size_t size;
    int pool;  // 0: the shared cache; else the graph pool it was handed out for
  };
  // Best fit among cached blocks no more than twice the request (bounded waste).
  static FreeList::iterator best_fit(FreeList& f, size_t size) {
    auto it = f.lower_bound(size);
    return it != f.end() && it->first <= 2 * size ? it : f.end();
  }
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
  FreeList free_;
  std::map<void*, Block> blocks_;
  std::map<int, FreeList> pools_;  // live graph pools: their freed blocks
  int open_ = 0, next_pool_ = 1;   // the pool a capture is filling (0: none)
  size_t in_use_ = 0, cached_ = 0, peak_ = 0;  // bytes, rounded up as allocated; pools count in use
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
int open_pool(int ordinal) { return context(ordinal).alloc->open_pool(); }
void close_pool(int ordinal) { context(ordinal).alloc->close_pool(); }
void free_pool(int ordinal, int pool) { context(ordinal).alloc->free_pool(pool); }
void empty_cache(int ordinal) {
  DeviceGuard g(ordinal);
  context(ordinal).alloc->release_cached();
}

}  // namespace wick::gpu

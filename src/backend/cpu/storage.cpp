// CpuStorage memory, the CPU Backend services, and the fill/copy/cast entries.
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/positions.hpp"
#include "ops/random.hpp"

namespace wick::cpu {

// Large blocks are kept for reuse: a fresh multi-megabyte block from the OS costs a page
// fault per 4 KiB on first touch, which dominates memory-bound ops that allocate their output.
namespace {
constexpr size_t kCacheMinBytes = size_t(1) << 20;  // smaller blocks: the heap reuses them anyway
constexpr size_t kCacheMaxBytes = size_t(1) << 30;  // bound on what the cache holds
struct BlockCache {
  std::mutex mu;
  std::multimap<size_t, void*> free;
  size_t held = 0;
};
BlockCache& block_cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: storages may outlive statics
  return *c;
}
size_t block_size(size_t bytes) { return bytes < kCacheMinBytes ? (bytes ? bytes : 1) : (bytes + 4095) / 4096 * 4096; }
void* take_block(size_t size) {
  if (size >= kCacheMinBytes) {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(size);
    if (it != c.free.end()) {
      void* p = it->second;
      c.held -= size;
      c.free.erase(it);
      return p;
    }
  }
  return ::operator new(size, std::align_val_t(64));
}
void give_block(void* p, size_t size) {
  if (size >= kCacheMinBytes) {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.held + size <= kCacheMaxBytes) {
      c.free.emplace(size, p);
      c.held += size;
      return;
    }
  }
  ::operator delete(p, std::align_val_t(64));
}
}  // namespace

CpuStorage::CpuStorage(size_t numel, DType dtype) : numel_(numel), dtype_(dtype) {
  size_t bytes = numel * dtype_size(dtype);
  if (numel != 0 && bytes / numel != dtype_size(dtype))
    throw Error(ErrorKind::OutOfMemory, "cpu alloc: " + std::to_string(numel) + " elements of " + dtype_name(dtype) +
                                            " overflow the address space");
  // Refused before asking: past physical memory, operator new either throws or (overcommitted)
  // succeeds and the first memset is killed; under ASan it aborts instead of throwing.
  check_host_alloc(bytes, "cpu alloc");
  try {
    data_ = take_block(block_size(bytes));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::OutOfMemory, "cpu alloc: could not allocate " + std::to_string(bytes) + " bytes (" +
                                            std::to_string(numel) + " x " + dtype_name(dtype) +
                                            "); free tensors or use a smaller shape");
  }
}

CpuStorage::CpuStorage(const void* borrowed, size_t numel, DType dtype, std::shared_ptr<const void> owner)
    : owner_(std::move(owner)), data_(const_cast<void*>(borrowed)), numel_(numel), dtype_(dtype) {}

CpuStorage::~CpuStorage() {
  if (!owner_) give_block(data_, block_size(numel_ * dtype_size(dtype_)));
}

void CpuStorage::copy_to_host(void* dst) const { std::memcpy(dst, data_, numel_ * dtype_size(dtype_)); }

StoragePtr CpuStorage::try_clone(const Layout& l) const {
  auto out = new_storage(l.numel(), dtype_);
  copy_strided_src(*out, 0, l);
  return out;
}

void CpuStorage::const_set(Scalar v, const Layout& l) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T val = v.is_int() ? cast<T>(v.to_int64()) : cast<T>(v.to_double());
    T* p = ptr<T>();
    auto plan = plan_strided<1>(l.shape, {&l});
    parallel_for(plan.numel, [&](size_t b, size_t e) {
      for_each_run<1>(plan, b, e, [&](size_t, size_t len, const auto& offs, const auto& inner) {
        T* q = p + offs[0];
        if (inner[0] == 1)
          for (size_t j = 0; j < len; ++j) q[j] = val;
        else
          for (size_t j = 0; j < len; ++j) q[int64_t(j) * inner[0]] = val;
      });
    });
  });
}

void CpuStorage::copy_strided_src(Storage& dst_s, size_t dst_offset, const Layout& src_l) const {
  CpuStorage& dst = as_cpu(dst_s);
  const size_t es = dtype_size(dtype_);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T* out = dst.ptr<T>() + dst_offset;
    const T* in = ptr<T>();
    if (src_l.is_contiguous()) {
      std::memcpy(out, in + src_l.offset, src_l.numel() * es);
      return;
    }
    map_strided(out, src_l.shape, [](T x) { return x; }, {&src_l}, in);
  });
}

void CpuStorage::copy2d(Storage& dst_s, size_t d1, size_t d2, size_t src_s, size_t dst_s_, size_t src_offset,
                        size_t dst_offset) const {
  CpuStorage& dst = as_cpu(dst_s);
  const size_t es = dtype_size(dtype_);
  auto* out = static_cast<char*>(dst.data()) + dst_offset * es;
  auto* in = static_cast<const char*>(data_) + src_offset * es;
  parallel_for(d1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) std::memcpy(out + i * dst_s_ * es, in + i * src_s * es, d2 * es);
  }, std::max<size_t>(1, kParallelGrain / std::max<size_t>(d2, 1)));
}

void CpuStorage::copy_strided_at(const Layout& src_l, Storage& dst_s, const Layout& dst_l, const Storage& start,
                                 size_t start_offset, int64_t row_stride, size_t max_start) const {
  CpuStorage& dst = as_cpu(dst_s);
  const CpuStorage& st = as_cpu(start);
  const int64_t r = pos::clamp_start(pos::load(st.data(), st.dtype(), int64_t(start_offset)), int64_t(max_start));
  const Layout at(dst_l.shape, dst_l.strides, size_t(int64_t(dst_l.offset) + r * row_stride));
  auto copy_as = [&](auto tag) {  // a copy moves bits: one loop per element size
    using T = decltype(tag);
    T* out = static_cast<T*>(dst.data());
    const T* in = static_cast<const T*>(data());
    const auto plan = plan_strided<2>(src_l.shape, {&at, &src_l});
    parallel_for(plan.numel, [&](size_t b, size_t e) {
      for_each_run<2>(plan, b, e, [&](size_t, size_t len, const auto& offs, const auto& inner) {
        for (size_t j = 0; j < len; ++j)
          out[int64_t(offs[0]) + int64_t(j) * inner[0]] = in[int64_t(offs[1]) + int64_t(j) * inner[1]];
      });
    });
  };
  switch (dtype_size(dtype_)) {
    case 1: copy_as(uint8_t{}); break;
    case 2: copy_as(uint16_t{}); break;
    case 4: copy_as(uint32_t{}); break;
    default: copy_as(uint64_t{}); break;
  }
}

StoragePtr CpuStorage::to_dtype(const Layout& l, DType to) const {
  auto out = new_storage(l.numel(), to);
  dispatch_dtype(dtype_, [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_dtype(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      map_strided(out->ptr<To>(), l.shape, [](From x) { return cast<To>(x); }, {&l}, ptr<From>());
    });
  });
  return out;
}

// ---- Backend services

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

StoragePtr CpuBackend::alloc(size_t numel, DType dtype) { return new_storage(numel, dtype); }

StoragePtr CpuBackend::zeros(size_t numel, DType dtype) {
  auto s = new_storage(numel, dtype);
  std::memset(s->data(), 0, numel * dtype_size(dtype));  // all-zero bits is 0 in every dtype
  return s;
}

StoragePtr CpuBackend::from_host(const void* data, size_t numel, DType dtype) {
  auto s = new_storage(numel, dtype);
  if (numel) std::memcpy(s->data(), data, numel * dtype_size(dtype));
  return s;
}

template <class Gen> static StoragePtr fill_random(size_t numel, DType dtype, Gen gen) {
  auto s = new_storage(numel, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = s->ptr<T>();
    parallel_for(numel, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) p[i] = cast<T>(gen(i));
    }, 4096);
  });
  return s;
}

StoragePtr CpuBackend::rand_uniform(size_t numel, DType dtype, uint64_t seed, double lo, double hi) {
  return fill_random(numel, dtype, [=](size_t i) { return mul_add_unfused(philox_uniform(seed, i), hi - lo, lo); });
}

StoragePtr CpuBackend::rand_normal(size_t numel, DType dtype, uint64_t seed, double mean, double std) {
  return fill_random(numel, dtype, [=](size_t i) { return mul_add_unfused(philox_normal(seed, i), std, mean); });
}

}  // namespace wick::cpu

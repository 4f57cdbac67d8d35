// The CPU entry of backend/registry.hpp.
#include "backend/registry.hpp"

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/thread_pool.hpp"

namespace wick::registry {

Backend& cpu_backend() { return cpu::cpu_backend(); }
StoragePtr cpu_borrow(const void* data, size_t numel, DType dtype, std::shared_ptr<const void> owner) {
  return std::make_shared<cpu::CpuStorage>(data, numel, dtype, std::move(owner));
}
int cpu_threads() { return int(cpu::pool_threads()); }

}  // namespace wick::registry

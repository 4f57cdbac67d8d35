// The CPU entry of backend/registry.hpp.
#include "backend/registry.hpp"

#include "backend/cpu/cpu_storage.hpp"

namespace wick::registry {

Backend& cpu_backend() { return cpu::cpu_backend(); }

}  // namespace wick::registry

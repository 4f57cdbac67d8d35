#include "wick/device.hpp"

#include <thread>

#include "backend/cpu/cpu_storage.hpp"
#include "wick/error.hpp"
#if defined(WICK_HAVE_GPU)
#include "backend/gpu/gpu_api.hpp"
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace wick {

static const char* kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Rocm: return "rocm";
  }
  return "?";
}

// Validates a GPU device request; the device is opened (and its code objects checked) here,
// so that a bad device fails at Device::cuda()/rocm(), not at the first op.
static Device open_gpu(DeviceKind want, int ordinal, Device (*make)(int)) {
  const std::string name = std::string(kind_name(want)) + ":" + std::to_string(ordinal);
#if defined(WICK_HAVE_GPU)
  if (gpu::built_kind() == want) {
    int n = gpu::device_count();
    if (n == 0)
      throw Error(ErrorKind::Device, "device " + name + ": no " + kind_name(want) + " device is usable: " +
                                         gpu::unavailable_reason() + "; use Device::cpu() or Device::best()");
    if (ordinal < 0 || ordinal >= n)
      throw Error(ErrorKind::Device, "device " + name + ": only " + std::to_string(n) + " " + kind_name(want) +
                                         " device(s) present (ordinals 0.." + std::to_string(n - 1) + ")");
    gpu::backend(ordinal);  // opens it; throws with the reason (e.g. no code object for its arch)
    return make(ordinal);
  }
#endif
  (void)make;
  throw Error(ErrorKind::Device, "device " + name + ": this build of wick has no " + kind_name(want) +
                                     " backend (backends built: cpu" +
#if defined(WICK_HAVE_GPU)
                                     std::string(", ") + kind_name(gpu::built_kind()) +
#endif
                                     "); rebuild with -DWICK_GPU=" + kind_name(want));
}

Device Device::cuda(int ordinal) {
  return open_gpu(DeviceKind::Cuda, ordinal, [](int o) { return Device(DeviceKind::Cuda, o); });
}
Device Device::rocm(int ordinal) {
  return open_gpu(DeviceKind::Rocm, ordinal, [](int o) { return Device(DeviceKind::Rocm, o); });
}
Device Device::gpu(int ordinal) {
#if defined(WICK_HAVE_GPU)
  return gpu::built_kind() == DeviceKind::Cuda ? cuda(ordinal) : rocm(ordinal);
#else
  throw Error(ErrorKind::Device, "Device::gpu(" + std::to_string(ordinal) +
                                     "): this build of wick has no GPU backend; rebuild with -DWICK_GPU=cuda or "
                                     "-DWICK_GPU=rocm");
#endif
}

Device Device::best() {
  for (const Device& d : available_devices())
    if (d.is_gpu()) return d;
  return Device::cpu();
}

Device Device::parse(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  auto colon = name.find(':');
  std::string kind = name.substr(0, colon);
  int ordinal = 0;
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      ordinal = std::stoi(name.substr(colon + 1), &used);
      if (used != name.size() - colon - 1 || ordinal < 0) throw std::invalid_argument("ordinal");
    } catch (const std::exception&) {
      throw Error(ErrorKind::Device, "device name '" + name + "': the ordinal must be a number, as in cuda:0");
    }
  }
  if (kind == "cuda") return Device::cuda(ordinal);
  if (kind == "rocm") return Device::rocm(ordinal);
  if (kind == "gpu") return Device::gpu(ordinal);
  throw Error(ErrorKind::Device, "device name '" + name + "': use cpu, cuda:N, rocm:N or gpu:N");
}

std::string Device::name() const {
  if (kind_ == DeviceKind::Cpu) return "cpu";
  return std::string(kind_name(kind_)) + ":" + std::to_string(ordinal_);
}

std::vector<std::string> built_backends() {
#if defined(WICK_HAVE_GPU)
  return {"cpu", kind_name(gpu::built_kind())};
#else
  return {"cpu"};
#endif
}

std::vector<Device> available_devices() {
  std::vector<Device> out{Device::cpu()};
#if defined(WICK_HAVE_GPU)
  for (int i = 0; i < gpu::device_count(); ++i) {
    try {
      out.push_back(gpu::built_kind() == DeviceKind::Cuda ? Device::cuda(i) : Device::rocm(i));
    } catch (const Error&) {
      // present but unusable (e.g. no code object for its architecture): not available
    }
  }
#endif
  return out;
}

std::string gpu_unavailable_reason() {
#if defined(WICK_HAVE_GPU)
  if (gpu::device_count() == 0) return gpu::unavailable_reason();
  std::string why;
  for (int i = 0; i < gpu::device_count(); ++i) {
    try {
      gpu::backend(i);
      return "";
    } catch (const Error& e) {
      why += (why.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  return why;
#else
  return "";
#endif
}

DeviceInfo device_info(const Device& d) {
  if (d.is_cpu()) {
    DeviceInfo info;
    info.name = "cpu";
#if defined(__x86_64__)
    info.arch = "x86_64";
#elif defined(__aarch64__)
    info.arch = "aarch64";
#else
    info.arch = "unknown";
#endif
#ifdef _OPENMP
    info.compute_units = omp_get_max_threads();
#else
    info.compute_units = int(std::thread::hardware_concurrency());
#endif
    return info;
  }
#if defined(WICK_HAVE_GPU)
  return gpu::device_info(d.ordinal());
#else
  throw Error(ErrorKind::Device, "device_info: " + d.name() + " is not in this build");
#endif
}

MemoryStats memory_stats(const Device& d) {
  if (d.is_cpu()) return {};
#if defined(WICK_HAVE_GPU)
  return gpu::memory_stats(d.ordinal());
#else
  throw Error(ErrorKind::Device, "memory_stats: " + d.name() + " is not in this build");
#endif
}

void empty_cache(const Device& d) {
  if (d.is_cpu()) return;
#if defined(WICK_HAVE_GPU)
  gpu::empty_cache(d.ordinal());
#endif
}

Backend& backend_for(const Device& d) {
  if (d.is_cpu()) return cpu::cpu_backend();
#if defined(WICK_HAVE_GPU)
  if (d.kind() == gpu::built_kind()) return gpu::backend(d.ordinal());
#endif
  throw Error(ErrorKind::Device, "device " + d.name() + " is not available in this build");
}

}  // namespace wick

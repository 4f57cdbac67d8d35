#include "wick/device.hpp"

#include <optional>

#include "backend/registry.hpp"
#include "backend/storage.hpp"
#include "wick/error.hpp"

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
  const std::optional<DeviceKind> built = registry::gpu_kind();
  if (built == want) {
    int n = registry::gpu_device_count();
    if (n == 0)
      throw Error(ErrorKind::Device, "device " + name + ": no " + kind_name(want) + " device is usable: " +
                                         registry::gpu_unavailable_reason() + "; use Device::cpu() or Device::best()");
    if (ordinal < 0 || ordinal >= n)
      throw Error(ErrorKind::Device, "device " + name + ": only " + std::to_string(n) + " " + kind_name(want) +
                                         " device(s) present (ordinals 0.." + std::to_string(n - 1) + ")");
    registry::gpu_backend(ordinal);  // opens it; throws with the reason (e.g. no code object for its arch)
    return make(ordinal);
  }
  throw Error(ErrorKind::Device, "device " + name + ": this build of wick has no " + kind_name(want) +
                                     " backend (backends built: cpu" +
                                     (built ? std::string(", ") + kind_name(*built) : std::string()) +
                                     "); rebuild with -DWICK_GPU=" + kind_name(want));
}

Device Device::cuda(int ordinal) {
  return open_gpu(DeviceKind::Cuda, ordinal, [](int o) { return Device(DeviceKind::Cuda, o); });
}
Device Device::rocm(int ordinal) {
  return open_gpu(DeviceKind::Rocm, ordinal, [](int o) { return Device(DeviceKind::Rocm, o); });
}
Device Device::gpu(int ordinal) {
  const std::optional<DeviceKind> built = registry::gpu_kind();
  if (built) return *built == DeviceKind::Cuda ? cuda(ordinal) : rocm(ordinal);
  throw Error(ErrorKind::Device, "Device::gpu(" + std::to_string(ordinal) +
                                     "): this build of wick has no GPU backend; rebuild with -DWICK_GPU=cuda or "
                                     "-DWICK_GPU=rocm");
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
  const std::optional<DeviceKind> built = registry::gpu_kind();
  if (built) return {"cpu", kind_name(*built)};
  return {"cpu"};
}

std::vector<Device> available_devices() {
  std::vector<Device> out{Device::cpu()};
  const std::optional<DeviceKind> built = registry::gpu_kind();
  if (!built) return out;
  for (int i = 0; i < registry::gpu_device_count(); ++i) {
    try {
      out.push_back(*built == DeviceKind::Cuda ? Device::cuda(i) : Device::rocm(i));
    } catch (const Error&) {
      // present but unusable (e.g. no code object for its architecture): not available
    }
  }
  return out;
}

std::string gpu_unavailable_reason() {
  if (!registry::gpu_kind()) return "";  // a CPU-only build: nothing is missing
  if (registry::gpu_device_count() == 0) return registry::gpu_unavailable_reason();
  std::string why;
  for (int i = 0; i < registry::gpu_device_count(); ++i) {
    try {
      registry::gpu_backend(i);
      return "";
    } catch (const Error& e) {
      why += (why.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  return why;
}

// Whether d is a device of the GPU backend linked into this build.
static bool is_built_gpu(const Device& d) { return d.is_gpu() && registry::gpu_kind() == d.kind(); }

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
    info.compute_units = registry::cpu_threads();
    return info;
  }
  if (!is_built_gpu(d)) throw Error(ErrorKind::Device, "device_info: " + d.name() + " is not in this build");
  return registry::gpu_device_info(d.ordinal());
}

MemoryStats memory_stats(const Device& d) {
  if (d.is_cpu()) return {};
  if (!is_built_gpu(d)) throw Error(ErrorKind::Device, "memory_stats: " + d.name() + " is not in this build");
  return registry::gpu_memory_stats(d.ordinal());
}

void empty_cache(const Device& d) {
  if (is_built_gpu(d)) registry::gpu_empty_cache(d.ordinal());
}

void reset_peak_memory(const Device& d) {
  if (d.is_cpu()) return;
  if (!is_built_gpu(d)) throw Error(ErrorKind::Device, "reset_peak_memory: " + d.name() + " is not in this build");
  registry::gpu_reset_peak_memory(d.ordinal());
}

void synchronize(const Device& d) {
  if (d.is_cpu()) return;  // CPU ops complete before they return
  backend_for(d).synchronize();
}

struct Graph::Impl {
  std::function<void()> body;                  // the CPU's replay
  std::unique_ptr<Backend::Recording> record;  // a GPU's graph
};

Graph Graph::capture(const Device& d, std::function<void()> body) {
  if (!body) throw Error(ErrorKind::Argument, "Graph::capture: no body given");
  Graph g;
  g.impl_ = std::make_shared<Impl>();
  g.impl_->record = backend_for(d).capture(body);
  if (!g.impl_->record) g.impl_->body = std::move(body);
  return g;
}

void Graph::replay() const {
  if (!impl_) throw Error(ErrorKind::Argument, "Graph::replay: the graph is empty; make it with Graph::capture");
  if (impl_->record)
    impl_->record->replay();
  else
    impl_->body();
}

bool Graph::recorded() const { return impl_ && impl_->record; }

Backend& backend_for(const Device& d) {
  if (d.is_cpu()) return registry::cpu_backend();
  if (is_built_gpu(d)) return registry::gpu_backend(d.ordinal());
  throw Error(ErrorKind::Device, "device " + d.name() + " is not available in this build");
}

}  // namespace wick

#include "wick/device.hpp"

#include "backend/cpu/cpu_storage.hpp"
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

static Device open_gpu(DeviceKind want, int ordinal) {
  throw Error(ErrorKind::Device, std::string("device ") + kind_name(want) + ":" + std::to_string(ordinal) +
                                     ": this build of wick has no " + kind_name(want) +
                                     " backend; rebuild with -DWICK_GPU=" + kind_name(want));
}

Device Device::cuda(int ordinal) { return open_gpu(DeviceKind::Cuda, ordinal); }
Device Device::rocm(int ordinal) { return open_gpu(DeviceKind::Rocm, ordinal); }
Device Device::gpu(int ordinal) {
  throw Error(ErrorKind::Device, "Device::gpu(" + std::to_string(ordinal) +
                                     "): this build of wick has no GPU backend; rebuild with -DWICK_GPU=cuda or rocm");
}

Device Device::best() {
  auto devs = available_devices();
  for (const Device& d : devs)
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

std::vector<std::string> built_backends() { return {"cpu"}; }

std::vector<Device> available_devices() { return {Device::cpu()}; }

Backend& backend_for(const Device& d) {
  if (d.is_cpu()) return cpu::cpu_backend();
  throw Error(ErrorKind::Device, "device " + d.name() + " is not available in this build");
}

}  // namespace wick

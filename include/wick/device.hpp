#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wick {

enum class DeviceKind { Cpu, Cuda, Rocm };

// A place tensors live. Cheap to copy and compare.
class Device {
 public:
  Device() = default;
  static Device cpu() { return Device(DeviceKind::Cpu, 0); }
  static Device cuda(int ordinal = 0);  // throws Error(Device) when CUDA was not built or no such GPU
  static Device rocm(int ordinal = 0);  // likewise for ROCm
  static Device gpu(int ordinal = 0);   // whichever GPU backend was built
  static Device best();                 // first GPU if one is usable, else the CPU
  static Device parse(const std::string& name);  // "cpu", "cuda:0", "rocm:1", "gpu:0"
  // Internal: a device value without opening or checking it (backends use it).
  static Device unchecked(DeviceKind k, int ordinal) { return Device(k, ordinal); }

  DeviceKind kind() const { return kind_; }
  int ordinal() const { return ordinal_; }
  bool is_cpu() const { return kind_ == DeviceKind::Cpu; }
  bool is_gpu() const { return kind_ != DeviceKind::Cpu; }
  std::string name() const;  // "cpu", "cuda:0", "rocm:0"
  bool operator==(const Device& o) const { return kind_ == o.kind_ && ordinal_ == o.ordinal_; }
  bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  Device(DeviceKind k, int o) : kind_(k), ordinal_(o) {}
  DeviceKind kind_ = DeviceKind::Cpu;
  int ordinal_ = 0;
};

// What a device is, for `wick info` and users choosing launch sizes.
struct DeviceInfo {
  std::string name;          // "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X", "cpu"
  std::string arch;          // "sm_90", "gfx942", "x86_64"
  size_t total_memory = 0;   // bytes
  int warp_size = 1;         // physical warp / wavefront size (32 or 64); 1 on the CPU
  int compute_units = 0;     // SMs / CUs; CPU threads
};
DeviceInfo device_info(const Device& d);

// Memory held by wick's caching allocator on a device (0 on the CPU).
struct MemoryStats {
  size_t in_use = 0;  // bytes in live tensors
  size_t cached = 0;  // bytes kept for reuse, not yet returned to the driver
  size_t peak = 0;    // high-water mark of in_use since the device opened or reset_peak_memory
};
MemoryStats memory_stats(const Device& d);
void empty_cache(const Device& d);        // returns cached blocks to the driver
void reset_peak_memory(const Device& d);  // peak = in_use from now on (no-op on the CPU)
// Waits until all work queued on d has finished (GPU kernels run asynchronously); no-op on the CPU.
void synchronize(const Device& d);

// A step of device work recorded once and replayed (a CUDA/HIP graph on a GPU), so the host stops
// issuing each op again: an LLM decode step is hundreds of small kernels. capture() runs `body` on
// the host with the device work it queues recorded, not run; each replay() runs that work on the
// same memory. So a replay re-reads the tensors the body read (write new inputs into them in place
// first: copy_from, slice_set, including its device-side start) and leaves its results in the
// tensors the body made (keep them, e.g. assign them to a variable the body captured by reference).
// The body must only queue work on `d`: a call that waits for the device or moves data to or from
// the host (to_vector, from_vector, ops that check ids on the host) makes capture() throw an Error
// that names it. Replays run in order with other work on the device. On the CPU nothing is
// recorded: replay() runs body again. Graph is cheap to copy (copies share the recording).
class Graph {
 public:
  Graph() = default;
  static Graph capture(const Device& d, std::function<void()> body);
  void replay() const;
  bool defined() const { return impl_ != nullptr; }
  bool recorded() const;  // true when replay() is one graph launch (a GPU), false on the CPU

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Which backends this build of wick contains, and the devices present.
std::vector<std::string> built_backends();  // e.g. {"cpu"} or {"cpu", "cuda"}
std::vector<Device> available_devices();    // cpu first, then each usable GPU
// Why the built GPU backend has no usable device ("" when it has one, or none was built).
std::string gpu_unavailable_reason();

}  // namespace wick

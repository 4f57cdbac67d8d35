// Device discovery and opening: contexts, the code-object check, backends, device info.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/gpu/allocator.hpp"
#include "backend/gpu/blas.hpp"
#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"

#ifndef WICK_GPU_TARGETS_STR
#define WICK_GPU_TARGETS_STR "unknown"
#endif

namespace wick::gpu {

// A kernel that exists only to ask the runtime whether this build has code for a device.
__global__ void probe_kernel(int* p) {
  kernel_entry();
  if (p) *p = 0;
}

int resident_blocks(int ordinal, const void* kernel, int block, size_t smem) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, size_t>, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(ordinal, kernel, block, smem);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int n = 0;
  if (gpuOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, block, smem) != gpuSuccess || n < 1) {
    (void)gpuGetLastError();
    n = 1;
  }
  known.emplace(key, n);
  return n;
}

size_t static_smem(const void* kernel) {
  static std::mutex mu;
  static std::map<const void*, size_t> known;
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(kernel); it != known.end()) return it->second;
  gpuFuncAttributes attr{};
  size_t bytes = 0;
  if (gpuFuncGetAttributes(&attr, kernel) == gpuSuccess)
    bytes = size_t(attr.sharedSizeBytes);
  else
    (void)gpuGetLastError();
  known.emplace(kernel, bytes);
  return bytes;
}

void allow_dynamic_smem(const void* kernel, size_t dynamic, const char* what) {
  if (dynamic + static_smem(kernel) <= kUnaskedSmem) return;
  check(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(dynamic)),
        (std::string(what) + ": shared memory size").c_str());
}

bool pdl_allowed(const void* kernel) {
#if defined(WICK_GPU_HIP) || defined(WICK_EMULATE_AMD)
  (void)kernel;  // AMD has no such launch; its emulation launches as AMD would
  return false;
#else
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Per thread, so no lock: the runtime's answer for a (device, kernel) pair never changes.
  thread_local std::map<std::pair<int, const void*>, bool> known;
  const auto key = std::make_pair(dev, kernel);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  cudaFuncAttributes attr;
  bool ok = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90;
  if (!ok) (void)cudaGetLastError();
  known.emplace(key, ok);
  return ok;
#endif
}

bool has_sm80_body(const void* kernel) {
#if defined(WICK_GPU_HIP)
  (void)kernel;
  return false;
#else
  gpuFuncAttributes attr{};
  if (gpuFuncGetAttributes(&attr, kernel) != gpuSuccess) {
    (void)gpuGetLastError();
    return false;
  }
  return attr.binaryVersion >= 80 && attr.ptxVersion >= 80;
#endif
}

DeviceKind built_kind() {
#if defined(WICK_GPU_HIP)
  return DeviceKind::Rocm;
#else
  return DeviceKind::Cuda;
#endif
}

std::string built_targets() {
  std::string t = WICK_GPU_TARGETS_STR;  // comma-separated by CMake; shown as CMake lists
  for (char& ch : t)
    if (ch == ',') ch = ';';
  return t;
}

namespace {
std::once_flag g_count_once;
int g_count = 0;
std::string g_reason;
std::mutex g_mu;
std::vector<std::unique_ptr<DeviceContext>> g_ctx;
std::vector<std::unique_ptr<GpuBackend>> g_backends;

void count_devices() {
  int n = 0;
  gpuError_t e = gpuGetDeviceCount(&n);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    g_reason = std::string(WICK_GPU_VENDOR) + " runtime reports: " + gpuGetErrorString(e);
    n = 0;
  } else if (n == 0) {
    g_reason = std::string("no ") + WICK_GPU_VENDOR + " device found";
  }
  g_count = n;
}

std::string arch_of(const gpuDeviceProp_t& p) {
#if defined(WICK_GPU_HIP)
  std::string a = p.gcnArchName;
  return a.substr(0, a.find(':'));  // "gfx90a:sramecc+:xnack-" -> "gfx90a"
#else
  return "sm_" + std::to_string(p.major * 10 + p.minor);
#endif
}

// Frees cached blocks while the runtime is still alive (before its own teardown).
void release_at_exit() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& c : g_ctx)
    if (c) {
      (void)gpuSetDevice(c->ordinal);
      (void)gpuStreamSynchronize(c->stream);
      release_all_cached(c->alloc);
      destroy_blas(c->blas);
      c->blas = nullptr;
      if (c->error_flag) (void)gpuFree(c->error_flag);
      c->error_flag = nullptr;
    }
}

DeviceContext& open_locked(int ordinal) {
  std::call_once(g_count_once, count_devices);
  if (ordinal < 0 || ordinal >= g_count)
    throw Error(ErrorKind::Device, std::string(WICK_GPU_VENDOR) + ":" + std::to_string(ordinal) + ": " +
                                       (g_count == 0 ? g_reason
                                                     : "only " + std::to_string(g_count) + " device(s) present"));
  if (g_ctx.size() < size_t(g_count)) g_ctx.resize(size_t(g_count));
  if (g_ctx[size_t(ordinal)]) return *g_ctx[size_t(ordinal)];
  auto c = std::make_unique<DeviceContext>();
  c->ordinal = ordinal;
  check(gpuSetDevice(ordinal), "SetDevice");
  check(gpuGetDeviceProperties(&c->prop, ordinal), "GetDeviceProperties");
  c->arch = arch_of(c->prop);
#if defined(WICK_EMULATE_AMD)
  // The AMD emulation: no more shared memory per block than a gfx9/gfx11 workgroup's 64 KiB of LDS.
  constexpr size_t kLds = 64 * 1024;
  c->prop.sharedMemPerBlock = std::min<size_t>(c->prop.sharedMemPerBlock, kLds);
  c->prop.sharedMemPerBlockOptin = std::min<size_t>(c->prop.sharedMemPerBlockOptin, kLds);
#endif
  gpuFuncAttributes attr;
  gpuError_t e = gpuFuncGetAttributes(&attr, reinterpret_cast<const void*>(&probe_kernel));
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    std::string arch_num = c->arch.rfind("sm_", 0) == 0 ? c->arch.substr(3) : c->arch;
    throw Error(ErrorKind::Device,
                std::string(WICK_GPU_VENDOR) + ":" + std::to_string(ordinal) + " (" + c->prop.name + ", " + c->arch +
                    ") has no code object in this build of wick, which was compiled for WICK_GPU_TARGETS=\"" +
                    built_targets() + "\" (" + gpuGetErrorString(e) + "); rebuild with -DWICK_GPU_TARGETS=\"" +
                    built_targets() + ";" + arch_num + "\"");
  }
  check(gpuStreamCreateWithFlags(&c->stream, gpuStreamNonBlocking), "StreamCreate");
  check(gpuMalloc(reinterpret_cast<void**>(&c->error_flag), sizeof(int)), "Malloc(error flag)");
  check(gpuMemsetAsync(c->error_flag, 0, sizeof(int), c->stream), "Memset(error flag)");
  c->alloc = make_allocator(ordinal);
  static bool registered = (std::atexit(release_at_exit), true);
  (void)registered;
  g_ctx[size_t(ordinal)] = std::move(c);
  return *g_ctx[size_t(ordinal)];
}
}  // namespace

int device_count() {
  std::call_once(g_count_once, count_devices);
  return g_count;
}

std::string unavailable_reason() {
  std::call_once(g_count_once, count_devices);
  return g_count == 0 ? g_reason : "";
}

DeviceContext& context(int ordinal) {
  std::lock_guard<std::mutex> lock(g_mu);
  return open_locked(ordinal);
}

Backend& backend(int ordinal) {
  std::lock_guard<std::mutex> lock(g_mu);
  open_locked(ordinal);
  if (g_backends.size() < g_ctx.size()) g_backends.resize(g_ctx.size());
  auto& b = g_backends[size_t(ordinal)];
  if (!b) b = std::make_unique<GpuBackend>(ordinal);
  return *b;
}

DeviceInfo device_info(int ordinal) {
  DeviceContext& c = context(ordinal);
  DeviceInfo info;
  info.name = c.prop.name;
  info.arch = c.arch;
  info.total_memory = c.prop.totalGlobalMem;
  info.warp_size = c.prop.warpSize;
#if defined(WICK_EMULATE_AMD)  // what device code runs with (docs/gpu.md)
  info.arch += WICK_EMULATE_WAVE == 64 ? " running AMD cdna paths (wave64 on warp pairs)" : " running AMD rdna paths";
  info.warp_size = WICK_EMULATE_WAVE;
#endif
  info.compute_units = c.prop.multiProcessorCount;
  return info;
}

DeviceGuard::DeviceGuard(int ordinal) : previous(0) {
  (void)gpuGetDevice(&previous);
  if (previous != ordinal) {
    check(gpuSetDevice(ordinal), "SetDevice");
    changed = true;
  }
}
// The common case (already on the device) costs no runtime call here: host overhead per op.
DeviceGuard::~DeviceGuard() {
  if (changed) (void)gpuSetDevice(previous);
}

void throw_if_index_error(DeviceContext& ctx, const std::string& what) {
  int flag = 0;
  check(gpuMemcpyAsync(&flag, ctx.error_flag, sizeof(int), gpuMemcpyDeviceToHost, ctx.stream), "MemcpyAsync(flag)");
  check(gpuStreamSynchronize(ctx.stream), "StreamSynchronize");
  if (flag != 0) {
    check(gpuMemsetAsync(ctx.error_flag, 0, sizeof(int), ctx.stream), "Memset(flag)");
    throw Error(ErrorKind::Index, what);
  }
}

Device GpuBackend::device() const {
  return Device::unchecked(built_kind(), ordinal_);
}

void GpuBackend::synchronize() {
  DeviceGuard g(ordinal_);
  check(gpuStreamSynchronize(context(ordinal_).stream), "StreamSynchronize");
}

}  // namespace wick::gpu

// GpuStorage memory and the fill / copy / cast entries; the GPU Backend services.
#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/positions.hpp"
#include "ops/random.hpp"

namespace wick::gpu {

GpuStorage::GpuStorage(int ordinal, size_t numel, DType dtype) : numel_(numel), dtype_(dtype) {
  const size_t es = dtype_size(dtype);
  if (numel != 0 && (numel * es) / numel != es)
    throw Error(ErrorKind::OutOfMemory, "gpu alloc: " + std::to_string(numel) + " x " + dtype_name(dtype) +
                                            " overflows the address space");
  buf_ = device_alloc(ordinal, numel * es);
}

GpuStorage::~GpuStorage() { device_free(buf_); }

Device GpuStorage::device() const { return Device::unchecked(built_kind(), buf_.ordinal); }

void GpuStorage::copy_to_host(void* dst) const {
  DeviceGuard g(ordinal());
  if (numel_ == 0) return;
  check(gpuMemcpyAsync(dst, buf_.ptr, numel_ * dtype_size(dtype_), gpuMemcpyDeviceToHost, stream()), "MemcpyAsync(D2H)");
  check(gpuStreamSynchronize(stream()), "StreamSynchronize");
}

StoragePtr GpuStorage::try_clone(const Layout& l) const {
  auto out = new_storage(ordinal(), l.numel(), dtype_);
  copy_strided_src(*out, 0, l);
  return out;
}

template <class T> struct ConstF {
  T v;
  __device__ T operator()() const { return v; }
};

template <class T, int N>
__global__ void WICK_LAUNCH_BOUNDS(kBlock) const_set_kernel(T* p, int64_t n, T v, StridedDesc<N> d) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) p[d.offset(0, i)] = v;
}

void GpuStorage::const_set(Scalar v, const Layout& l) {
  DeviceGuard g(ordinal());
  const int64_t n = int64_t(l.numel());
  if (n == 0) return;
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T val = v.is_int() ? cast<T>(v.to_int64()) : cast<T>(v.to_double());
    StridedDesc<1> d;
    if (!make_desc<1>(l.shape, {&l}, &d)) {  // rank too large after merging: one row at a time
      for (size_t i = 0; i < l.shape[0]; ++i) const_set(v, Layout(Shape(l.shape.begin() + 1, l.shape.end()),
                                                                 std::vector<int64_t>(l.strides.begin() + 1, l.strides.end()),
                                                                 size_t(int64_t(l.offset) + int64_t(i) * l.strides[0])));
      return;
    }
    launch_kernel(const_set_kernel<T, 1>, grid_for(n), kBlock, 0, stream(), ptr<T>(), n, val, d);
    check_launch("const_set");
  });
}

template <class T> struct Identity {
  __device__ T operator()(T x) const { return x; }
};

void GpuStorage::copy_strided_src(Storage& dst_s, size_t dst_offset, const Layout& src_l) const {
  GpuStorage& dst = as_gpu(dst_s);
  DeviceGuard g(ordinal());
  const size_t n = src_l.numel();
  if (n == 0) return;
  const size_t es = dtype_size(dtype_);
  if (src_l.is_contiguous()) {
    check(gpuMemcpyAsync(static_cast<char*>(dst.data()) + dst_offset * es,
                         static_cast<const char*>(data()) + src_l.offset * es, n * es, gpuMemcpyDeviceToDevice,
                         stream()),
          "MemcpyAsync(D2D)");
    return;
  }
  // A copy moves bits: one kernel per element size. Transposed views go through the tiles.
  auto copy_as = [&](auto tag) {
    using T = decltype(tag);
    launch_map<true>(stream(), static_cast<T*>(dst.data()) + dst_offset, src_l.shape, Identity<T>{}, {&src_l},
                     static_cast<const T*>(data()));
  };
  switch (es) {
    case 1: copy_as(uint8_t{}); break;
    case 2: copy_as(uint16_t{}); break;
    case 4: copy_as(uint32_t{}); break;
    default: copy_as(uint64_t{}); break;
  }
}

void GpuStorage::copy2d(Storage& dst_s, size_t d1, size_t d2, size_t src_s, size_t dst_s_, size_t src_offset,
                        size_t dst_offset) const {
  GpuStorage& dst = as_gpu(dst_s);
  DeviceGuard g(ordinal());
  if (d1 == 0 || d2 == 0) return;
  const size_t es = dtype_size(dtype_);
  check(gpuMemcpy2DAsync(static_cast<char*>(dst.data()) + dst_offset * es, dst_s_ * es,
                         static_cast<const char*>(data()) + src_offset * es, src_s * es, d2 * es, d1,
                         gpuMemcpyDeviceToDevice, stream()),
        "Memcpy2DAsync");
}

// dst[at(i) + r * row_stride] = src[at(i)], r read from device memory by every thread (no host
// read: the launch can be captured and replayed with another start).
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    copy_at_kernel(T* WICK_RESTRICT dst, const T* WICK_RESTRICT src, int64_t n, StridedDesc<2> d, const void* start,
                   DType start_dt, int64_t start_offset, int64_t row_stride, int64_t max_start) {
  kernel_entry();
  const int64_t shift = pos::clamp_start(pos::load(start, start_dt, start_offset), max_start) * row_stride;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t o[2];
    d.offsets_of(i, o);
    dst[o[0] + shift] = src[o[1]];
  }
}

void GpuStorage::copy_strided_at(const Layout& src_l, Storage& dst_s, const Layout& dst_l, const Storage& start_s,
                                 size_t start_offset, int64_t row_stride, size_t max_start) const {
  GpuStorage& dst = as_gpu(dst_s);
  const GpuStorage& start = as_gpu(start_s);
  DeviceGuard g(ordinal());
  auto copy_as = [&](auto tag) {  // a copy moves bits: one kernel per element size
    using T = decltype(tag);
    for_each_desc<2>(src_l.shape, {&dst_l, &src_l}, 0, [&](const StridedDesc<2>& d, int64_t, int64_t n) {
      launch_kernel(copy_at_kernel<T>, grid_for(n), kBlock, 0, stream(), static_cast<T*>(dst.data()),
                    static_cast<const T*>(data()), n, d, start.data(), start.dtype(), int64_t(start_offset), row_stride,
                    int64_t(max_start));
      check_launch("slice_set");
    });
  };
  switch (dtype_size(dtype_)) {
    case 1: copy_as(uint8_t{}); break;
    case 2: copy_as(uint16_t{}); break;
    case 4: copy_as(uint32_t{}); break;
    default: copy_as(uint64_t{}); break;
  }
}

template <class To, class From> struct CastF {
  __device__ To operator()(From x) const { return cast<To>(x); }
};

StoragePtr GpuStorage::to_dtype(const Layout& l, DType to) const {
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), l.numel(), to);
  dispatch_dtype(dtype_, [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_dtype(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      launch_map<true>(stream(), out->ptr<To>(), l.shape, CastF<To, From>{}, {&l}, ptr<From>());
    });
  });
  return out;
}

// ---- Backend services

StoragePtr GpuBackend::alloc(size_t numel, DType dtype) { return new_storage(ordinal_, numel, dtype); }

StoragePtr GpuBackend::zeros(size_t numel, DType dtype) {
  auto s = new_storage(ordinal_, numel, dtype);
  DeviceGuard g(ordinal_);
  if (numel) check(gpuMemsetAsync(s->data(), 0, numel * dtype_size(dtype), s->stream()), "MemsetAsync");
  return s;
}

StoragePtr GpuBackend::from_host(const void* data, size_t numel, DType dtype) {
  auto s = new_storage(ordinal_, numel, dtype);
  DeviceGuard g(ordinal_);
  if (numel) {
    check(gpuMemcpyAsync(s->data(), data, numel * dtype_size(dtype), gpuMemcpyHostToDevice, s->stream()),
          "MemcpyAsync(H2D)");
    // the caller may free `data` on return: make sure the copy has read it
    check(gpuStreamSynchronize(s->stream()), "StreamSynchronize");
  }
  return s;
}

template <class T, bool kNormal>
__global__ void WICK_LAUNCH_BOUNDS(kBlock) rand_kernel(T* p, int64_t n, uint64_t seed, double a, double b) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    double x = kNormal ? mul_add_unfused(philox_normal(seed, uint64_t(i)), b, a)
                       : mul_add_unfused(philox_uniform(seed, uint64_t(i)), b - a, a);
    p[i] = cast<T>(x);
  }
}

template <bool kNormal> static StoragePtr fill_random(int ordinal, size_t numel, DType dtype, uint64_t seed, double a,
                                                      double b) {
  auto s = new_storage(ordinal, numel, dtype);
  DeviceGuard g(ordinal);
  if (numel == 0) return s;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(rand_kernel<T, kNormal>, grid_for(int64_t(numel)), kBlock, 0, s->stream(), s->ptr<T>(),
                  int64_t(numel), seed, a, b);
    check_launch("rand");
  });
  return s;
}

StoragePtr GpuBackend::rand_uniform(size_t numel, DType dtype, uint64_t seed, double lo, double hi) {
  return fill_random<false>(ordinal_, numel, dtype, seed, lo, hi);
}
StoragePtr GpuBackend::rand_normal(size_t numel, DType dtype, uint64_t seed, double mean, double std) {
  return fill_random<true>(ordinal_, numel, dtype, seed, mean, std);
}

}  // namespace wick::gpu

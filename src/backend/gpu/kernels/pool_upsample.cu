// Pooling and resampling on the GPU (NCHW, NCL for 1-D), one thread per output element, inputs
// read through their strides. Same arithmetic and order as src/backend/cpu/pool_upsample.cpp;
// the resampling coordinates come from src/ops/resample.hpp, shared with the CPU.
#include <optional>
#include <string>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/resample.hpp"

namespace wick::gpu {
namespace {

// An (b, c, h, w) view: element (n, c, y, x) sits at off + n*sb + c*sc + y*sh + x*sw.
struct Img {
  int64_t b, c, h, w;
  int64_t sb, sc, sh, sw;
  int64_t off;
  __device__ int64_t plane_base(int64_t plane) const { return off + (plane / c) * sb + (plane % c) * sc; }
};
Img img4(const Layout& l) {
  return {int64_t(l.shape[0]), int64_t(l.shape[1]), int64_t(l.shape[2]), int64_t(l.shape[3]),
          l.strides[0],        l.strides[1],        l.strides[2],        l.strides[3],
          int64_t(l.offset)};
}
Img img3(const Layout& l) {  // (b, c, l) as (b, c, 1, l)
  return {int64_t(l.shape[0]), int64_t(l.shape[1]), 1, int64_t(l.shape[2]), l.strides[0], l.strides[1], 0,
          l.strides[2],        int64_t(l.offset)};
}

struct Window {
  int64_t ho, wo, kh, kw, sh, sw;
};

template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    avg_pool_kernel(T* WICK_RESTRICT out, int64_t n, Img im, Window p, const T* WICK_RESTRICT in) {
  kernel_entry();
  using A = compute_t<T>;
  const A count = A(p.kh * p.kw);
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t ox = e % p.wo, oy = (e / p.wo) % p.ho, plane = e / (p.wo * p.ho);
    const T* win = in + im.plane_base(plane) + oy * p.sh * im.sh + ox * p.sw * im.sw;
    A acc = 0;
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) acc += to_compute(win[i * im.sh + j * im.sw]);
    out[e] = cast<T>(acc / count);
  }
}

// The first NaN of the window wins (as PyTorch); otherwise the first maximum.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    max_pool_kernel(T* WICK_RESTRICT out, int64_t n, Img im, Window p, const T* WICK_RESTRICT in) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t ox = e % p.wo, oy = (e / p.wo) % p.ho, plane = e / (p.wo * p.ho);
    const T* win = in + im.plane_base(plane) + oy * p.sh * im.sh + ox * p.sw * im.sw;
    out[e] = max_window(win, p.kh, p.kw, im.sh, im.sw);
  }
}

template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    nearest_kernel(T* WICK_RESTRICT out, int64_t n, Img im, int64_t ho, int64_t wo, const T* WICK_RESTRICT in) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t ox = e % wo, oy = (e / wo) % ho, plane = e / (wo * ho);
    const int64_t sy = int64_t(nearest_src(size_t(oy), size_t(im.h), size_t(ho)));
    const int64_t sx = int64_t(nearest_src(size_t(ox), size_t(im.w), size_t(wo)));
    out[e] = in[im.plane_base(plane) + sy * im.sh + sx * im.sw];
  }
}

struct Bilinear {
  int64_t ho, wo;
  double ratio_h, ratio_w;
  bool align_corners;
};

template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    bilinear_kernel(T* WICK_RESTRICT out, int64_t n, Img im, Bilinear p, const T* WICK_RESTRICT in) {
  kernel_entry();
  using A = compute_t<T>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t ox = e % p.wo, oy = (e / p.wo) % p.ho, plane = e / (p.wo * p.ho);
    const LinearTap y = linear_tap(size_t(oy), size_t(im.h), p.ratio_h, p.align_corners);
    const LinearTap x = linear_tap(size_t(ox), size_t(im.w), p.ratio_w, p.align_corners);
    const T* base = in + im.plane_base(plane);
    const T* r0 = base + int64_t(y.i0) * im.sh;
    const T* r1 = base + int64_t(y.i1) * im.sh;
    const int64_t x0 = int64_t(x.i0) * im.sw, x1 = int64_t(x.i1) * im.sw;
    const A v = bilinear_blend(A(y.l0), A(y.l1), A(x.l0), A(x.l1), A(to_compute(r0[x0])), A(to_compute(r0[x1])),
                               A(to_compute(r1[x0])), A(to_compute(r1[x1])));
    out[e] = cast<T>(v);
  }
}

template <bool kMax>
StoragePtr pool(const GpuStorage& s, const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw, const char* op) {
  DeviceGuard g(s.ordinal());
  const Img im = img4(l);
  const Window p{(im.h - int64_t(kh)) / int64_t(sh) + 1, (im.w - int64_t(kw)) / int64_t(sw) + 1, int64_t(kh),
                 int64_t(kw), int64_t(sh), int64_t(sw)};
  const int64_t n = im.b * im.c * p.ho * p.wo;
  auto out = new_storage(s.ordinal(), size_t(n), s.dtype());
  dispatch_dtype(s.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kMax) {
      if (n == 0) return;
      launch_kernel(max_pool_kernel<T>, grid_for(n), kBlock, 0, s.stream(), out->template ptr<T>(), n, im, p,
                    s.template ptr<T>());
      check_launch(op);
    } else if constexpr (!is_float_v<T>) {
      throw Error(ErrorKind::DType, std::string(op) + ": needs a float dtype, got " + dtype_name(s.dtype()));
    } else {
      if (n == 0) return;
      launch_kernel(avg_pool_kernel<T>, grid_for(n), kBlock, 0, s.stream(), out->template ptr<T>(), n, im, p,
                    s.template ptr<T>());
      check_launch(op);
    }
  });
  return out;
}

StoragePtr nearest(const GpuStorage& s, const Img& im, size_t ho, size_t wo) {
  DeviceGuard g(s.ordinal());
  const int64_t n = im.b * im.c * int64_t(ho) * int64_t(wo);
  auto out = new_storage(s.ordinal(), size_t(n), s.dtype());
  if (n == 0) return out;
  dispatch_dtype(s.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(nearest_kernel<T>, grid_for(n), kBlock, 0, s.stream(), out->ptr<T>(), n, im, int64_t(ho), int64_t(wo),
                  s.ptr<T>());
    check_launch("upsample_nearest");
  });
  return out;
}

}  // namespace

StoragePtr GpuStorage::avg_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const {
  return pool<false>(*this, l, kh, kw, sh, sw, "avg_pool2d");
}

StoragePtr GpuStorage::max_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const {
  return pool<true>(*this, l, kh, kw, sh, sw, "max_pool2d");
}

StoragePtr GpuStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  return nearest(*this, img3(l), 1, out_l);
}

StoragePtr GpuStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  return nearest(*this, img4(l), out_h, out_w);
}

StoragePtr GpuStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                           std::optional<double> scale_h, std::optional<double> scale_w) const {
  DeviceGuard g(ordinal());
  const Img im = img4(l);
  const int64_t n = im.b * im.c * int64_t(out_h) * int64_t(out_w);
  auto out = new_storage(ordinal(), size_t(n), dtype_);
  if (n == 0) return out;
  const Bilinear p{int64_t(out_h), int64_t(out_w),
                   linear_ratio(size_t(im.h), out_h, align_corners, scale_h.has_value(), scale_h.value_or(1.0)),
                   linear_ratio(size_t(im.w), out_w, align_corners, scale_w.has_value(), scale_w.value_or(1.0)),
                   align_corners};
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_float_v<T>) {
      throw Error(ErrorKind::DType, std::string("upsample_bilinear2d: needs a float dtype, got ") + dtype_name(dtype_));
    } else {
      launch_kernel(bilinear_kernel<T>, grid_for(n), kBlock, 0, stream(), out->ptr<T>(), n, im, p, ptr<T>());
      check_launch("upsample_bilinear2d");
    }
  });
  return out;
}

}  // namespace wick::gpu

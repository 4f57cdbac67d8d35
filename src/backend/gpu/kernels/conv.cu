// Convolutions on the GPU: direct kernels, one thread per output element, reading input and
// kernel through their strides. The transposed convs gather their contributing inputs (no
// atomics). 1-D convolutions run as 2-D ones with a height of 1 (as on the CPU).
// Accumulation as src/backend/cpu/conv.cpp: f32 for f16/bf16/f8e4m3/f32, f64 for f64, and a
// wrapping 64-bit integer for the integer types, cast (wrapped) to the type at the end.
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"

namespace wick::gpu {
namespace {

template <class T> using conv_t = std::conditional_t<is_float_v<T>, compute_t<T>, uint64_t>;

template <class C, class T> __device__ __forceinline__ C load_as(T x) {
  if constexpr (std::is_integral_v<C>) return C(x);  // sign- or zero-extends, as wrapping wants
  else return C(to_compute(x));
}

// A 4-D operand: element (a, b, c, d) at off + a*s0 + b*s1 + c*s2 + d*s3.
struct View4 {
  int64_t off, s0, s1, s2, s3;
};
View4 view4(const Layout& l) { return {int64_t(l.offset), l.strides[0], l.strides[1], l.strides[2], l.strides[3]}; }
// (b, c, l) as (b, c, 1, l).
View4 view3_as_4(const Layout& l) { return {int64_t(l.offset), l.strides[0], l.strides[1], 0, l.strides[2]}; }

struct ConvGeom {
  int64_t c_in, h_in, w_in, c_out, k_h, k_w, ho, wo, cig, cog;
  int64_t ph, pw, sh, sw, dh, dw;
};

ConvGeom geom(const Conv2dShape& s, bool transposed) {
  const auto& p = s.p;
  return {int64_t(s.c_in),
          int64_t(s.h_in),
          int64_t(s.w_in),
          int64_t(s.c_out),
          int64_t(s.k_h),
          int64_t(s.k_w),
          int64_t(transposed ? s.h_out_transposed() : s.h_out()),
          int64_t(transposed ? s.w_out_transposed() : s.w_out()),
          int64_t(s.c_in / p.groups),
          int64_t(s.c_out / p.groups),
          int64_t(p.padding_h),
          int64_t(p.padding_w),
          int64_t(p.stride_h),
          int64_t(p.stride_w),
          int64_t(p.dilation_h),
          int64_t(p.dilation_w)};
}

// y[b, co, oy, ox] = sum over (ci, i, j) of x[b, grp*cig + ci, oy*sh - ph + i*dh, ox*sw - pw + j*dw]
// * w[co, ci, i, j], zero outside the image.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    conv2d_kernel(T* WICK_RESTRICT out, int64_t n, ConvGeom g, const T* WICK_RESTRICT x, View4 xv,
                  const T* WICK_RESTRICT w, View4 wv) {
  kernel_entry();
  using C = conv_t<T>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    int64_t r = e;
    const int64_t ox = r % g.wo;
    r /= g.wo;
    const int64_t oy = r % g.ho;
    r /= g.ho;
    const int64_t co = r % g.c_out, b = r / g.c_out;
    const int64_t grp = co / g.cog;
    const int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
    const T* xb = x + xv.off + b * xv.s0 + grp * g.cig * xv.s1;
    const T* wc = w + wv.off + co * wv.s0;
    C acc = C(0);
    for (int64_t ci = 0; ci < g.cig; ++ci) {
      const T* xc = xb + ci * xv.s1;
      const T* wci = wc + ci * wv.s1;
      for (int64_t i = 0; i < g.k_h; ++i) {
        const int64_t iy = y0 + i * g.dh;
        if (iy < 0 || iy >= g.h_in) continue;
        const T* xrow = xc + iy * xv.s2;
        const T* wrow = wci + i * wv.s2;
        for (int64_t j = 0; j < g.k_w; ++j) {
          const int64_t ix = x0 + j * g.dw;
          if (ix < 0 || ix >= g.w_in) continue;
          acc += load_as<C>(xrow[ix * xv.s3]) * load_as<C>(wrow[j * wv.s3]);
        }
      }
    }
    out[e] = cast<T>(acc);
  }
}

// Transposed: input (iy, ix) with tap (i, j) lands on oy = iy*sh + i*dh - ph (same for x);
// each output gathers the (iy, ix) that land on it. The kernel is (c_in, c_out/groups, kh, kw).
// Each tap's sum over input channels is formed first and then added, as the CPU's GEMM +
// col2im does.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    conv_transpose2d_kernel(T* WICK_RESTRICT out, int64_t n, ConvGeom g, const T* WICK_RESTRICT x, View4 xv,
                            const T* WICK_RESTRICT w, View4 wv) {
  kernel_entry();
  using C = conv_t<T>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    int64_t r = e;
    const int64_t ox = r % g.wo;
    r /= g.wo;
    const int64_t oy = r % g.ho;
    r /= g.ho;
    const int64_t co = r % g.c_out, b = r / g.c_out;
    const int64_t grp = co / g.cog, col = co % g.cog;
    const T* xb = x + xv.off + b * xv.s0 + grp * g.cig * xv.s1;
    const T* wb = w + wv.off + grp * g.cig * wv.s0 + col * wv.s1;
    C acc = C(0);
    for (int64_t i = 0; i < g.k_h; ++i) {
      const int64_t ty = oy + g.ph - i * g.dh;
      if (ty < 0 || ty % g.sh != 0) continue;
      const int64_t iy = ty / g.sh;
      if (iy >= g.h_in) continue;
      for (int64_t j = 0; j < g.k_w; ++j) {
        const int64_t tx = ox + g.pw - j * g.dw;
        if (tx < 0 || tx % g.sw != 0) continue;
        const int64_t ix = tx / g.sw;
        if (ix >= g.w_in) continue;
        const T* xp = xb + iy * xv.s2 + ix * xv.s3;
        const T* wp = wb + i * wv.s2 + j * wv.s3;
        C tap = C(0);
        for (int64_t ci = 0; ci < g.cig; ++ci) tap += load_as<C>(xp[ci * xv.s1]) * load_as<C>(wp[ci * wv.s0]);
        acc += tap;
      }
    }
    out[e] = cast<T>(acc);
  }
}

StoragePtr run_conv(const GpuStorage& in, View4 xv, const Storage& kernel, View4 wv, const Conv2dShape& s,
                    bool transposed, const char* op) {
  DeviceGuard dg(in.ordinal());
  const ConvGeom g = geom(s, transposed);
  const int64_t n = int64_t(s.b) * g.c_out * g.ho * g.wo;
  auto out = new_storage(in.ordinal(), size_t(n), in.dtype());
  if (n == 0) return out;
  const GpuStorage& k = as_gpu(kernel);
  dispatch_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (transposed)
      launch_kernel(conv_transpose2d_kernel<T>, grid_for(n), kBlock, 0, in.stream(), out->ptr<T>(), n, g, in.ptr<T>(),
                    xv, k.ptr<T>(), wv);
    else
      launch_kernel(conv2d_kernel<T>, grid_for(n), kBlock, 0, in.stream(), out->ptr<T>(), n, g, in.ptr<T>(), xv,
                    k.ptr<T>(), wv);
    check_launch(op);
  });
  return out;
}

Conv2dShape as_2d(const Conv1dShape& s) {
  const auto& p = s.p;
  return Conv2dShape{s.b, s.c_in, 1, s.l_in, s.c_out, 1, s.k_size,
                     Conv2dParams{0, p.padding, 1, p.stride, 1, p.dilation, p.groups, 0, p.output_padding}};
}

}  // namespace

StoragePtr GpuStorage::conv1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                              const Conv1dShape& s) const {
  return run_conv(*this, view3_as_4(l), kernel, view3_as_4(kernel_l), as_2d(s), false, "conv1d");
}
StoragePtr GpuStorage::conv_transpose1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                                        const Conv1dShape& s) const {
  return run_conv(*this, view3_as_4(l), kernel, view3_as_4(kernel_l), as_2d(s), true, "conv_transpose1d");
}
StoragePtr GpuStorage::conv2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                              const Conv2dShape& s) const {
  return run_conv(*this, view4(l), kernel, view4(kernel_l), s, false, "conv2d");
}
StoragePtr GpuStorage::conv_transpose2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                                        const Conv2dShape& s) const {
  return run_conv(*this, view4(l), kernel, view4(kernel_l), s, true, "conv_transpose2d");
}

}  // namespace wick::gpu

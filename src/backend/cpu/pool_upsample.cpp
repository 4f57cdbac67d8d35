// Pooling and resampling on the CPU (NCHW, NCL for 1-D). Inputs are read through their
// strides; each output row (plane, y) is produced by one thread.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/resample.hpp"

namespace wick::cpu {
namespace {

// An (b, c, h, w) view: element (n, c, y, x) sits at off + n*sb + c*sc + y*sh + x*sw.
struct Img {
  size_t b, c, h, w;
  int64_t sb, sc, sh, sw;
  size_t off;
  size_t plane_base(size_t plane) const { return size_t(int64_t(off) + int64_t(plane / c) * sb + int64_t(plane % c) * sc); }
};
Img img4(const Layout& l) {
  return {l.shape[0], l.shape[1], l.shape[2], l.shape[3], l.strides[0], l.strides[1], l.strides[2], l.strides[3], l.offset};
}
Img img3(const Layout& l) {  // (b, c, l) as (b, c, 1, l)
  return {l.shape[0], l.shape[1], 1, l.shape[2], l.strides[0], l.strides[1], 0, l.strides[2], l.offset};
}

// Calls row(base, oy, out) for every output row; out points at wo contiguous outputs.
template <class T, class Row> void for_each_out_row(const Img& im, size_t ho, size_t wo, T* out, Row&& row) {
  const size_t rows = im.b * im.c * ho;
  if (rows == 0 || wo == 0) return;
  parallel_for(rows, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) row(im.plane_base(r / ho), r % ho, out + r * wo);
  }, std::max<size_t>(1, kParallelGrain / wo));
}

StoragePtr nearest(const CpuStorage& s, const Img& im, size_t ho, size_t wo) {
  auto out = new_storage(im.b * im.c * ho * wo, s.dtype());
  // src = floor(dst * in / out), exact in integers.
  std::vector<int64_t> xs(wo);
  for (size_t ox = 0; ox < wo; ++ox) xs[ox] = int64_t(nearest_src(ox, im.w, wo)) * im.sw;
  dispatch_dtype(s.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = s.ptr<T>();
    for_each_out_row(im, ho, wo, out->ptr<T>(), [&](size_t base, size_t oy, T* o) {
      const T* src = in + int64_t(base) + int64_t(nearest_src(oy, im.h, ho)) * im.sh;
      for (size_t ox = 0; ox < wo; ++ox) o[ox] = src[xs[ox]];
    });
  });
  return out;
}

// The taps of every destination index (src/ops/resample.hpp, shared with the GPU).
std::vector<LinearTap> linear_taps(size_t in, size_t out, bool align_corners, std::optional<double> scale) {
  const double ratio = linear_ratio(in, out, align_corners, scale.has_value(), scale.value_or(1.0));
  std::vector<LinearTap> taps(out);
  for (size_t d = 0; d < out; ++d) taps[d] = linear_tap(d, in, ratio, align_corners);
  return taps;
}

}  // namespace

StoragePtr CpuStorage::avg_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const {
  const Img im = img4(l);
  const size_t ho = (im.h - kh) / sh + 1, wo = (im.w - kw) / sw + 1;
  auto out = new_storage(im.b * im.c * ho * wo, dtype_);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_float_v<T>) {
      throw Error(ErrorKind::DType, std::string("avg_pool2d: needs a float dtype, got ") + dtype_name(dtype_));
    } else {
      using A = compute_t<T>;
      const T* in = ptr<T>();
      const A count = A(kh * kw);
      for_each_out_row(im, ho, wo, out->ptr<T>(), [&](size_t base, size_t oy, T* o) {
        for (size_t ox = 0; ox < wo; ++ox) {
          A acc = 0;
          for (size_t i = 0; i < kh; ++i) {
            const T* row = in + int64_t(base) + int64_t(oy * sh + i) * im.sh + int64_t(ox * sw) * im.sw;
            for (size_t j = 0; j < kw; ++j) acc += to_compute(row[int64_t(j) * im.sw]);
          }
          o[ox] = cast<T>(acc / count);
        }
      });
    }
  });
  return out;
}

StoragePtr CpuStorage::max_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const {
  const Img im = img4(l);
  const size_t ho = (im.h - kh) / sh + 1, wo = (im.w - kw) / sw + 1;
  auto out = new_storage(im.b * im.c * ho * wo, dtype_);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* in = ptr<T>();
    for_each_out_row(im, ho, wo, out->ptr<T>(), [&](size_t base, size_t oy, T* o) {
      for (size_t ox = 0; ox < wo; ++ox) {
        const T* win = in + int64_t(base) + int64_t(oy * sh) * im.sh + int64_t(ox * sw) * im.sw;
        o[ox] = max_window(win, int64_t(kh), int64_t(kw), im.sh, im.sw);
      }
    });
  });
  return out;
}

StoragePtr CpuStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  return nearest(*this, img3(l), 1, out_l);
}

StoragePtr CpuStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  return nearest(*this, img4(l), out_h, out_w);
}

StoragePtr CpuStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                           std::optional<double> scale_h, std::optional<double> scale_w) const {
  const Img im = img4(l);
  auto out = new_storage(im.b * im.c * out_h * out_w, dtype_);
  if (out->numel() == 0) return out;
  const auto ty = linear_taps(im.h, out_h, align_corners, scale_h);
  const auto tx = linear_taps(im.w, out_w, align_corners, scale_w);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_float_v<T>) {
      throw Error(ErrorKind::DType, std::string("upsample_bilinear2d: needs a float dtype, got ") + dtype_name(dtype_));
    } else {
      using A = compute_t<T>;
      const T* in = ptr<T>();
      for_each_out_row(im, out_h, out_w, out->ptr<T>(), [&](size_t base, size_t oy, T* o) {
        const LinearTap& y = ty[oy];
        const T* r0 = in + int64_t(base) + int64_t(y.i0) * im.sh;
        const T* r1 = in + int64_t(base) + int64_t(y.i1) * im.sh;
        const A wy0 = A(y.l0), wy1 = A(y.l1);
        for (size_t ox = 0; ox < out_w; ++ox) {
          const LinearTap& x = tx[ox];
          const int64_t x0 = int64_t(x.i0) * im.sw, x1 = int64_t(x.i1) * im.sw;
          const A wx0 = A(x.l0), wx1 = A(x.l1);
          const A v = bilinear_blend(wy0, wy1, wx0, wx1, A(to_compute(r0[x0])), A(to_compute(r0[x1])),
                                     A(to_compute(r1[x0])), A(to_compute(r1[x1])));
          o[ox] = cast<T>(v);
        }
      });
    }
  });
  return out;
}

}  // namespace wick::cpu

#pragma once
// Source coordinates of nearest and bilinear resampling, shared by the CPU and GPU backends so
// that both pick the same taps and weights. Products are never fused into an FMA (nvcc and
// hip-clang contract by default): the device then rounds exactly as the host does.
#include <cstddef>
#include <cstdint>

#include "ops/capabilities.hpp"
#include "ops/numeric.hpp"
#include "ops/reduce.hpp"
#include "wick/config.hpp"

namespace wick {

// Nearest: source index floor(dst * in / out), exact in integers.
WICK_HD size_t nearest_src(size_t dst, size_t in, size_t out) { return dst * in / out; }

// PyTorch's linear source index (area_pixel_compute_source_index, then the index and weight
// clamping of its CPU kernel). `ratio` comes from linear_ratio.
struct LinearTap {
  size_t i0, i1;
  double l0, l1;
};

WICK_HD double linear_ratio(size_t in, size_t out, bool align_corners, bool has_scale, double scale) {
  if (align_corners) return out > 1 ? double(in - 1) / double(out - 1) : 0.0;
  return has_scale ? 1.0 / scale : double(in) / double(out);
}

WICK_HD LinearTap linear_tap(size_t d, size_t in, double ratio, bool align_corners) {
  double src = align_corners ? mul_rn(ratio, double(d)) : mul_rn(ratio, double(d) + 0.5) - 0.5;
  if (src < 0) src = 0;
  size_t i0 = size_t(src);
  if (i0 > in - 1) i0 = in - 1;
  double l1 = src - double(i0);
  l1 = l1 < 0.0 ? 0.0 : (l1 > 1.0 ? 1.0 : l1);
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0 - l1, l1};
}

// wy0 * (wx0 * v00 + wx1 * v01) + wy1 * (wx0 * v10 + wx1 * v11), every product rounded alone.
template <class A>
WICK_HD A bilinear_blend(A wy0, A wy1, A wx0, A wx1, A v00, A v01, A v10, A v11) {
  const A top = mul_rn(wx0, v00) + mul_rn(wx1, v01);
  const A bot = mul_rn(wx0, v10) + mul_rn(wx1, v11);
  return mul_rn(wy0, top) + mul_rn(wy1, bot);
}

// Max pooling of one window (kh x kw taps, strides sh, sw from win): the first NaN wins, as in
// PyTorch; otherwise the first maximum.
template <class T> WICK_HD T max_window(const T* win, int64_t kh, int64_t kw, int64_t sh, int64_t sw) {
  T best = win[0];
  auto bv = to_compute(best);
  if (is_nan_val(bv)) return best;
  for (int64_t i = 0; i < kh; ++i) {
    for (int64_t j = 0; j < kw; ++j) {
      const T v = win[i * sh + j * sw];
      const auto cv = to_compute(v);
      if (is_nan_val(cv)) return v;
      if (cv > bv) {
        best = v;
        bv = cv;
      }
    }
  }
  return best;
}

}  // namespace wick

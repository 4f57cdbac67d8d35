// Convolutions on the CPU: im2col (or col2im for the transposed convs) plus one GEMM per
// (batch item, group). 1-D convolutions run as 2-D ones with a height of 1.
// Floats go through OpenBLAS in f32 (f16/bf16/f8e4m3/f32) or f64 and round once at the end.
// Integers use wrapping unsigned arithmetic, then wrap to the type: 64-bit for i64, 32-bit for
// the narrower types (exact, since the result is only kept modulo 2^32 or less).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <type_traits>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"

namespace wick::cpu {
namespace {

template <class T>
using conv_t = std::conditional_t<is_float_v<T>, compute_t<T>, std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>>;

// A contiguous copy of a view in the compute type; borrows the storage when nothing changes.
template <class C> struct Operand {
  std::unique_ptr<C[]> owned;
  const C* p = nullptr;
};
template <class C, class T> Operand<C> load(const T* src, const Layout& l) {
  Operand<C> o;
  if constexpr (std::is_same_v<C, T>) {
    if (l.is_contiguous()) {
      o.p = src + l.offset;
      return o;
    }
  }
  o.owned.reset(new C[std::max<size_t>(l.numel(), 1)]);
  map_strided(o.owned.get(), l.shape, [](T x) -> C {
    if constexpr (std::is_integral_v<C>) return C(x);  // modular: sign- or zero-extends
    else return C(to_compute(x));
  }, {&l}, src);
  o.p = o.owned.get();
  return o;
}

void check_blas_dims(size_t m, size_t n, size_t k, const char* op) {
  if (m > size_t(INT_MAX) || n > size_t(INT_MAX) || k > size_t(INT_MAX))
    throw Error(ErrorKind::Unsupported, std::string(op) + ": a GEMM dimension exceeds 2^31-1 (" + std::to_string(m) +
                                            ", " + std::to_string(n) + ", " + std::to_string(k) +
                                            "); split the batch or the image");
}

// c (m x n) = op(a) (m x k) * b (k x n), row-major; with ta, a is stored (k x m).
void gemm(bool ta, size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b, size_t ldb, float* c,
          size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(lda),
              b, int(ldb), 0.0f, c, int(ldc));
}
void gemm(bool ta, size_t m, size_t n, size_t k, const double* a, size_t lda, const double* b, size_t ldb, double* c,
          size_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0, a, int(lda),
              b, int(ldb), 0.0, c, int(ldc));
}
// Integer GEMM, wrapping. Tiles of kIb rows x kJb columns keep the accumulators in L1 and
// read each row of b once per tile of rows.
template <class U>
void gemm(bool ta, size_t m, size_t n, size_t k, const U* a, size_t lda, const U* b, size_t ldb, U* c, size_t ldc) {
  constexpr size_t kIb = 8, kJb = 512;
  const size_t nj = (n + kJb - 1) / kJb, ni = (m + kIb - 1) / kIb;
  parallel_for(ni * nj, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t i0 = (t / nj) * kIb, i1 = std::min(m, i0 + kIb);
      const size_t j0 = (t % nj) * kJb, j1 = std::min(n, j0 + kJb);
      for (size_t i = i0; i < i1; ++i) std::fill(c + i * ldc + j0, c + i * ldc + j1, U(0));
      for (size_t q = 0; q < k; ++q) {
        const U* bq = b + q * ldb;
        for (size_t i = i0; i < i1; ++i) {
          const U av = ta ? a[q * lda + i] : a[i * lda + q];
          if (av == 0) continue;
          U* ci = c + i * ldc;
          for (size_t j = j0; j < j1; ++j) ci[j] += av * bq[j];
        }
      }
    }
  }, std::max<size_t>(1, kParallelGrain / (kIb * kJb * std::max<size_t>(k, 1))));
}

// col[(c, i, j), (oy, ox)] = x[c, oy*sh - ph + i*dh, ox*sw - pw + j*dw], zero outside the image.
template <class C> void im2col(const C* x, C* col, size_t cig, const Conv2dShape& s, size_t ho, size_t wo) {
  const auto& p = s.p;
  const size_t n = ho * wo, rows = cig * s.k_h * s.k_w, hw = s.h_in * s.w_in;
  parallel_for(rows, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const size_t c = r / (s.k_h * s.k_w), i = (r / s.k_w) % s.k_h, j = r % s.k_w;
      const C* xc = x + c * hw;
      C* out = col + r * n;
      for (size_t oy = 0; oy < ho; ++oy) {
        C* o = out + oy * wo;
        const int64_t iy = int64_t(oy * p.stride_h + i * p.dilation_h) - int64_t(p.padding_h);
        if (iy < 0 || iy >= int64_t(s.h_in)) {
          std::fill(o, o + wo, C(0));
          continue;
        }
        const C* row = xc + size_t(iy) * s.w_in;
        const int64_t x0 = int64_t(j * p.dilation_w) - int64_t(p.padding_w);
        for (size_t ox = 0; ox < wo; ++ox) {
          const int64_t ix = x0 + int64_t(ox * p.stride_w);
          o[ox] = (ix >= 0 && ix < int64_t(s.w_in)) ? row[ix] : C(0);
        }
      }
    }
  }, std::max<size_t>(1, kParallelGrain / std::max<size_t>(n, 1)));
}

template <class C> void conv2d_forward(const C* x, const C* w, C* y, const Conv2dShape& s, const char* op) {
  const auto& p = s.p;
  const size_t g = p.groups, cig = s.c_in / g, cog = s.c_out / g;
  const size_t ho = s.h_out(), wo = s.w_out(), n = ho * wo, kk = cig * s.k_h * s.k_w, hw = s.h_in * s.w_in;
  if (kk == 0) {  // no input channels: every output is an empty sum
    std::fill(y, y + s.b * s.c_out * n, C(0));
    return;
  }
  check_blas_dims(cog, n, kk, op);
  // A 1x1 kernel with unit stride and no padding reads the image as it is.
  const bool direct = s.k_h == 1 && s.k_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.padding_h == 0 &&
                      p.padding_w == 0;
  std::unique_ptr<C[]> col(direct ? nullptr : new C[kk * n]);
  for (size_t b = 0; b < s.b; ++b) {
    for (size_t grp = 0; grp < g; ++grp) {
      const C* xg = x + (b * s.c_in + grp * cig) * hw;
      const C* src = xg;
      if (!direct) {
        im2col(xg, col.get(), cig, s, ho, wo);
        src = col.get();
      }
      gemm(false, cog, n, kk, w + grp * cog * kk, kk, src, n, y + (b * s.c_out + grp * cog) * n, n);
    }
  }
}

// Transposed conv: col = W_g^T x_g, then every column tap is added at its output position.
template <class C> void conv2d_transposed(const C* x, const C* w, C* y, const Conv2dShape& s, const char* op) {
  const auto& p = s.p;
  const size_t g = p.groups, cig = s.c_in / g, cog = s.c_out / g;
  const size_t ho = s.h_out_transposed(), wo = s.w_out_transposed(), n_out = ho * wo;
  const size_t n_in = s.h_in * s.w_in, taps = s.k_h * s.k_w, kk = cog * taps;
  std::fill(y, y + s.b * s.c_out * n_out, C(0));
  if (cig == 0 || kk == 0 || n_in == 0) return;
  check_blas_dims(kk, n_in, cig, op);
  std::unique_ptr<C[]> col(new C[kk * n_in]);
  for (size_t b = 0; b < s.b; ++b) {
    for (size_t grp = 0; grp < g; ++grp) {
      gemm(true, kk, n_in, cig, w + grp * cig * kk, kk, x + (b * s.c_in + grp * cig) * n_in, n_in, col.get(), n_in);
      C* yg = y + (b * s.c_out + grp * cog) * n_out;
      // Each output channel is written by one thread only.
      parallel_for(cog, [&](size_t c0, size_t c1) {
        for (size_t co = c0; co < c1; ++co) {
          C* yc = yg + co * n_out;
          for (size_t i = 0; i < s.k_h; ++i) {
            for (size_t j = 0; j < s.k_w; ++j) {
              const C* cr = col.get() + (co * taps + i * s.k_w + j) * n_in;
              for (size_t iy = 0; iy < s.h_in; ++iy) {
                const int64_t oy = int64_t(iy * p.stride_h + i * p.dilation_h) - int64_t(p.padding_h);
                if (oy < 0 || oy >= int64_t(ho)) continue;
                C* yrow = yc + size_t(oy) * wo;
                const C* crow = cr + iy * s.w_in;
                const int64_t x0 = int64_t(j * p.dilation_w) - int64_t(p.padding_w);
                for (size_t ix = 0; ix < s.w_in; ++ix) {
                  const int64_t ox = x0 + int64_t(ix * p.stride_w);
                  if (ox >= 0 && ox < int64_t(wo)) yrow[ox] += crow[ix];
                }
              }
            }
          }
        }
      }, std::max<size_t>(1, kParallelGrain / std::max<size_t>(taps * n_in, 1)));
    }
  }
}

StoragePtr run_conv2d(const CpuStorage& in, const Layout& l, const Storage& kernel, const Layout& kl,
                      const Conv2dShape& s, bool transposed, const char* op) {
  const size_t ho = transposed ? s.h_out_transposed() : s.h_out();
  const size_t wo = transposed ? s.w_out_transposed() : s.w_out();
  const size_t out_n = s.b * s.c_out * ho * wo;
  auto out = new_storage(out_n, in.dtype());
  if (out_n == 0) return out;
  dispatch_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = conv_t<T>;
    Operand<C> x = load<C>(in.ptr<T>(), l);
    Operand<C> w = load<C>(as_cpu(kernel).ptr<T>(), kl);
    std::unique_ptr<C[]> tmp;
    C* y;
    if constexpr (std::is_same_v<C, T>) {
      y = out->template ptr<T>();
    } else {
      tmp.reset(new C[out_n]);
      y = tmp.get();
    }
    if (transposed) conv2d_transposed(x.p, w.p, y, s, op);
    else conv2d_forward(x.p, w.p, y, s, op);
    if constexpr (!std::is_same_v<C, T>) {
      T* o = out->template ptr<T>();
      parallel_for(out_n, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) o[i] = cast<T>(y[i]);
      });
    }
  });
  return out;
}

// (b, c, l) as (b, c, 1, l).
Layout as_2d(const Layout& l) {
  return Layout({l.shape[0], l.shape[1], 1, l.shape[2]}, {l.strides[0], l.strides[1], 0, l.strides[2]}, l.offset);
}
Conv2dShape as_2d(const Conv1dShape& s) {
  const auto& p = s.p;
  return Conv2dShape{s.b, s.c_in, 1, s.l_in, s.c_out, 1, s.k_size,
                     Conv2dParams{0, p.padding, 1, p.stride, 1, p.dilation, p.groups, 0, p.output_padding}};
}

}  // namespace

StoragePtr CpuStorage::conv1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                              const Conv1dShape& s) const {
  return run_conv2d(*this, as_2d(l), kernel, as_2d(kernel_l), as_2d(s), false, "conv1d");
}
StoragePtr CpuStorage::conv_transpose1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                                        const Conv1dShape& s) const {
  return run_conv2d(*this, as_2d(l), kernel, as_2d(kernel_l), as_2d(s), true, "conv_transpose1d");
}
StoragePtr CpuStorage::conv2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                              const Conv2dShape& s) const {
  return run_conv2d(*this, l, kernel, kernel_l, s, false, "conv2d");
}
StoragePtr CpuStorage::conv_transpose2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                                        const Conv2dShape& s) const {
  return run_conv2d(*this, l, kernel, kernel_l, s, true, "conv_transpose2d");
}

}  // namespace wick::cpu

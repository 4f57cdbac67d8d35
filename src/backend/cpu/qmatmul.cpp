// CPU quantized matmul y = x @ W^T. Reference path: each weight row dequantized once to f32, dot
// products in f32 (double accumulation is not needed: the bound is the activation's, see tests).
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/quant.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "ops/dtype_dispatch.hpp"

namespace wick::cpu {

StoragePtr CpuStorage::qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l) const {
  const size_t m = x_l.shape[0], n = q.rows, k = q.cols;
  const size_t row_bytes = numel() / n;
  // x to f32 rows once.
  std::vector<float> xf(m * k);
  dispatch_float(x.dtype(), "qmatmul", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = as_cpu(x).ptr<T>();
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < k; ++j) xf[i * k + j] = cast<float>(xp[x_l.offset + i * size_t(x_l.strides[0]) + j]);
  });
  std::vector<float> yf(m * n);
  struct Ctx {
    const QuantDims* q;
    const uint8_t* w;
    size_t row_bytes, m, n, k;
    const float* x;
    float* y;
  } ctx{&q, static_cast<const uint8_t*>(data()), row_bytes, m, n, k, xf.data(), yf.data()};
  parallel_chunks(n,
                  [](void* p, size_t r) {
                    const Ctx& c = *static_cast<const Ctx*>(p);
                    std::vector<float> wr(c.k);
                    dequantize_to_f32(c.q->type, c.w + r * c.row_bytes, c.row_bytes, wr.data(), c.k);
                    for (size_t i = 0; i < c.m; ++i) {
                      const float* xr = c.x + i * c.k;
                      float acc = 0;
                      for (size_t j = 0; j < c.k; ++j) acc += xr[j] * wr[j];
                      c.y[i * c.n + r] = acc;
                    }
                  },
                  &ctx);
  auto out = new_storage(m * n, x.dtype());
  dispatch_float(x.dtype(), "qmatmul", [&](auto tag) {
    using T = decltype(tag);
    T* o = out->ptr<T>();
    for (size_t i = 0; i < m * n; ++i) o[i] = cast<T>(yf[i]);
  });
  return out;
}

}  // namespace wick::cpu

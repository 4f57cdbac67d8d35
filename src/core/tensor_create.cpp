// Constructors: from data, fills, ranges, random, and cat/stack.
#include <cmath>

#include "core/checks.hpp"

namespace wick {

Tensor Tensor::from_data(const void* data, const Shape& shape, DType dtype, Device device) {
  size_t n = checked_numel(shape, "from_data");
  if (n && !data) throw Error(ErrorKind::Argument, "from_data: null data pointer for shape " + shape_str(shape));
  return wrap(backend_for(device).from_host(data, n, dtype), shape, dtype, device);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return wrap(backend_for(device).zeros(checked_numel(shape, "zeros"), dtype), shape, dtype, device);
}

static Tensor full_impl(const Shape& shape, Scalar value, DType dtype, Device device, const char* op) {
  auto s = backend_for(device).alloc(checked_numel(shape, op), dtype);
  s->const_set(value, Layout::contiguous(shape));
  return wrap(std::move(s), shape, dtype, device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full_impl(shape, 1, dtype, device, "ones"); }

Tensor Tensor::full(const Shape& shape, Scalar value, DType dtype, Device device) {
  return full_impl(shape, value, dtype, device, "full");
}

Tensor Tensor::arange(double start, double end, double step, DType dtype, Device device) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw Error(ErrorKind::Argument, "arange: start, end and step must be finite and step nonzero (got " +
                                         std::to_string(start) + ", " + std::to_string(end) + ", " +
                                         std::to_string(step) + ")");
  double count = std::ceil((end - start) / step);
  // Checked while still a double: converting one past 2^64 to size_t is undefined.
  if (!(count < 9.2e18))
    throw Error(ErrorKind::Shape, "arange: (" + std::to_string(end) + " - " + std::to_string(start) + ") / " +
                                      std::to_string(step) + " gives " + std::to_string(count) +
                                      " elements, more than a tensor can hold (2^63 - 1); use a larger step");
  size_t n = count > 0 ? size_t(count) : 0;
  // Computed in f64 on the host as start + i * step (as PyTorch), then cast once.
  check_host_alloc(checked_bytes(n, sizeof(double), "arange"), "arange");
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + double(i) * step;
  return Tensor::from_vector(v, {n}, device).to_dtype(dtype);
}

Tensor Tensor::eye(size_t n, DType dtype, Device device) {
  checked_numel({n, n}, "eye");  // n * n must fit before the diagonal view below is made
  Tensor z = zeros({n, n}, dtype, device);
  // the diagonal is a strided view with stride n + 1
  z.storage()->const_set(1, Layout({n}, {int64_t(n) + 1}, 0));
  return z;
}

static void check_random_dtype(DType dtype, const char* op) {
  if (!dtype_is_float(dtype))
    throw Error(ErrorKind::DType, std::string(op) + ": random tensors are floating point; asked for " +
                                      dtype_name(dtype) + ", create f32 and convert with to_dtype()");
}

Tensor Tensor::rand(const Shape& shape, DType dtype, Device device, uint64_t seed, double lo, double hi) {
  check_random_dtype(dtype, "rand");
  return wrap(backend_for(device).rand_uniform(checked_numel(shape, "rand"), dtype, seed, lo, hi), shape, dtype, device);
}

Tensor Tensor::randn(const Shape& shape, DType dtype, Device device, uint64_t seed, double mean, double std) {
  check_random_dtype(dtype, "randn");
  return wrap(backend_for(device).rand_normal(checked_numel(shape, "randn"), dtype, seed, mean, std), shape, dtype, device);
}

static Tensor cat_impl(const std::vector<Tensor>& ts, int64_t dim, const char* op) {
  const Tensor& a = ts[0];
  check_defined(a, op);
  size_t d = norm_dim(dim, a.rank(), op);
  Shape out_shape = a.shape();
  out_shape[d] = 0;
  for (const Tensor& t : ts) {
    check_same_device(a, t, op);
    check_same_dtype(a, t, op);
    bool ok = t.rank() == a.rank();
    for (size_t i = 0; ok && i < a.rank(); ++i) ok = i == d || t.shape()[i] == a.shape()[i];
    if (!ok)
      throw Error(ErrorKind::Shape, std::string(op) + ": " + describe(t) + " does not match " + describe(a) +
                                        " outside dim " + std::to_string(d));
    if (__builtin_add_overflow(out_shape[d], t.shape()[d], &out_shape[d]))
      throw Error(ErrorKind::Shape, std::string(op) + ": the sizes along dim " + std::to_string(d) + " of the " +
                                        std::to_string(ts.size()) + " tensors add up past 2^64");
  }
  auto out = backend_for(a.device()).alloc(checked_numel(out_shape, op), a.dtype());
  // Each input is d1 rows (the dims before `d`) of d2 contiguous elements in the output.
  size_t d1 = 1, inner = 1;
  for (size_t i = 0; i < d; ++i) d1 *= out_shape[i];
  for (size_t i = d + 1; i < out_shape.size(); ++i) inner *= out_shape[i];
  size_t dst_row = out_shape[d] * inner, col = 0;
  for (const Tensor& t : ts) {
    size_t d2 = t.shape()[d] * inner;
    if (d2 == 0 || d1 == 0) continue;
    Tensor c = t.contiguous();
    c.storage()->copy2d(*out, d1, d2, d2, dst_row, c.layout().offset, col);
    col += d2;
  }
  return wrap(std::move(out), out_shape, a.dtype(), a.device());
}

Tensor Tensor::cat(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) throw Error(ErrorKind::Argument, "cat: needs at least one tensor");
  return cat_impl(ts, dim, "cat");
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) throw Error(ErrorKind::Argument, "stack: needs at least one tensor");
  check_defined(ts[0], "stack");
  size_t d = norm_dim(dim, ts[0].rank() + 1, "stack");
  std::vector<Tensor> us;
  for (const Tensor& t : ts) {
    check_defined(t, "stack");
    if (t.shape() != ts[0].shape())
      throw Error(ErrorKind::Shape, "stack: all tensors need the same shape, got " + describe(ts[0]) + " and " +
                                        describe(t));
    us.push_back(t.unsqueeze(int64_t(d)));
  }
  return cat_impl(us, int64_t(d), "stack");
}

}  // namespace wick

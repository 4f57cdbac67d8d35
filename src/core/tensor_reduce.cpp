// Tensor reductions, scans and sorts. sum/min/max/arg* and cumsum/arg_sort/top_k go straight to the
// backend; mean, var, log_sum_exp and norm are composites of backend entries, so every backend
// has them once it has the primitives.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/checks.hpp"

namespace wick {
namespace {

Shape squeezed(const Shape& s, const std::vector<size_t>& dims) {
  Shape out;
  size_t di = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    if (di < dims.size() && dims[di] == d) ++di;
    else out.push_back(s[d]);
  }
  return out;
}

Tensor reduce_impl(const Tensor& t, ReduceOp op, const std::vector<size_t>& dims, bool keepdim) {
  const char* name = reduce_op_name(op);
  if (op != ReduceOp::Sum)
    for (size_t d : dims)
      if (t.shape()[d] == 0)
        throw Error(ErrorKind::Shape, std::string(name) + ": dim " + std::to_string(d) + " of " + describe(t) +
                                          " is empty, so there is no " + name +
                                          "; reduce a non-empty dim or check the shape");
  const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  Shape kept = t.shape();
  for (size_t d : dims) kept[d] = 1;
  Shape shape = keepdim ? kept : squeezed(t.shape(), dims);
  return wrap(t.storage()->reduce(op, t.layout(), dims), shape, is_arg ? DType::U32 : t.dtype(), t.device());
}

Tensor reduce_dims(const Tensor& t, ReduceOp op, const std::vector<int64_t>& dims, bool keepdim, const char* name) {
  check_defined(t, name);
  return reduce_impl(t, op, norm_dims(dims, t.rank(), name), keepdim);
}

// Half types compute their composites in f32 and round once at the end.
DType compute_dtype(DType d) { return (d == DType::F64) ? DType::F64 : DType::F32; }

size_t count_of(const Tensor& t, const std::vector<size_t>& dims) {
  size_t n = 1;
  for (size_t d : dims) n *= t.shape()[d];
  return n;
}

std::vector<int64_t> all_dims(size_t rank) {
  std::vector<int64_t> v(rank);
  for (size_t i = 0; i < rank; ++i) v[i] = int64_t(i);
  return v;
}

}  // namespace

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce_dims(*this, ReduceOp::Sum, dims, keepdim, "sum");
}
Tensor Tensor::sum_all() const {
  check_defined(*this, "sum_all");
  return reduce_dims(*this, ReduceOp::Sum, all_dims(rank()), false, "sum_all");
}
Tensor Tensor::max(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce_dims(*this, ReduceOp::Max, dims, keepdim, "max");
}
Tensor Tensor::min(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce_dims(*this, ReduceOp::Min, dims, keepdim, "min");
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  check_defined(*this, "argmax");
  return reduce_impl(*this, ReduceOp::ArgMax, {norm_dim(dim, rank(), "argmax")}, keepdim);
}
Tensor Tensor::argmin(int64_t dim, bool keepdim) const {
  check_defined(*this, "argmin");
  return reduce_impl(*this, ReduceOp::ArgMin, {norm_dim(dim, rank(), "argmin")}, keepdim);
}

// sum / n; an empty reduction gives 0 * inf = NaN, as PyTorch.
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  check_defined(*this, "mean");
  check_float(*this, "mean");
  auto nd = norm_dims(dims, rank(), "mean");
  const double n = double(count_of(*this, nd));
  Tensor x = to_dtype(compute_dtype(dtype_));
  Tensor s = reduce_impl(x, ReduceOp::Sum, nd, keepdim);
  return s.affine(n == 0 ? std::numeric_limits<double>::infinity() : 1.0 / n, 0.0).to_dtype(dtype_);
}

// Two passes (mean, then squared deviations) for accuracy; n - 1 = 0 gives NaN, as PyTorch.
Tensor Tensor::var(const std::vector<int64_t>& dims, bool keepdim, bool unbiased) const {
  check_defined(*this, "var");
  check_float(*this, "var");
  auto nd = norm_dims(dims, rank(), "var");
  const double n = double(count_of(*this, nd));
  const double denom = unbiased ? n - 1 : n;
  Tensor x = to_dtype(compute_dtype(dtype_));
  Tensor m = reduce_impl(x, ReduceOp::Sum, nd, true).affine(n == 0 ? INFINITY : 1.0 / n, 0.0);
  Tensor d2 = x.sub(m.broadcast_as(x.shape())).sqr();
  Tensor s = reduce_impl(d2, ReduceOp::Sum, nd, keepdim);
  return s.affine(denom <= 0 ? INFINITY : 1.0 / denom, 0.0).to_dtype(dtype_);
}

// log(sum(exp(x - m))) + m with m the max clamped to the finite range: rows of -inf give
// -inf (log 0 + m), a +inf gives +inf, and NaN propagates.
Tensor Tensor::log_sum_exp(const std::vector<int64_t>& dims, bool keepdim) const {
  check_defined(*this, "log_sum_exp");
  check_float(*this, "log_sum_exp");
  auto nd = norm_dims(dims, rank(), "log_sum_exp");
  const DType cd = compute_dtype(dtype_);
  Tensor x = to_dtype(cd);
  if (count_of(*this, nd) == 0) {  // log(0) = -inf, as PyTorch
    Shape kept = shape();
    for (size_t d : nd) kept[d] = 1;
    return Tensor::full(keepdim ? kept : squeezed(shape(), nd), -INFINITY, dtype_, device_);
  }
  const double big = cd == DType::F64 ? std::numeric_limits<double>::max() : double(std::numeric_limits<float>::max());
  Tensor m = reduce_impl(x, ReduceOp::Max, nd, true).clamp(-big, big);
  Tensor e = x.sub(m.broadcast_as(x.shape())).exp();
  Tensor s = reduce_impl(e, ReduceOp::Sum, nd, true).log().add(m);
  if (!keepdim) s = s.reshape(squeezed(shape(), nd));
  return s.to_dtype(dtype_);
}

Tensor Tensor::norm() const {
  check_defined(*this, "norm");
  check_float(*this, "norm");
  Tensor x = to_dtype(compute_dtype(dtype_));
  return x.sqr().sum_all().sqrt().to_dtype(dtype_);
}

Tensor Tensor::cumsum(int64_t dim) const {
  check_defined(*this, "cumsum");
  if (rank() == 0) return copy();
  size_t d = norm_dim(dim, rank(), "cumsum");
  return wrap_like(storage_->cumsum(layout_, d), shape(), *this);
}

Tensor Tensor::arg_sort_last_dim(bool ascending) const {
  check_defined(*this, "arg_sort_last_dim");
  return wrap(storage_->arg_sort(layout_, ascending), shape(), DType::U32, device_);
}

// The indices come from the backend (O(n log k) per row, not a full sort); the values are a
// gather of them, so they stay on the device.
std::pair<Tensor, Tensor> Tensor::top_k_last_dim(size_t k) const {
  check_defined(*this, "top_k_last_dim");
  const size_t n = rank() ? shape().back() : 0;
  if (rank() == 0 || k < 1 || k > n)
    throw Error(ErrorKind::Argument, "top_k_last_dim: k = " + std::to_string(k) + " for " + describe(*this) +
                                         (rank() == 0 ? "; a scalar has no last dim, reshape it to {1} first"
                                                      : "; k must be in [1, " + std::to_string(n) + "]"));
  Shape out_shape = shape();
  out_shape.back() = k;
  Tensor idx = wrap(storage_->top_k(layout_, k), out_shape, DType::U32, device_);
  return {gather(idx, -1), idx};
}

// Values are gathered here from the indices on the host: this keeps sort independent of
// the indexing family; a backend gather can replace it later.
std::pair<Tensor, Tensor> Tensor::sort_last_dim(bool ascending) const {
  check_defined(*this, "sort_last_dim");
  Tensor idx = arg_sort_last_dim(ascending);
  const size_t n = rank() ? shape().back() : 1, es = dtype_size(dtype_), total = numel();
  check_host_alloc(2 * checked_bytes(total, es, "sort_last_dim"), "sort_last_dim");
  std::vector<char> src(total * es), dst(total * es);
  copy_to_host(src.data());
  std::vector<uint32_t> ids = idx.to_vector<uint32_t>();
  for (size_t i = 0; i < total; ++i) {
    const size_t row = i / n;
    std::memcpy(dst.data() + i * es, src.data() + (row * n + ids[i]) * es, es);
  }
  return {Tensor::from_data(dst.data(), shape(), dtype_, device_), idx};
}

}  // namespace wick

// Tensor accessors, checks, data movement and conversions.
#include <algorithm>
#include <cstring>

#include "core/checks.hpp"
#include "ops/dtype_dispatch.hpp"

namespace wick {

size_t norm_dim(int64_t dim, size_t rank, const char* op) {
  int64_t r = int64_t(rank);
  if (dim < -r || dim >= r)
    throw Error(ErrorKind::Shape, std::string(op) + ": dim " + std::to_string(dim) + " is out of range for a rank-" +
                                      std::to_string(rank) + " tensor (allowed " + std::to_string(-r) + ".." +
                                      std::to_string(r - 1) + ")");
  return size_t(dim < 0 ? dim + r : dim);
}

std::vector<size_t> norm_dims(const std::vector<int64_t>& dims, size_t rank, const char* op) {
  std::vector<size_t> out;
  for (int64_t d : dims) out.push_back(norm_dim(d, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw Error(ErrorKind::Shape, std::string(op) + ": a dim is listed twice; list each dim once");
  return out;
}

std::string describe(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()) + " on " + t.device().name();
}

void check_defined(const Tensor& t, const char* op) {
  if (!t.defined())
    throw Error(ErrorKind::Argument, std::string(op) + ": the tensor is undefined (default-constructed); create it first");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op);
  check_defined(b, op);
  if (a.device() != b.device())
    throw Error(ErrorKind::Device, std::string(op) + ": operands are on different devices (" + describe(a) + " and " +
                                       describe(b) + "); move one with to_device()");
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw Error(ErrorKind::DType, std::string(op) + ": dtypes differ (" + describe(a) + " and " + describe(b) +
                                      "); convert one with to_dtype()");
}

void check_float(const Tensor& t, const char* op) {
  if (!dtype_is_float(t.dtype()))
    throw Error(ErrorKind::DType, std::string(op) + ": needs a floating-point tensor, got " + describe(t) +
                                      "; convert it with to_dtype(DType::F32)");
}

void check_writable(const Tensor& dst, const char* op) {
  const Layout& l = dst.layout();
  for (size_t d = 0; d < l.rank(); ++d)
    if (l.shape[d] > 1 && l.strides[d] == 0)
      throw Error(ErrorKind::Shape, std::string(op) + ": the destination " + describe(dst) +
                                        " is a broadcast view (dim " + std::to_string(d) +
                                        " has stride 0), so several of its elements are one "
                                        "memory location; write into a tensor made with contiguous() or copy()");
}

void check_device_start(const Tensor& dst, const Tensor& start, const char* op) {
  check_defined(start, op);
  check_same_device(dst, start, op);
  if (dtype_is_float(start.dtype()) || start.numel() != 1)
    throw Error(dtype_is_float(start.dtype()) ? ErrorKind::DType : ErrorKind::Shape,
                std::string(op) + ": start must hold one integer (u8, u32, i16, i32 or i64), got " + describe(start) +
                    "; make it with Tensor::full({1}, pos, DType::I32, device)");
}

Tensor wrap(StoragePtr s, const Shape& shape, DType dtype, Device device) {
  return Tensor(std::move(s), Layout::contiguous(shape), dtype, device);
}
Tensor wrap_like(StoragePtr s, const Shape& shape, const Tensor& like) {
  return wrap(std::move(s), shape, like.dtype(), like.device());
}

size_t Tensor::dim(int64_t d) const { return shape()[norm_dim(d, rank(), "dim")]; }

std::string Tensor::str() const { return "Tensor" + shape_str(shape()) + " " + dtype_name(dtype_) + " " + device_.name(); }

void Tensor::check_from_vector(size_t n, const Shape& shape) {
  const size_t want = checked_numel(shape, "from_vector");
  if (n != want)
    throw Error(ErrorKind::Shape, "from_vector: " + std::to_string(n) + " values do not fill shape " +
                                      shape_str(shape) + " (" + std::to_string(want) + " elements)");
}

void Tensor::check_to_vector(DType requested) const {
  check_defined(*this, "to_vector");
  if (requested != dtype_)
    throw Error(ErrorKind::DType, std::string("to_vector: asked for ") + dtype_name(requested) + " values from " +
                                      describe(*this) + "; call to_dtype(DType::" + dtype_name(dtype_) +
                                      ") first or ask for the matching type");
  check_host_alloc(checked_bytes(numel(), dtype_size(dtype_), "to_vector"), "to_vector");
}

void Tensor::check_item(DType requested) const {
  check_defined(*this, "item");
  if (numel() != 1)
    throw Error(ErrorKind::Shape, "item: needs a one-element tensor, got " + describe(*this) +
                                      "; use to_vector() for several values");
  check_to_vector(requested);
}

void Tensor::throw_host_alloc_failed(size_t numel, const char* op) const {
  throw Error(ErrorKind::OutOfMemory, std::string(op) + ": could not allocate host memory for " +
                                          std::to_string(numel) + " elements of " + describe(*this) +
                                          "; free memory or work on a part of the tensor (narrow)");
}

void Tensor::copy_to_host(void* dst) const {
  check_defined(*this, "copy_to_host");
  if (numel() == 0) return;
  // A view of part of a storage is copied on its device first, so only its own bytes cross.
  Tensor c = contiguous();
  if (c.layout().offset != 0 || c.storage()->numel() != numel()) c = c.copy();
  c.storage()->copy_to_host(dst);
}

double Tensor::to_scalar_double() const {
  if (numel() != 1)
    throw Error(ErrorKind::Shape, "to_scalar_double: needs a one-element tensor, got " + describe(*this));
  return to_dtype(DType::F64).to_vector<double>()[0];
}

Tensor Tensor::to_dtype(DType d) const {
  check_defined(*this, "to_dtype");
  if (d == dtype_) return *this;
  return wrap(storage_->to_dtype(layout_, d), shape(), d, device_);
}

Tensor Tensor::to_device(Device dev) const {
  check_defined(*this, "to_device");
  if (dev == device_) return *this;
  Tensor c = contiguous();
  const size_t bytes = checked_bytes(numel(), dtype_size(dtype_), "to_device");
  check_host_alloc(bytes, "to_device");
  std::vector<char> host;
  try {
    host.resize(bytes);
  } catch (const std::exception&) {  // std::bad_alloc
    throw_host_alloc_failed(numel(), "to_device");
  }
  c.copy_to_host(host.data());
  return wrap(backend_for(dev).from_host(host.data(), numel(), dtype_), shape(), dtype_, dev);
}

Tensor Tensor::contiguous() const {
  check_defined(*this, "contiguous");
  if (is_contiguous()) return *this;
  return copy();
}

Tensor Tensor::copy() const {
  check_defined(*this, "copy");
  return wrap(storage_->try_clone(layout_), shape(), dtype_, device_);
}

}  // namespace wick

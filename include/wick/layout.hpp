#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wick {

using Shape = std::vector<size_t>;

size_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

// A view into a storage: dims, strides in elements (0 for broadcast dims), start offset.
// Strides are signed so that a future negative-stride view fits; today all are >= 0.
struct Layout {
  Shape shape;
  std::vector<int64_t> strides;
  size_t offset = 0;

  Layout() = default;
  Layout(Shape shape, std::vector<int64_t> strides, size_t offset)
      : shape(std::move(shape)), strides(std::move(strides)), offset(offset) {}
  static Layout contiguous(const Shape& shape, size_t offset = 0);

  size_t rank() const { return shape.size(); }
  size_t numel() const { return shape_numel(shape); }
  bool is_contiguous() const;          // row-major, dims of size 1 ignored
  bool is_fortran_contiguous() const;  // column-major
  // One past the largest storage element this view can touch (0 when empty).
  size_t max_offset_plus_one() const;

  // Views. Each validates its arguments and throws Error(Shape) naming `op`.
  Layout narrow(size_t dim, size_t start, size_t len) const;
  Layout transpose(size_t d0, size_t d1) const;
  Layout permute(const std::vector<size_t>& order) const;
  Layout broadcast_as(const Shape& target) const;  // numpy rules, zero strides for new dims
  Layout squeeze(size_t dim) const;
  Layout unsqueeze(size_t dim) const;
  // A view with the new shape over the same elements, if the strides allow it.
  bool try_reshape(const Shape& new_shape, Layout* out) const;

  std::string str() const;
};

// Contiguous strides of a shape.
std::vector<int64_t> contiguous_strides(const Shape& s);
// Numpy broadcasting of two shapes; throws Error(Shape) naming op when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace wick

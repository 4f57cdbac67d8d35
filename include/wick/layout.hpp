#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wick {

using Shape = std::vector<size_t>;

// Size arithmetic, checked in one place. The product of a shape's non-zero dims must fit in
// int64_t (strides and offsets are int64_t); otherwise Error(Shape) names `op` and the shape.
// A shape with a zero dim has 0 elements, but its other dims still obey that bound, so every
// partial product of a valid shape fits as well.
size_t checked_numel(const Shape& s, const char* op);
size_t shape_numel(const Shape& s);  // checked_numel(s, "shape_numel")
// numel * elem_size, Error(Shape) naming op when it passes PTRDIFF_MAX (no pointer could span it).
size_t checked_bytes(size_t numel, size_t elem_size, const char* op);
// Error(OutOfMemory) naming op and the byte count when a host allocation of `bytes` is larger than
// this machine's physical memory: such a request either fails (std::bad_alloc; under ASan, an
// abort) or is overcommitted and killed on first touch, so it is refused before it is made.
void check_host_alloc(size_t bytes, const char* op);
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
// Numpy broadcasting of two shapes; throws Error(Shape) naming op when incompatible or when the
// result has too many elements (checked_numel).
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// The same rule without throwing: false when a and b are incompatible (the count is not checked).
bool try_broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace wick

#pragma once
// Host-side planning of a reduction, shared by the CPU and GPU backends: the split of a
// layout into kept and reduced dims and the checks (with their messages) that precede it.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_kinds.hpp"
#include "wick/error.hpp"
#include "wick/layout.hpp"

namespace wick {

// kept: the dims not in `dims`, at the layout's offset; red: the reduced dims, offset 0.
struct ReduceSplit {
  Layout kept, red;
  size_t n_out = 0, n_red = 0;
};

// dims must be sorted, unique and < rank (the core guarantees it).
inline ReduceSplit split_reduce_dims(const char* name, const Layout& l, const std::vector<size_t>& dims) {
  Shape kept_shape, red_shape;
  std::vector<int64_t> kept_strides, red_strides;
  size_t di = 0;
  for (size_t d = 0; d < l.rank(); ++d) {
    if (di < dims.size() && dims[di] == d) {
      red_shape.push_back(l.shape[d]);
      red_strides.push_back(l.strides[d]);
      ++di;
    } else {
      kept_shape.push_back(l.shape[d]);
      kept_strides.push_back(l.strides[d]);
    }
  }
  if (di != dims.size())
    throw Error(ErrorKind::Internal,
                std::string(name) + ": reduce dims must be sorted, unique and < rank " + std::to_string(l.rank()));
  ReduceSplit s;
  s.n_out = shape_numel(kept_shape);
  s.n_red = shape_numel(red_shape);
  s.kept = Layout(kept_shape, kept_strides, l.offset);
  s.red = Layout(red_shape, red_strides, 0);
  return s;
}

// A reduction over zero elements: sum is 0, the others have no value.
inline void check_empty_reduce(ReduceOp op, const char* name, const Layout& l) {
  if (op != ReduceOp::Sum)
    throw Error(ErrorKind::Shape, std::string(name) + ": cannot reduce over an empty dim of " + l.str() +
                                      "; the result would have no value (sum is the only reduction defined there)");
}

// Arg reductions return u32 positions.
inline void check_arg_reduce_size(bool is_arg, const char* name, size_t n_red) {
  if (is_arg && n_red > size_t(UINT32_MAX))
    throw Error(ErrorKind::Unsupported, std::string(name) + ": " + std::to_string(n_red) +
                                            " reduced elements do not fit the u32 index; reduce fewer dims");
}

}  // namespace wick

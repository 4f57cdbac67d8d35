// In-place writes into a view: copy_from and slice_set (a KV cache append). A destination whose
// elements form a few runs of rows goes through copy2d (a 2-D memcpy on the GPU, no ids, nothing
// uploaded); any other view through scatter_set with ids along dim 0. slice_set with a tensor
// start is one copy_strided_at whatever the layouts (the start is read on the device).
#include <string>

#include "core/checks.hpp"

namespace wick {

namespace {

// More copy2d calls than this (each a launch on the GPU) and one scatter_set is cheaper.
constexpr size_t kMaxCopy2dCalls = 64;

struct Run {
  size_t n;
  int64_t stride;
};

// The view's dims without size-1 dims, with neighbours merged where the outer one steps exactly
// over the inner one, outermost first.
std::vector<Run> merged_dims(const Layout& l) {
  std::vector<Run> out;
  for (size_t d = 0; d < l.rank(); ++d) {
    if (l.shape[d] == 1) continue;
    const Run r{l.shape[d], l.strides[d]};
    if (!out.empty() && out.back().stride == r.stride * int64_t(r.n)) {
      out.back() = Run{out.back().n * r.n, r.stride};
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// dst (a view) = src (same shape, dtype, device; contiguous, not sharing dst's storage).
void write_view(Tensor& dst, const Tensor& src, const char* op) {
  const Layout& l = dst.layout();
  const std::vector<Run> runs = merged_dims(l);
  if (runs.empty()) {  // one element
    src.storage()->copy2d(*dst.storage(), 1, 1, 1, 1, src.layout().offset, l.offset);
    return;
  }
  // Rows: the innermost run when it has unit stride (else rows of one element), and the run
  // outside it; every further run is a host loop of copy2d calls.
  const bool unit = runs.back().stride == 1;
  const size_t row_len = unit ? runs.back().n : 1;
  const size_t inner_runs = unit ? 2 : 1;  // runs covered by one copy2d
  const size_t n_rows = runs.size() >= inner_runs ? runs[runs.size() - inner_runs].n : 1;
  // (a single row gets its own length as stride: a 2-D memcpy needs a pitch of at least the width)
  const int64_t row_stride = runs.size() >= inner_runs ? runs[runs.size() - inner_runs].stride : int64_t(row_len);
  const size_t outer_dims = runs.size() > inner_runs ? runs.size() - inner_runs : 0;
  size_t calls = 1;
  for (size_t i = 0; i < outer_dims; ++i) calls *= runs[i].n;
  if (calls <= kMaxCopy2dCalls) {
    std::vector<size_t> idx(outer_dims, 0);
    const size_t per_call = n_rows * row_len;
    for (size_t c = 0; c < calls; ++c) {
      size_t dst_off = l.offset;
      for (size_t i = 0; i < outer_dims; ++i) dst_off += idx[i] * size_t(runs[i].stride);
      src.storage()->copy2d(*dst.storage(), n_rows, row_len, row_len, size_t(row_stride),
                            src.layout().offset + c * per_call, dst_off);
      for (size_t i = outer_dims; i-- > 0;) {  // next outer index, last dim fastest
        if (++idx[i] < runs[i].n) break;
        idx[i] = 0;
      }
    }
    return;
  }
  // Many short runs: one scatter along dim 0 of the view with ids 0..n-1 broadcast elsewhere.
  const size_t n0 = dst.shape()[0];
  Shape ids_shape(dst.rank(), 1);
  ids_shape[0] = n0;
  const Tensor ids =
      Tensor::arange(0, double(n0), 1, DType::I64, dst.device()).reshape(ids_shape).broadcast_as(dst.shape());
  try {
    dst.scatter_set(ids, src, 0);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(op) + ": " + e.what());
  }
}

void assign(Tensor& dst, const Tensor& src, const char* op) {
  if (dst.numel() == 0) return;
  check_writable(dst, op);
  // A source sharing the destination's storage may overlap it: read it out first.
  Tensor s = src.storage() == dst.storage() ? src.copy() : src.contiguous();
  write_view(dst, s, op);
}

// slice_set's checks shared by both starts; returns dim d normalised.
size_t check_slice_set(const Tensor& dst, const Tensor& src, int64_t dim) {
  check_defined(dst, "slice_set");
  check_defined(src, "slice_set");
  check_same_device(dst, src, "slice_set");
  check_same_dtype(dst, src, "slice_set");
  const size_t d = norm_dim(dim, dst.rank(), "slice_set");
  bool ok = src.rank() == dst.rank();
  for (size_t i = 0; ok && i < dst.rank(); ++i) ok = i == d || src.shape()[i] == dst.shape()[i];
  if (!ok)
    throw Error(ErrorKind::Shape, "slice_set: src " + describe(src) + " must match the destination " + describe(dst) +
                                      " in every dim except dim " + std::to_string(d));
  return d;
}

}  // namespace

void Tensor::copy_from(const Tensor& src) {
  check_defined(*this, "copy_from");
  check_defined(src, "copy_from");
  check_same_device(*this, src, "copy_from");
  check_same_dtype(*this, src, "copy_from");
  if (src.shape() != shape())
    throw Error(ErrorKind::Shape, "copy_from: src " + describe(src) + " must have the shape of the destination " +
                                      describe(*this) + "; narrow/reshape one of them first");
  assign(*this, src, "copy_from");
}

void Tensor::slice_set(const Tensor& src, int64_t dim, size_t start) {
  const size_t d = check_slice_set(*this, src, dim);
  const size_t n = src.shape()[d];
  if (start > shape()[d] || n > shape()[d] - start)  // written so that a huge start cannot wrap
    throw Error(ErrorKind::Shape, "slice_set: rows [" + std::to_string(start) + ", " + std::to_string(start) + " + " +
                                      std::to_string(n) + ") of dim " + std::to_string(d) + " do not fit in " +
                                      describe(*this) + " (size " + std::to_string(shape()[d]) +
                                      " there); a KV cache this full needs a larger capacity");
  Tensor region = narrow(int64_t(d), start, n);
  assign(region, src, "slice_set");
}

// The device reads start: nothing here may look at its value (a host read would synchronise).
void Tensor::slice_set(const Tensor& src, int64_t dim, const Tensor& start) {
  const size_t d = check_slice_set(*this, src, dim);
  check_device_start(*this, start, "slice_set");
  const size_t n = src.shape()[d];
  if (n > shape()[d])
    throw Error(ErrorKind::Shape, "slice_set: src " + describe(src) + " has " + std::to_string(n) + " rows along dim " +
                                      std::to_string(d) + ", more than the destination " + describe(*this) +
                                      " holds; a KV cache this full needs a larger capacity");
  if (src.numel() == 0) return;
  check_writable(*this, "slice_set");
  const Layout at_row0 = narrow(int64_t(d), 0, n).layout();
  // A source or start sharing the destination's storage may be overwritten while it is read.
  const Tensor s = src.storage() == storage() ? src.copy() : src;
  const Tensor p = start.storage() == storage() ? start.copy() : start;
  s.storage()->copy_strided_at(s.layout(), *storage(), at_row0, *p.storage(), p.layout().offset, layout().strides[d],
                               shape()[d] - n);
}

}  // namespace wick

// Views: new layouts over the same storage, never a copy (reshape copies only when it must).
#include "core/checks.hpp"

namespace wick {

// Every view is checked against its storage: layout math that let a view reach past the
// storage's last element would turn into out-of-bounds reads in the backends.
static Tensor view(const Tensor& t, Layout l, const char* op) {
  const size_t reach = l.max_offset_plus_one(), have = t.storage()->numel();
  if (reach > have)
    throw Error(ErrorKind::Internal, std::string(op) + ": the view " + l.str() + " reaches element " +
                                         std::to_string(reach - 1) + " of a storage of " + std::to_string(have) +
                                         " elements (" + describe(t) + "); this is a wick bug, please report it");
  return Tensor(t.storage(), std::move(l), t.dtype(), t.device());
}

Tensor Tensor::narrow(int64_t dim, size_t start, size_t len) const {
  check_defined(*this, "narrow");
  return view(*this, layout_.narrow(norm_dim(dim, rank(), "narrow"), start, len), "narrow");
}

Tensor Tensor::index(const std::vector<Range>& ranges) const {
  check_defined(*this, "index");
  if (ranges.size() > rank())
    throw Error(ErrorKind::Shape, "index: " + std::to_string(ranges.size()) + " ranges for " + describe(*this));
  Layout l = layout_;
  for (size_t d = 0; d < ranges.size(); ++d) {
    int64_t n = int64_t(l.shape[d]);
    int64_t s = ranges[d].start < 0 ? ranges[d].start + n : ranges[d].start;
    int64_t e = ranges[d].end < 0 ? ranges[d].end + n + 1 : ranges[d].end;  // -1 means the end
    // An end before the start selects nothing (Candle's t.i(1..0)); the start must lie in [0, n].
    if (s < 0 || s > n || e > n)
      throw Error(ErrorKind::Shape, "index: range [" + std::to_string(ranges[d].start) + ", " +
                                        std::to_string(ranges[d].end) + ") is out of bounds for dim " +
                                        std::to_string(d) + " of " + describe(*this));
    l = l.narrow(d, size_t(s), size_t(e > s ? e - s : 0));
  }
  return view(*this, l, "index");
}

std::vector<Tensor> Tensor::chunk(size_t n, int64_t dim) const {
  check_defined(*this, "chunk");
  size_t d = norm_dim(dim, rank(), "chunk");
  if (n == 0) throw Error(ErrorKind::Argument, "chunk: the number of chunks must be at least 1");
  size_t size = shape()[d], step = (size + n - 1) / n;
  std::vector<Tensor> out;
  for (size_t s = 0; s < size; s += step) out.push_back(narrow(int64_t(d), s, std::min(step, size - s)));
  if (size == 0) out.push_back(*this);
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_defined(*this, "transpose");
  return view(*this, layout_.transpose(norm_dim(d0, rank(), "transpose"), norm_dim(d1, rank(), "transpose")),
              "transpose");
}

Tensor Tensor::t() const {
  if (rank() < 2) throw Error(ErrorKind::Shape, "t: needs at least 2 dims, got " + describe(*this));
  return transpose(-2, -1);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  check_defined(*this, "permute");
  std::vector<size_t> o;
  for (int64_t d : order) o.push_back(norm_dim(d, rank(), "permute"));
  return view(*this, layout_.permute(o), "permute");
}

Tensor Tensor::broadcast_as(const Shape& s) const {
  check_defined(*this, "broadcast_as");
  return view(*this, layout_.broadcast_as(s), "broadcast_as");
}

Tensor Tensor::broadcast_left(const Shape& left) const {
  Shape s = left;
  s.insert(s.end(), shape().begin(), shape().end());
  return broadcast_as(s);
}

Tensor Tensor::reshape(const Shape& s) const {
  check_defined(*this, "reshape");
  const size_t want = checked_numel(s, "reshape");
  if (want != numel())
    throw Error(ErrorKind::Shape, "reshape: cannot reshape " + describe(*this) + " (" + std::to_string(numel()) +
                                      " elements) to " + shape_str(s) + " (" + std::to_string(want) + " elements)");
  Layout l;
  if (layout_.try_reshape(s, &l)) return view(*this, l, "reshape");
  Tensor c = copy();
  return view(c, Layout::contiguous(s), "reshape");
}

Tensor Tensor::flatten_all() const { return reshape({numel()}); }

Tensor Tensor::squeeze(int64_t dim) const {
  check_defined(*this, "squeeze");
  return view(*this, layout_.squeeze(norm_dim(dim, rank(), "squeeze")), "squeeze");
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  check_defined(*this, "unsqueeze");
  return view(*this, layout_.unsqueeze(norm_dim(dim, rank() + 1, "unsqueeze")), "unsqueeze");
}

Tensor Tensor::get(size_t i) const {
  check_defined(*this, "get");
  if (rank() == 0) throw Error(ErrorKind::Shape, "get: cannot index a rank-0 tensor");
  if (i >= shape()[0])
    throw Error(ErrorKind::Index, "get: index " + std::to_string(i) + " is out of range for dim 0 of " + describe(*this));
  return view(*this, layout_.narrow(0, i, 1).squeeze(0), "get");
}

}  // namespace wick

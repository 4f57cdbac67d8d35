// Indexing: index_select, gather, scatter, index_add, and the composites built on them (embedding,
// slice_assign/scatter, flip, repeat, pads, tril/triu, one_hot, meshgrid). Composites use only
// backend entries and other Tensor methods, so every backend gets them.
#include <algorithm>
#include <string>

#include "core/checks.hpp"
#include "ops/dtype_dispatch.hpp"

namespace wick {

namespace {

void check_ids(const Tensor& self, const Tensor& ids, const char* op) {
  check_same_device(self, ids, op);
  dispatch_index_dtype(ids.dtype(), op, [](auto) {});
}

std::string dim_str(size_t d) { return "dim " + std::to_string(d); }

// Backend entries report a bad id under their own name (scatter_set, index_select); this runs
// one and re-throws its Error(Index) under the name of the op the user called. With ids_shape,
// the position "[p]" in the flattened ids the entry saw is given back in the user's ids shape.
template <class F>
auto as_op(const char* op, const char* entry, F&& f, const Shape* ids_shape = nullptr) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Index) throw;
    std::string m = e.what();
    const std::string from = std::string(entry) + ": ";
    const size_t at = m.find(from);
    if (at == std::string::npos) throw;
    m = std::string(op) + ": " + m.substr(at + from.size());
    const std::string pos_key = " at position [", ids_key = "] of the ids ";
    const size_t p0 = m.find(pos_key), p1 = m.find(ids_key);
    if (ids_shape && p0 != std::string::npos && p1 != std::string::npos && p1 > p0) {
      size_t flat = std::stoull(m.substr(p0 + pos_key.size(), p1 - p0 - pos_key.size()));
      std::vector<size_t> idx(ids_shape->size());
      for (size_t d = idx.size(); d-- > 0;) {
        const size_t n = (*ids_shape)[d];
        idx[d] = n ? flat % n : 0;
        flat = n ? flat / n : 0;
      }
      std::string where = "[";
      for (size_t d = 0; d < idx.size(); ++d) where += (d ? ", " : "") + std::to_string(idx[d]);
      const size_t shape_end = m.find(']', p1 + ids_key.size());
      m = m.substr(0, p0) + pos_key.substr(0, pos_key.size() - 1) + where + ids_key + shape_str(*ids_shape) +
          m.substr(shape_end + 1);
    }
    throw Error(ErrorKind::Index, m);
  }
}

// The shapes of scatter/scatter_add (torch.scatter): same rank, ids <= src everywhere and
// ids <= self outside dim. Returns src narrowed to ids' shape.
Tensor check_scatter(const Tensor& self, const Tensor& ids, const Tensor& src, size_t dim, const char* op) {
  check_ids(self, ids, op);
  check_same_device(self, src, op);
  check_same_dtype(self, src, op);
  if (ids.rank() != self.rank() || src.rank() != self.rank())
    throw Error(ErrorKind::Shape, std::string(op) + ": self, ids and src need the same rank, got self " +
                                      describe(self) + ", ids " + describe(ids) + ", src " + describe(src));
  Tensor s = src;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (ids.shape()[d] > src.shape()[d] || (d != dim && ids.shape()[d] > self.shape()[d]))
      throw Error(ErrorKind::Shape, std::string(op) + ": ids " + describe(ids) + " is larger than src " +
                                        describe(src) + " or than self " + describe(self) + " in " + dim_str(d) +
                                        " (ids may exceed self only along the scatter dim " +
                                        std::to_string(dim) + ")");
    s = s.narrow(int64_t(d), 0, ids.shape()[d]);
  }
  return s;
}

// ids 0..n-1 along `dim` of `shape`, broadcast elsewhere (no memory beyond n ids).
Tensor arange_along(size_t n, const Shape& shape, size_t dim, Device dev) {
  Shape s(shape.size(), 1);
  s[dim] = n;
  return Tensor::arange(0, double(n), 1, DType::I64, dev).reshape(s).broadcast_as(shape);  // i64: never the sentinel
}

// Writes src into the view `region` (same shape, shares storage with a fresh copy).
void write_region(Tensor region, const Tensor& src) {
  if (region.numel() == 0) return;
  if (region.rank() == 0) {
    region = region.reshape({1});
  }
  Tensor s = src.reshape(region.shape());
  region.scatter_set(arange_along(region.shape()[0], region.shape(), 0, region.device()), s, 0);
}

}  // namespace

Tensor Tensor::index_select(const Tensor& ids, int64_t dim) const {
  check_defined(*this, "index_select");
  check_ids(*this, ids, "index_select");
  size_t d = norm_dim(dim, rank(), "index_select");
  if (ids.rank() != 1)
    throw Error(ErrorKind::Shape, "index_select: ids must be 1-D, got " + describe(ids) +
                                      "; flatten them with flatten_all() and reshape the result");
  Shape out = shape();
  out[d] = ids.numel();
  checked_numel(out, "index_select");  // before the backend sizes its output
  return wrap_like(storage_->index_select(*ids.storage(), layout_, ids.layout(), d), out, *this);
}

Tensor Tensor::gather(const Tensor& ids, int64_t dim) const {
  check_defined(*this, "gather");
  check_ids(*this, ids, "gather");
  size_t d = norm_dim(dim, rank(), "gather");
  if (ids.rank() != rank())
    throw Error(ErrorKind::Shape, "gather: ids need the same rank as self, got ids " + describe(ids) + " and self " +
                                      describe(*this));
  for (size_t i = 0; i < rank(); ++i)
    if (i != d && ids.shape()[i] > shape()[i])
      throw Error(ErrorKind::Shape, "gather: ids " + describe(ids) + " are larger than self " + describe(*this) +
                                        " in " + dim_str(i) + " (only the gather dim " + std::to_string(d) +
                                        " may differ freely)");
  return wrap_like(storage_->gather(layout_, *ids.storage(), ids.layout(), d), ids.shape(), *this);
}

void Tensor::scatter_set(const Tensor& ids, const Tensor& src, int64_t dim) {
  check_defined(*this, "scatter_set");
  size_t d = norm_dim(dim, rank(), "scatter_set");
  Tensor s = check_scatter(*this, ids, src, d, "scatter_set");
  storage_->scatter_set(layout_, *ids.storage(), ids.layout(), *s.storage(), s.layout(), d);
}

void Tensor::scatter_add_set(const Tensor& ids, const Tensor& src, int64_t dim) {
  check_defined(*this, "scatter_add_set");
  size_t d = norm_dim(dim, rank(), "scatter_add_set");
  Tensor s = check_scatter(*this, ids, src, d, "scatter_add_set");
  storage_->scatter_add_set(layout_, *ids.storage(), ids.layout(), *s.storage(), s.layout(), d);
}

Tensor Tensor::scatter(const Tensor& ids, const Tensor& src, int64_t dim) const {
  check_defined(*this, "scatter");
  size_t d = norm_dim(dim, rank(), "scatter");
  Tensor s = check_scatter(*this, ids, src, d, "scatter");
  Tensor out = copy();
  as_op("scatter", "scatter_set", [&] {
    out.storage()->scatter_set(out.layout(), *ids.storage(), ids.layout(), *s.storage(), s.layout(), d);
  });
  return out;
}

Tensor Tensor::scatter_add(const Tensor& ids, const Tensor& src, int64_t dim) const {
  check_defined(*this, "scatter_add");
  size_t d = norm_dim(dim, rank(), "scatter_add");
  Tensor s = check_scatter(*this, ids, src, d, "scatter_add");
  Tensor out = copy();
  as_op("scatter_add", "scatter_add_set", [&] {
    out.storage()->scatter_add_set(out.layout(), *ids.storage(), ids.layout(), *s.storage(), s.layout(), d);
  });
  return out;
}

Tensor Tensor::index_add(const Tensor& ids, const Tensor& src, int64_t dim) const {
  check_defined(*this, "index_add");
  check_ids(*this, ids, "index_add");
  check_same_device(*this, src, "index_add");
  check_same_dtype(*this, src, "index_add");
  size_t d = norm_dim(dim, rank(), "index_add");
  if (ids.rank() != 1)
    throw Error(ErrorKind::Shape, "index_add: ids must be 1-D, got " + describe(ids));
  bool ok = src.rank() == rank();
  for (size_t i = 0; ok && i < rank(); ++i) ok = src.shape()[i] == (i == d ? ids.numel() : shape()[i]);
  if (!ok)
    throw Error(ErrorKind::Shape, "index_add: src " + describe(src) + " must match self " + describe(*this) +
                                      " except along " + dim_str(d) + ", where it needs len(ids) = " +
                                      std::to_string(ids.numel()));
  return wrap_like(storage_->index_add(layout_, *ids.storage(), ids.layout(), *src.storage(), src.layout(), d),
                   shape(), *this);
}

Tensor Tensor::embedding(const Tensor& ids) const {
  check_defined(*this, "embedding");
  check_defined(ids, "embedding");
  check_ids(*this, ids, "embedding");
  if (rank() != 2)
    throw Error(ErrorKind::Shape, "embedding: the table must be 2-D (vocab, hidden), got " + describe(*this));
  Shape out = ids.shape();
  out.push_back(shape()[1]);
  const Tensor flat = ids.flatten_all();
  return as_op(
      "embedding", "index_select",
      [&] { return wrap_like(storage_->index_select(*flat.storage(), layout_, flat.layout(), 0), out, *this); },
      &ids.shape());
}

Tensor Tensor::slice_assign(const std::vector<Range>& ranges, const Tensor& src) const {
  check_defined(*this, "slice_assign");
  check_same_device(*this, src, "slice_assign");
  check_same_dtype(*this, src, "slice_assign");
  Tensor region_shape_probe;
  try {
    region_shape_probe = index(ranges);
  } catch (const Error& e) {
    std::string m = e.what();  // "...index: range ..." -> "slice_assign: range ..."
    const size_t at = m.find("index: ");
    throw Error(e.kind(), "slice_assign: " + (at == std::string::npos ? m : m.substr(at + 7)));
  }
  if (region_shape_probe.shape() != src.shape())
    throw Error(ErrorKind::Shape, "slice_assign: the ranges select " + shape_str(region_shape_probe.shape()) +
                                      " of " + describe(*this) + " but src is " + describe(src) +
                                      "; they must match exactly");
  Tensor out = copy();
  write_region(out.index(ranges), src);
  return out;
}

Tensor Tensor::slice_scatter(const Tensor& src, int64_t dim, size_t start) const {
  check_defined(*this, "slice_scatter");
  check_same_device(*this, src, "slice_scatter");
  check_same_dtype(*this, src, "slice_scatter");
  size_t d = norm_dim(dim, rank(), "slice_scatter");
  bool ok = src.rank() == rank();
  for (size_t i = 0; ok && i < rank(); ++i) ok = i == d || src.shape()[i] == shape()[i];
  if (!ok || start > shape()[d] || src.shape()[d] > shape()[d] - start)  // no wrap for a huge start
    throw Error(ErrorKind::Shape, "slice_scatter: src " + describe(src) + " must match self " + describe(*this) +
                                      " outside " + dim_str(d) + " and fit at start " + std::to_string(start) +
                                      " along it");
  Tensor out = copy();
  write_region(out.narrow(int64_t(d), start, src.shape()[d]), src);
  return out;
}

Tensor Tensor::flip(const std::vector<int64_t>& dims) const {
  check_defined(*this, "flip");
  std::vector<size_t> ds = norm_dims(dims, rank(), "flip");
  if (ds.empty()) return copy();
  Tensor out = *this;
  for (size_t d : ds) {
    double n = double(shape()[d]);
    out = out.index_select(Tensor::arange(n - 1, -1, -1, DType::I64, device_), int64_t(d));
  }
  return out;
}

Tensor Tensor::repeat(const Shape& times) const {
  check_defined(*this, "repeat");
  if (times.size() < rank())
    throw Error(ErrorKind::Shape, "repeat: " + std::to_string(times.size()) + " repeat counts for " + describe(*this) +
                                      "; give at least one per dim");
  // (s0, s1) -> (1, s0, 1, s1) -> broadcast (t0, s0, t1, s1) -> reshape (t0*s0, t1*s1).
  const size_t extra = times.size() - rank();
  Shape in(extra, 1), wide, out;
  in.insert(in.end(), shape().begin(), shape().end());
  Shape unsq;
  for (size_t i = 0; i < times.size(); ++i) {
    unsq.push_back(1);
    unsq.push_back(in[i]);
    wide.push_back(times[i]);
    wide.push_back(in[i]);
    out.push_back(times[i] * in[i]);
  }
  checked_numel(wide, "repeat");  // the repeated element count must fit
  Tensor r = reshape(unsq).broadcast_as(wide);
  return r.copy().reshape(out);
}

Tensor Tensor::pad_with_zeros(int64_t dim, size_t left, size_t right) const {
  check_defined(*this, "pad_with_zeros");
  size_t d = norm_dim(dim, rank(), "pad_with_zeros");
  if (left == 0 && right == 0) return *this;
  std::vector<Tensor> parts;
  Shape s = shape();
  if (left) {
    s[d] = left;
    parts.push_back(Tensor::zeros(s, dtype_, device_));
  }
  parts.push_back(*this);
  if (right) {
    s[d] = right;
    parts.push_back(Tensor::zeros(s, dtype_, device_));
  }
  return Tensor::cat(parts, int64_t(d));
}

Tensor Tensor::pad_with_same(int64_t dim, size_t left, size_t right) const {
  check_defined(*this, "pad_with_same");
  size_t d = norm_dim(dim, rank(), "pad_with_same");
  if (left == 0 && right == 0) return *this;
  const size_t n = shape()[d];
  if (n == 0)
    throw Error(ErrorKind::Shape, "pad_with_same: " + dim_str(d) + " of " + describe(*this) +
                                      " is empty, so it has no edge to replicate; use pad_with_zeros");
  std::vector<Tensor> parts;
  Shape s = shape();
  if (left) {
    s[d] = left;
    parts.push_back(narrow(int64_t(d), 0, 1).broadcast_as(s));
  }
  parts.push_back(*this);
  if (right) {
    s[d] = right;
    parts.push_back(narrow(int64_t(d), n - 1, 1).broadcast_as(s));
  }
  return Tensor::cat(parts, int64_t(d));
}

// Zeroes, row by row of the last two dims, the columns that tril/triu drop: const_set on
// narrowed views works on every backend without the element-wise family.
static Tensor tri(const Tensor& t, int64_t diagonal, bool lower, const char* op) {
  check_defined(t, op);
  if (t.rank() < 2)
    throw Error(ErrorKind::Shape, std::string(op) + ": needs at least 2 dims, got " + describe(t));
  Tensor out = t.copy();
  const int64_t m = int64_t(t.dim(-2)), n = int64_t(t.dim(-1));
  if (out.numel() == 0) return out;
  for (int64_t i = 0; i < m; ++i) {
    // tril keeps columns j <= i + diagonal; triu keeps j >= i + diagonal.
    int64_t lo, hi;  // zeroed columns [lo, hi)
    if (lower) {
      lo = std::clamp<int64_t>(i + diagonal + 1, 0, n);
      hi = n;
    } else {
      lo = 0;
      hi = std::clamp<int64_t>(i + diagonal, 0, n);
    }
    if (lo >= hi) continue;
    Tensor v = out.narrow(-2, size_t(i), 1).narrow(-1, size_t(lo), size_t(hi - lo));
    out.storage()->const_set(0, v.layout());
  }
  return out;
}

Tensor Tensor::tril(int64_t diagonal) const { return tri(*this, diagonal, true, "tril"); }
Tensor Tensor::triu(int64_t diagonal) const { return tri(*this, diagonal, false, "triu"); }

Tensor Tensor::one_hot(const Tensor& ids, size_t depth, DType dtype) {
  check_defined(ids, "one_hot");
  dispatch_index_dtype(ids.dtype(), "one_hot", [](auto) {});
  Shape s = ids.shape();
  s.push_back(depth);
  checked_numel(s, "one_hot");
  Tensor out = Tensor::zeros(s, dtype, ids.device());
  if (ids.numel() == 0) return out;
  Shape one = ids.shape();
  one.push_back(1);
  Tensor on = Tensor::ones({1}, dtype, ids.device()).reshape(Shape(one.size(), 1)).broadcast_as(one);
  try {
    out.scatter_set(ids.unsqueeze(-1), on, -1);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Index) throw;
    std::string m = e.what();  // "...scatter_set: id 7 at position ..." -> keep from "id"
    size_t at = m.find("scatter_set: ");
    throw Error(ErrorKind::Index, "one_hot (depth " + std::to_string(depth) + "): " +
                                      (at == std::string::npos ? m : m.substr(at + 13)));
  }
  return out;
}

std::vector<Tensor> Tensor::meshgrid(const std::vector<Tensor>& ts, bool xy_indexing) {
  if (ts.empty()) throw Error(ErrorKind::Argument, "meshgrid: needs at least one tensor");
  Shape out;
  for (const Tensor& t : ts) {
    check_same_device(ts[0], t, "meshgrid");
    check_same_dtype(ts[0], t, "meshgrid");
    if (t.rank() > 1)
      throw Error(ErrorKind::Shape, "meshgrid: every input must be 0-D or 1-D, got " + describe(t));
    out.push_back(t.numel());
  }
  // "xy" (Cartesian) swaps the first two output dims: input 0 varies along dim 1.
  std::vector<size_t> pos(ts.size());
  for (size_t k = 0; k < ts.size(); ++k) pos[k] = k;
  if (xy_indexing && ts.size() >= 2) {
    std::swap(pos[0], pos[1]);
    std::swap(out[0], out[1]);
  }
  std::vector<Tensor> grids;
  for (size_t k = 0; k < ts.size(); ++k) {
    Shape s(ts.size(), 1);
    s[pos[k]] = ts[k].numel();
    grids.push_back(ts[k].reshape(s).broadcast_as(out));
  }
  return grids;
}

}  // namespace wick

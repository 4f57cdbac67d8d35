#include "wick/layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

#include "wick/error.hpp"

namespace wick {

namespace {
constexpr uint64_t kMaxNumel = uint64_t(std::numeric_limits<int64_t>::max());

// a * b into *out; false on int64 overflow. *out holds the wrapped product either way (no UB).
bool mul_i64(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

std::string gib(size_t bytes) {
  std::ostringstream o;
  o.precision(3);
  o << double(bytes) / double(size_t(1) << 30) << " GiB";
  return o.str();
}
}  // namespace

size_t checked_numel(const Shape& s, const char* op) {
  uint64_t n = 1;
  bool zero = false;
  for (size_t d : s) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(n, uint64_t(d), &n) || n > kMaxNumel)
      throw Error(ErrorKind::Shape, std::string(op) + ": shape " + shape_str(s) +
                                        " has too many elements (the product of its non-zero dims passes 2^63 - 1, "
                                        "the most a stride or offset can hold); use smaller dims");
  }
  return zero ? 0 : size_t(n);
}

size_t shape_numel(const Shape& s) { return checked_numel(s, "shape_numel"); }

size_t checked_bytes(size_t numel, size_t elem_size, const char* op) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(numel, elem_size, &bytes) || bytes > size_t(std::numeric_limits<ptrdiff_t>::max()))
    throw Error(ErrorKind::Shape, std::string(op) + ": " + std::to_string(numel) + " elements of " +
                                      std::to_string(elem_size) + " bytes do not fit in the address space; use a "
                                      "smaller shape");
  return bytes;
}

void check_host_alloc(size_t bytes, const char* op) {
  static const size_t phys = [] {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && size_t(pages) <= std::numeric_limits<size_t>::max() / size_t(page))
      return size_t(pages) * size_t(page);
#endif
    return std::numeric_limits<size_t>::max();  // unknown: let the allocator decide
  }();
  if (bytes > phys)
    throw Error(ErrorKind::OutOfMemory, std::string(op) + ": needs " + std::to_string(bytes) + " bytes (" + gib(bytes) +
                                            ") of host memory, more than this machine has (" + gib(phys) +
                                            "); use a smaller shape or work on it in pieces");
}

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  checked_numel(s, "contiguous_strides");  // every partial product below then fits in int64_t
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= int64_t(s[i]);
  }
  return st;
}

Layout Layout::contiguous(const Shape& shape, size_t offset) { return Layout(shape, contiguous_strides(shape), offset); }

bool Layout::is_contiguous() const {
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != acc) return false;
    if (!mul_i64(acc, int64_t(shape[i]), &acc)) return false;
  }
  return true;
}

bool Layout::is_fortran_contiguous() const {
  int64_t acc = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && strides[i] != acc) return false;
    if (!mul_i64(acc, int64_t(shape[i]), &acc)) return false;
  }
  return true;
}

size_t Layout::max_offset_plus_one() const {
  if (std::find(shape.begin(), shape.end(), size_t(0)) != shape.end()) return 0;
  // Saturates: a view whose reach does not fit in 64 bits is larger than any storage.
  constexpr size_t kFar = std::numeric_limits<size_t>::max();
  if (offset > kMaxNumel) return kFar;
  int64_t hi = int64_t(offset), step = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (strides[i] > 0 &&
        (shape[i] - 1 > kMaxNumel || !mul_i64(strides[i], int64_t(shape[i] - 1), &step) ||
         __builtin_add_overflow(hi, step, &hi)))
      return kFar;
  return size_t(hi) + 1;
}

static void check_dim(const Layout& l, size_t dim, const char* op) {
  if (dim >= l.rank())
    throw Error(ErrorKind::Shape, std::string(op) + ": dim " + std::to_string(dim) + " is out of range for shape " +
                                      shape_str(l.shape) + " (rank " + std::to_string(l.rank()) + ")");
}

Layout Layout::narrow(size_t dim, size_t start, size_t len) const {
  check_dim(*this, dim, "narrow");
  if (start > shape[dim] || len > shape[dim] - start)
    throw Error(ErrorKind::Shape, "narrow: start " + std::to_string(start) + " + len " + std::to_string(len) +
                                      " exceeds dim " + std::to_string(dim) + " of shape " + shape_str(shape));
  Layout r = *this;
  r.shape[dim] = len;
  int64_t skip = 0, off = 0;
  if (len > 0 && (!mul_i64(int64_t(start), strides[dim], &skip) ||
                  __builtin_add_overflow(int64_t(offset), skip, &off) || off < 0))
    throw Error(ErrorKind::Shape, "narrow: start " + std::to_string(start) + " of dim " + std::to_string(dim) +
                                      " moves the offset of " + str() + " past 2^63 - 1");
  if (len > 0) r.offset = size_t(off);
  return r;
}

Layout Layout::transpose(size_t d0, size_t d1) const {
  check_dim(*this, d0, "transpose");
  check_dim(*this, d1, "transpose");
  Layout r = *this;
  std::swap(r.shape[d0], r.shape[d1]);
  std::swap(r.strides[d0], r.strides[d1]);
  return r;
}

Layout Layout::permute(const std::vector<size_t>& order) const {
  std::vector<bool> seen(rank(), false);
  bool ok = order.size() == rank();
  for (size_t d : order) ok = ok && d < rank() && !seen[d] && (seen[d] = true);
  if (!ok) {
    std::string o = "[";
    for (size_t i = 0; i < order.size(); ++i) o += (i ? ", " : "") + std::to_string(order[i]);
    throw Error(ErrorKind::Shape, "permute: " + o + "] is not a permutation of the " + std::to_string(rank()) +
                                      " dims of shape " + shape_str(shape));
  }
  Layout r = *this;
  for (size_t i = 0; i < order.size(); ++i) {
    r.shape[i] = shape[order[i]];
    r.strides[i] = strides[order[i]];
  }
  return r;
}

Layout Layout::broadcast_as(const Shape& target) const {
  checked_numel(target, "broadcast_as");
  if (target.size() < rank())
    throw Error(ErrorKind::Shape, "broadcast_as: cannot broadcast shape " + shape_str(shape) + " to lower-rank " +
                                      shape_str(target));
  size_t lead = target.size() - rank();
  Layout r(target, std::vector<int64_t>(target.size(), 0), offset);
  for (size_t i = 0; i < rank(); ++i) {
    size_t t = target[lead + i];
    if (shape[i] == t) r.strides[lead + i] = strides[i];
    else if (shape[i] == 1) r.strides[lead + i] = 0;
    else
      throw Error(ErrorKind::Shape, "broadcast_as: cannot broadcast shape " + shape_str(shape) + " to " +
                                        shape_str(target) + " (dim " + std::to_string(i) + " is " +
                                        std::to_string(shape[i]) + ", neither 1 nor " + std::to_string(t) + ")");
  }
  return r;
}

Layout Layout::squeeze(size_t dim) const {
  check_dim(*this, dim, "squeeze");
  if (shape[dim] != 1) return *this;  // as PyTorch: squeezing a non-1 dim is a no-op
  Layout r = *this;
  r.shape.erase(r.shape.begin() + long(dim));
  r.strides.erase(r.strides.begin() + long(dim));
  return r;
}

Layout Layout::unsqueeze(size_t dim) const {
  if (dim > rank())
    throw Error(ErrorKind::Shape, "unsqueeze: dim " + std::to_string(dim) + " is out of range for shape " +
                                      shape_str(shape) + " (allowed 0.." + std::to_string(rank()) + ")");
  Layout r = *this;
  int64_t st = 1;
  if (dim < rank()) mul_i64(strides[dim], int64_t(shape[dim]), &st);  // a size-1 dim's stride is never used
  r.shape.insert(r.shape.begin() + long(dim), 1);
  r.strides.insert(r.strides.begin() + long(dim), st);
  return r;
}

bool Layout::try_reshape(const Shape& ns, Layout* out) const {
  if (checked_numel(ns, "reshape") != numel()) return false;
  if (numel() == 0 || is_contiguous()) {
    *out = Layout::contiguous(ns, offset);
    return true;
  }
  // PyTorch's view rule: group the old non-1 dims into runs that are contiguous with each
  // other, and split each run into new dims of the same total size.
  std::vector<size_t> od;
  std::vector<int64_t> os;
  for (size_t i = 0; i < rank(); ++i)
    if (shape[i] != 1) od.push_back(shape[i]), os.push_back(strides[i]);
  std::vector<int64_t> nst(ns.size(), 1);
  size_t oi = 0, ni = 0;
  while (ni < ns.size()) {
    if (ns[ni] == 1) { ++ni; continue; }
    if (oi >= od.size()) return false;
    size_t osz = od[oi], nsz = ns[ni], o_end = oi + 1, n_end = ni + 1;
    while (osz != nsz) {
      if (osz < nsz) {
        int64_t chained = 0;
        if (o_end >= od.size() || !mul_i64(os[o_end], int64_t(od[o_end]), &chained) || os[o_end - 1] != chained)
          return false;
        osz *= od[o_end++];
      } else {
        if (n_end >= ns.size()) return false;
        nsz *= ns[n_end++];
      }
    }
    int64_t acc = os[o_end - 1];
    for (size_t k = n_end; k-- > ni;) {
      nst[k] = acc;
      mul_i64(acc, int64_t(ns[k]), &acc);  // the last product is unused and may wrap
    }
    oi = o_end;
    ni = n_end;
  }
  if (oi != od.size()) return false;
  *out = Layout(ns, nst, offset);
  return true;
}

std::string Layout::str() const {
  std::ostringstream o;
  o << "shape " << shape_str(shape) << " strides [";
  for (size_t i = 0; i < strides.size(); ++i) o << (i ? ", " : "") << strides[i];
  o << "] offset " << offset;
  return o.str();
}

bool try_broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  size_t r = std::max(a.size(), b.size());
  Shape o(r);
  for (size_t i = 0; i < r; ++i) {
    size_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    size_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) o[i] = da;
    else if (da == 1) o[i] = db;
    else return false;
  }
  *out = std::move(o);
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  Shape out;
  if (!try_broadcast_shapes(a, b, &out))
    throw Error(ErrorKind::Shape, std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                                      " cannot be broadcast together (numpy rules: trailing dims must be equal or 1)");
  checked_numel(out, op);
  return out;
}

}  // namespace wick

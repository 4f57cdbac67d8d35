// matmul (and fast::matmul_swiglu), dot, mv: shape checks, batch broadcasting (zero strides, no
// copies), then one Storage::matmul call.
#include "core/checks.hpp"
#include "wick/fast.hpp"

namespace wick {

namespace {

// Backends take inner blocks that are row-major or column-major (a transposed view); any
// other inner layout (both strides > 1, a zero-stride broadcast) is made contiguous.
bool inner_is_blas_friendly(const Layout& l) {
  const size_t r = l.rank();
  const size_t rows = l.shape[r - 2], cols = l.shape[r - 1];
  if (rows == 0 || cols == 0) return true;
  const int64_t rs = l.strides[r - 2], cs = l.strides[r - 1];
  const int64_t R = int64_t(rows), C = int64_t(cols);
  bool row_major = (cols == 1 || cs == 1) && (rows == 1 || rs >= C);
  bool col_major = (rows == 1 || rs == 1) && (cols == 1 || cs >= R);
  return row_major || col_major;
}

// Merges the batch dims of both layouts jointly (dropping size-1 dims, fusing neighbours whose
// strides chain in both), so that a backend sees as few batch dims as possible; at least one.
void merge_batch_dims(Layout& a, Layout& b) {
  const size_t nb = a.rank() - 2;
  Shape dims;
  std::vector<int64_t> sa, sb;
  for (size_t d = 0; d < nb; ++d) {
    const size_t n = a.shape[d];
    if (n == 1) continue;
    if (!dims.empty() && sa.back() == a.strides[d] * int64_t(n) && sb.back() == b.strides[d] * int64_t(n)) {
      dims.back() *= n;
      sa.back() = a.strides[d];
      sb.back() = b.strides[d];
    } else {
      dims.push_back(n);
      sa.push_back(a.strides[d]);
      sb.push_back(b.strides[d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    sa.push_back(0);
    sb.push_back(0);
  }
  auto rebuild = [&](Layout& l, const std::vector<int64_t>& s) {
    const size_t r = l.rank();
    Shape shape = dims;
    std::vector<int64_t> strides = s;
    shape.push_back(l.shape[r - 2]);
    shape.push_back(l.shape[r - 1]);
    strides.push_back(l.strides[r - 2]);
    strides.push_back(l.strides[r - 1]);
    l = Layout(std::move(shape), std::move(strides), l.offset);
  };
  rebuild(a, sa);
  rebuild(b, sb);
}

// The operands of lhs.matmul(rhs), checked, as the backend takes them.
struct MatmulArgs {
  Tensor a, b;
  Layout la, lr;
  MatmulDims d;
  Shape out;
};
MatmulArgs matmul_args(const Tensor& lhs, const Tensor& rhs, const char* op) {
  check_same_device(lhs, rhs, op);
  check_same_dtype(lhs, rhs, op);
  if (lhs.rank() < 2 || rhs.rank() < 2)
    throw Error(ErrorKind::Shape, std::string(op) + ": both operands need at least 2 dims, got " + describe(lhs) +
                                      " and " + describe(rhs) +
                                      "; use dot() for 1-D x 1-D, mv() for matrix x vector, or unsqueeze() the vector");
  const size_t m = lhs.dim(-2), k = lhs.dim(-1), k2 = rhs.dim(-2), n = rhs.dim(-1);
  if (k != k2)
    throw Error(ErrorKind::Shape, std::string(op) + ": inner dims differ (" + describe(lhs) + " and " +
                                      describe(rhs) + ": lhs has k = " + std::to_string(k) + ", rhs has k = " +
                                      std::to_string(k2) + "); transpose or reshape one operand");
  const Shape lb(lhs.shape().begin(), lhs.shape().end() - 2), rb(rhs.shape().begin(), rhs.shape().end() - 2);
  Shape batch;
  if (!try_broadcast_shapes(lb, rb, &batch))
    throw Error(ErrorKind::Shape, std::string(op) + ": batch dims " + shape_str(lb) + " and " + shape_str(rb) +
                                      " do not broadcast (" + describe(lhs) + " and " + describe(rhs) +
                                      "); each batch dim must match or be 1");
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  so.insert(so.end(), {m, n});
  // Before any copy below: an output whose element count overflows is refused first.
  checked_numel(sa, op);
  checked_numel(sb, op);
  checked_numel(so, op);
  MatmulArgs r;
  r.a = inner_is_blas_friendly(lhs.layout()) ? lhs : lhs.contiguous();
  r.b = inner_is_blas_friendly(rhs.layout()) ? rhs : rhs.contiguous();
  r.la = r.a.layout().broadcast_as(sa);
  r.lr = r.b.layout().broadcast_as(sb);
  merge_batch_dims(r.la, r.lr);
  r.d = MatmulDims{checked_numel(batch, op), m, n, k};
  r.out = so;
  return r;
}

// The backend's product of checked operands.
Tensor run_matmul(const MatmulArgs& m, const Tensor& like) {
  return wrap_like(m.a.storage()->matmul(*m.b.storage(), m.d, m.la, m.lr), m.out, like);
}

}  // namespace

Tensor Tensor::matmul(const Tensor& rhs) const { return run_matmul(matmul_args(*this, rhs, "matmul"), *this); }

Tensor fast::matmul_swiglu(const Tensor& x, const Tensor& rhs) {
  const char* op = "matmul_swiglu";
  const MatmulArgs m = matmul_args(x, rhs, op);
  if (m.d.n % 2 != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": the product's last dim must be even (gate and up halves), got " +
                                      describe(rhs) + " for rhs");
  check_float(x, op);
  if (StoragePtr s = m.a.storage()->matmul_swiglu(*m.b.storage(), m.d, m.la, m.lr)) {
    Shape out = m.out;
    out.back() /= 2;
    return wrap_like(s, out, x);
  }
  return run_matmul(m, x).swiglu();  // the operands already checked (and copied, where BLAS needed it)
}

Tensor Tensor::dot(const Tensor& rhs) const {
  check_same_device(*this, rhs, "dot");
  if (rank() != 1 || rhs.rank() != 1)
    throw Error(ErrorKind::Shape, "dot: needs two 1-D tensors, got " + describe(*this) + " and " + describe(rhs) +
                                      "; use matmul() for matrices or mv() for matrix x vector");
  if (dim(0) != rhs.dim(0))
    throw Error(ErrorKind::Shape, "dot: lengths differ (" + describe(*this) + " and " + describe(rhs) + ")");
  return unsqueeze(0).matmul(rhs.unsqueeze(1)).reshape({});
}

Tensor Tensor::mv(const Tensor& v) const {
  check_same_device(*this, v, "mv");
  if (rank() != 2 || v.rank() != 1)
    throw Error(ErrorKind::Shape, "mv: needs a 2-D matrix and a 1-D vector, got " + describe(*this) + " and " +
                                      describe(v) + "; use matmul() for batched products");
  if (dim(1) != v.dim(0))
    throw Error(ErrorKind::Shape, "mv: the matrix has " + std::to_string(dim(1)) + " columns but the vector has " +
                                      std::to_string(v.dim(0)) + " elements (" + describe(*this) + " and " +
                                      describe(v) + ")");
  return matmul(v.unsqueeze(1)).reshape({dim(0)});
}

}  // namespace wick

// QTensor (wick/quant.hpp): the ggml type table lookups, validation, and one backend call per op.
// Backends see whole rows of blocks (QuantDims) and never an invalid shape or type.
#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>

#include "core/checks.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/quant_blocks.hpp"
#include "wick/fast.hpp"

namespace wick {
namespace {

std::string S(size_t v) { return std::to_string(v); }

const quant::GGMLTypeInfo& info(GGMLType t) {
  const quant::GGMLTypeInfo* p = quant::ggml_type_info(t);
  if (!p)
    throw Error(ErrorKind::Argument, "ggml type id " + S(uint32_t(t)) +
                                         " is not one ggml defines; the supported block types are " +
                                         ggml_supported_types());
  return *p;
}

// A block type QTensor can hold, else Error(Unsupported) naming it and the supported ones.
const quant::GGMLTypeInfo& check_type(GGMLType t, const char* op) {
  const quant::GGMLTypeInfo& i = info(t);
  if (!i.dequant)
    throw Error(ErrorKind::Unsupported, std::string(op) + ": ggml type " + i.name +
                                            " is not a block type wick computes with; supported: " +
                                            ggml_supported_types() + " (F32/F16/BF16 are ordinary Tensors)");
  return i;
}

// (rows, cols) of a shape whose last dim holds whole blocks.
QuantDims quant_dims(GGMLType t, const Shape& shape, const char* op) {
  const quant::GGMLTypeInfo& i = check_type(t, op);
  if (shape.empty())
    throw Error(ErrorKind::Shape, std::string(op) + ": a quantized tensor needs at least one dim (rows of " +
                                      S(i.block_elems) + "-element blocks), got a scalar");
  const size_t cols = shape.back();
  if (cols % i.block_elems != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": " + i.name + " stores blocks of " + S(i.block_elems) +
                                      " elements along the last dim, but it is " + S(cols) + " (shape " +
                                      shape_str(shape) + "); pad the rows to a multiple of " + S(i.block_elems) +
                                      " or pick a type with smaller blocks (Q8_0, Q4_0: 32)");
  const size_t n = checked_numel(shape, op);
  // Rows are the leading dims' product even when a row is empty (cols 0): a (3, 0) table still
  // has 3 rows for embedding's range check (found by the GGUF fuzzer).
  size_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    if (__builtin_mul_overflow(rows, shape[d], &rows))
      throw Error(ErrorKind::Shape, std::string(op) + ": the row count of " + shape_str(shape) + " overflows");
  return {t, cols ? n / cols : rows, cols};
}

size_t quant_bytes(const QuantDims& q, const char* op) {
  const quant::GGMLTypeInfo& i = info(q.type);
  return checked_bytes(q.rows * (q.cols / i.block_elems), i.block_bytes, op);
}

}  // namespace

// ---- the type table
const char* ggml_type_name(GGMLType t) { return info(t).name; }
size_t ggml_block_size(GGMLType t) { return info(t).block_elems; }
size_t ggml_type_size(GGMLType t) { return info(t).block_bytes; }
bool ggml_is_quantized(GGMLType t) { return info(t).block_elems > 1; }
bool ggml_type_supported(GGMLType t) {
  const quant::GGMLTypeInfo* p = quant::ggml_type_info(t);
  return p && p->dequant;
}

std::optional<GGMLType> ggml_type_from_name(const std::string& name) {
  std::string up = name;
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& t : quant::kGGMLTypes)
    if (up == t.name) return t.type;
  return std::nullopt;
}

std::optional<GGMLType> ggml_type_of(DType d) {
  switch (d) {
    case DType::F32:
      return GGMLType::F32;
    case DType::F16:
      return GGMLType::F16;
    case DType::BF16:
      return GGMLType::BF16;
    case DType::F64:
      return GGMLType::F64;
    case DType::I16:
      return GGMLType::I16;
    case DType::I32:
      return GGMLType::I32;
    case DType::I64:
      return GGMLType::I64;
    default:
      return std::nullopt;
  }
}

std::string ggml_supported_types() {
  std::string s;
  for (const auto& t : quant::kGGMLTypes)
    if (t.dequant) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

// ---- QTensor
QTensor::QTensor(std::shared_ptr<Storage> blocks, GGMLType type, Shape shape, Device device)
    : blocks_(std::move(blocks)), type_(type), shape_(std::move(shape)), device_(device) {
  const size_t want = quant_bytes(quant_dims(type_, shape_, "QTensor"), "QTensor");
  if (!blocks_ || blocks_->dtype() != DType::U8 || blocks_->numel() != want)
    throw Error(ErrorKind::Argument, "QTensor: the block storage must be U8 of " + S(want) + " bytes for " +
                                         ggml_type_name(type_) + " " + shape_str(shape_));
}

size_t QTensor::dim(int64_t d) const { return shape_[norm_dim(d, shape_.size(), "QTensor::dim")]; }
size_t QTensor::numel() const { return shape_numel(shape_); }
size_t QTensor::nbytes() const { return blocks_ ? blocks_->numel() : 0; }

std::string QTensor::str() const {
  if (!defined()) return "QTensor(undefined)";
  return "QTensor" + shape_str(shape_) + " " + ggml_type_name(type_) + " " + device_.name();
}

static void check_q(const QTensor& q, const char* op) {
  if (!q.defined())
    throw Error(ErrorKind::Argument, std::string(op) + ": the QTensor is undefined (default-constructed); "
                                                       "make one with QTensor::quantize or load it from a GGUF");
}

QTensor QTensor::from_bytes(GGMLType type, const Shape& shape, const void* data, size_t nbytes, Device device) {
  const QuantDims q = quant_dims(type, shape, "QTensor::from_bytes");
  const size_t want = quant_bytes(q, "QTensor::from_bytes");
  if (nbytes != want)
    throw Error(ErrorKind::Argument, std::string("QTensor::from_bytes: ") + ggml_type_name(type) + " " +
                                         shape_str(shape) + " is " + S(want) + " bytes (" + S(q.rows) + " rows of " +
                                         S(q.cols / ggml_block_size(type)) + " blocks of " +
                                         S(ggml_type_size(type)) + " bytes), got " + S(nbytes));
  if (want && !data) throw Error(ErrorKind::Argument, "QTensor::from_bytes: data is null");
  return QTensor(backend_for(device).from_host(data, want, DType::U8), type, shape, device);
}

QTensor QTensor::cat_rows(const std::vector<QTensor>& parts) {
  const char* op = "QTensor::cat_rows";
  if (parts.empty()) throw Error(ErrorKind::Argument, std::string(op) + ": no parts given");
  const QTensor& p0 = parts[0];
  check_q(p0, op);
  size_t rows = 0;
  std::vector<Tensor> bytes;
  for (const QTensor& p : parts) {
    check_q(p, op);
    if (p.rank() != 2 || p0.rank() != 2 || p.type() != p0.type() || p.dim(1) != p0.dim(1) || p.device() != p0.device())
      throw Error(ErrorKind::Argument, std::string(op) + ": every part must be a rank-2 matrix of one type, width and " +
                                           "device; got " + p0.str() + " and " + p.str());
    rows += p.dim(0);
    // The blocks as a U8 vector: rows are whole blocks, back to back, so stacking rows is joining bytes.
    bytes.emplace_back(p.storage(), Layout({p.nbytes()}, {1}, 0), DType::U8, p.device());
  }
  const Tensor joined = Tensor::cat(bytes, 0);
  return QTensor(joined.storage(), p0.type(), {rows, p0.dim(1)}, p0.device());
}

QTensor QTensor::to(Device device) const {
  check_q(*this, "QTensor::to");
  if (device == device_) return *this;
  const std::vector<uint8_t> host = to_bytes();
  return QTensor(backend_for(device).from_host(host.data(), host.size(), DType::U8), type_, shape_, device);
}

QTensor QTensor::rows(size_t start, size_t n) const {
  const char* op = "QTensor::rows";
  check_q(*this, op);
  if (rank() != 2) throw Error(ErrorKind::Shape, std::string(op) + ": needs a (rows, k) matrix, got " + str());
  const size_t total = dim(0);
  if (start > total || n > total - start)  // written so that a huge start cannot wrap
    throw Error(ErrorKind::Index, std::string(op) + ": rows [" + S(start) + ", " + S(start) + " + " + S(n) +
                                      ") are outside the " + S(total) + " rows of " + str());
  // Rows are whole blocks, back to back: rows [start, start + n) are one byte range.
  const size_t row_bytes = total ? nbytes() / total : 0;
  const Tensor bytes(blocks_, Layout({n * row_bytes}, {1}, start * row_bytes), DType::U8, device_);
  return QTensor(bytes.copy().storage(), type_, {n, dim(1)}, device_);
}

std::vector<uint8_t> QTensor::to_bytes() const {
  check_q(*this, "QTensor::to_bytes");
  check_host_alloc(nbytes(), "QTensor::to_bytes");
  std::vector<uint8_t> out(nbytes());
  if (!out.empty()) blocks_->copy_to_host(out.data());
  return out;
}

QTensor QTensor::quantize(const Tensor& x, GGMLType type) {
  const char* op = "QTensor::quantize";
  check_defined(x, op);
  if (x.dtype() != DType::F32 && x.dtype() != DType::F16 && x.dtype() != DType::BF16 && x.dtype() != DType::F64)
    throw Error(ErrorKind::DType, std::string(op) + ": needs f32, f16, bf16 or f64 values, got " + describe(x) +
                                      "; cast it with to_dtype(DType::F32)");
  const QuantDims q = quant_dims(type, x.shape(), op);
  Tensor xc = x.contiguous();
  StoragePtr blocks = xc.storage()->quantize(xc.layout(), q);
  return QTensor(std::move(blocks), type, x.shape(), x.device());
}

Tensor QTensor::dequantize(DType dtype) const {
  const char* op = "QTensor::dequantize";
  check_q(*this, op);
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error(ErrorKind::DType, std::string(op) + ": dequantizes to f32, f16 or bf16, not " + dtype_name(dtype) +
                                      "; dequantize to f32 and cast");
  const QuantDims q = quant_dims(type_, shape_, op);
  return wrap(blocks_->dequantize(q, dtype), shape_, dtype, device_);
}

namespace {

// w.matmul_t(x), reading x's rows from x_q8_1 where it is defined (fast::matmul_t_q8_1).
Tensor qmatmul_impl(const QTensor& w, const Tensor& x, const QTensor& x_q8_1) {
  const char* op = "qmatmul";
  check_q(w, op);
  if (x_q8_1.defined()) {
    check_q(x_q8_1, op);
    if (x_q8_1.type() != GGMLType::Q8_1 || !x.defined() || x_q8_1.shape() != x.shape() || x_q8_1.device() != x.device())
      throw Error(ErrorKind::Argument,
                  std::string(op) + ": x_q8_1 must be x's rows in Q8_1 (x's shape, on x's device), got " +
                      x_q8_1.str() + " for x " + (x.defined() ? describe(x) : std::string("undefined")) +
                      "; make it with QTensor::quantize(x, GGMLType::Q8_1)");
  }
  check_defined(x, op);
  const QuantDims q = quant_dims(w.type(), w.shape(), op);
  const Device dev = w.device();
  if (w.rank() != 2)
    throw Error(ErrorKind::Shape, std::string(op) + ": the quantized weight must be a (n, k) matrix, got " + w.str() +
                                      "; reshape stacked weights or index one matrix first");
  if (x.device() != dev)
    throw Error(ErrorKind::Device, std::string(op) + ": x is on " + x.device().name() + " but the weight " + w.str() +
                                       " is on " + dev.name() + "; move one with to()/to_device()");
  if (x.dtype() != DType::F32 && x.dtype() != DType::F16 && x.dtype() != DType::BF16)
    throw Error(ErrorKind::DType, std::string(op) + ": x must be f32, f16 or bf16, got " + describe(x) +
                                      "; cast it with to_dtype");
  if (x.rank() == 0 || x.dim(-1) != q.cols)
    throw Error(ErrorKind::Shape, std::string(op) + ": x's last dim must be the weight's k = " + S(q.cols) +
                                      " (y = x @ W^T, W " + w.str() + "), got " + describe(x));
  Shape out_shape = x.shape();
  out_shape.back() = q.rows;
  const size_t m = q.cols ? x.numel() / q.cols : 0;
  // (m, k) with a unit last stride: a view when the leading dims collapse, else one copy.
  if (m == 0 || q.rows == 0) return Tensor::zeros(out_shape, x.dtype(), dev);
  Tensor x2 = x.reshape({m, q.cols});
  if (x2.layout().strides.back() != 1 && q.cols > 1) x2 = x2.contiguous();
  const Storage* xq = x_q8_1.defined() ? x_q8_1.storage().get() : nullptr;
  return wrap(w.storage()->qmatmul(q, *x2.storage(), x2.layout(), xq), out_shape, x.dtype(), dev);
}

}  // namespace

Tensor QTensor::matmul_t(const Tensor& x) const { return qmatmul_impl(*this, x, QTensor()); }

Tensor fast::matmul_t_q8_1(const QTensor& w, const Tensor& x, const QTensor& x_q8_1) {
  return qmatmul_impl(w, x, x_q8_1);
}

std::pair<Tensor, Tensor> fast::add_rms_norm_matmul_t(const QTensor& w, const Tensor& x, const Tensor& residual,
                                                      const Tensor& weight, double eps) {
  // The fused path takes its operands exactly as the kernel reads them; anything else runs the two
  // ops, which check the operands and name what is wrong.
  const bool res = residual.defined();
  const auto same = [&](const Tensor& t) {
    return t.dtype() == x.dtype() && t.device() == w.device() && t.is_contiguous();
  };
  if (w.defined() && w.rank() == 2 && w.device().is_gpu() && x.defined() && same(x) && x.rank() == 2 && x.dim(0) == 1 &&
      x.dim(1) == w.shape()[1] && weight.defined() && same(weight) && weight.rank() == 1 && weight.dim(0) == x.dim(1) &&
      (!res || (same(residual) && residual.shape() == x.shape())) && eps >= 0) {
    const QuantDims q = quant_dims(w.type(), w.shape(), "add_rms_norm_matmul_t");
    NormArgs a;
    a.eps = eps;
    a.rms = true;
    a.weight = weight.storage().get();
    a.weight_offset = weight.layout().offset;
    StoragePtr sum;
    if (res) {
      a.residual = residual.storage().get();
      a.residual_offset = residual.layout().offset;
      a.sum = &sum;
    }
    if (StoragePtr y = w.storage()->qmatmul_rms_norm(q, *x.storage(), x.layout(), a))
      return {res ? wrap(sum, x.shape(), x.dtype(), w.device()) : x, wrap(y, {1, q.rows}, x.dtype(), w.device())};
  }
  // One row on a GPU: the norm writes the product's Q8_1 input, as a decode step's norm does.
  const bool q8 = x.defined() && x.device().is_gpu() && x.rank() >= 1 && x.dim(-1) > 0 && x.dim(-1) % 32 == 0 &&
                  x.numel() == x.dim(-1) && (x.dtype() == DType::F32 || x.dtype() == DType::F16 || x.dtype() == DType::BF16);
  QTensor hq;
  Tensor sum = x, h;
  if (res && q8)
    std::tie(sum, h, hq) = fast::add_rms_norm_q8_1(x, residual, weight, eps);
  else if (res)
    std::tie(sum, h) = x.add_rms_norm(residual, weight, eps);
  else if (q8)
    std::tie(h, hq) = fast::rms_norm_q8_1(x, weight, eps);
  else
    h = x.rms_norm(weight, eps);
  return {sum, qmatmul_impl(w, h, hq)};
}

Tensor QTensor::embedding(const Tensor& ids, DType dtype) const {
  const char* op = "QTensor::embedding";
  check_q(*this, op);
  check_defined(ids, op);
  if (rank() != 2)
    throw Error(ErrorKind::Shape, std::string(op) + ": the table must be (vocab, dim), got " + str());
  if (ids.device() != device_)
    throw Error(ErrorKind::Device, std::string(op) + ": ids are on " + ids.device().name() + " but the table " + str() +
                                       " is on " + device_.name() + "; move the ids with to_device()");
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error(ErrorKind::DType, std::string(op) + ": rows come out as f32, f16 or bf16, not " + dtype_name(dtype));
  dispatch_index_dtype(ids.dtype(), op, [](auto) {});
  const QuantDims q = quant_dims(type_, shape_, op);
  Shape out_shape = ids.shape();
  out_shape.push_back(q.cols);
  const Tensor flat = ids.flatten_all();
  if (flat.numel() == 0) return Tensor::zeros(out_shape, dtype, device_);
  return wrap(blocks_->qembedding(q, *flat.storage(), flat.layout(), dtype), out_shape, dtype, device_);
}

}  // namespace wick

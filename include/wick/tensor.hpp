#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "wick/device.hpp"
#include "wick/dtype.hpp"
#include "wick/error.hpp"
#include "wick/layout.hpp"

namespace wick {

class Storage;

// A value for fills and comparisons that keeps 64-bit integers exact.
class Scalar {
 public:
  Scalar(double v) : f_(v), i_(int64_t(v)), is_int_(false) {}
  Scalar(float v) : Scalar(double(v)) {}
  Scalar(int v) : f_(double(v)), i_(v), is_int_(true) {}
  Scalar(int64_t v) : f_(double(v)), i_(v), is_int_(true) {}
  Scalar(uint32_t v) : f_(double(v)), i_(v), is_int_(true) {}
  Scalar(size_t v) : f_(double(v)), i_(int64_t(v)), is_int_(true) {}
  double to_double() const { return f_; }
  int64_t to_int64() const { return i_; }
  bool is_int() const { return is_int_; }

 private:
  double f_;
  int64_t i_;
  bool is_int_;
};

// A range of one dim for Tensor::index: [start, end), end = -1 meaning "to the end". An end
// before the start selects an empty dim (Candle's t.i(1..0)).
struct Range {
  int64_t start = 0, end = -1;
};

struct Conv1dParams {
  size_t padding = 0, stride = 1, dilation = 1, groups = 1, output_padding = 0;
};
struct Conv2dParams {
  size_t padding_h = 0, padding_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1,
         groups = 1, output_padding_h = 0, output_padding_w = 0;
  static Conv2dParams uniform(size_t padding, size_t stride = 1, size_t dilation = 1, size_t groups = 1,
                              size_t output_padding = 0) {
    return {padding, padding, stride, stride, dilation, dilation, groups, output_padding, output_padding};
  }
};

// A tensor: shared storage plus a layout. Views share storage; ops return new tensors.
// Dims given as int64_t may be negative (counted from the end), as in PyTorch.
class Tensor {
 public:
  Tensor() = default;  // undefined tensor; most methods throw on it

  // ---- construction (src/core/tensor_create.cpp)
  static Tensor from_data(const void* data, const Shape& shape, DType dtype, Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& v, const Shape& shape, Device device = Device::cpu()) {
    check_from_vector(v.size(), shape);
    return from_data(v.data(), shape, dtype_of_v<T>, device);
  }
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor full(const Shape& shape, Scalar value, DType dtype, Device device = Device::cpu());
  static Tensor arange(double start, double end, double step, DType dtype, Device device = Device::cpu());
  static Tensor eye(size_t n, DType dtype, Device device = Device::cpu());
  // Philox-4x32-10: the same seed gives the same numbers on every backend.
  static Tensor rand(const Shape& shape, DType dtype, Device device, uint64_t seed, double lo = 0.0, double hi = 1.0);
  static Tensor randn(const Shape& shape, DType dtype, Device device, uint64_t seed, double mean = 0.0,
                      double std = 1.0);
  static Tensor cat(const std::vector<Tensor>& ts, int64_t dim);
  static Tensor stack(const std::vector<Tensor>& ts, int64_t dim);
  static std::vector<Tensor> meshgrid(const std::vector<Tensor>& ts, bool xy_indexing = false);
  static Tensor one_hot(const Tensor& ids, size_t depth, DType dtype);

  // ---- accessors (src/core/tensor.cpp)
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return layout_.shape; }
  size_t rank() const { return layout_.shape.size(); }
  size_t dim(int64_t d) const;  // size of one dim
  size_t numel() const { return layout_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Layout& layout() const { return layout_; }
  bool is_contiguous() const { return layout_.is_contiguous(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  std::string str() const;  // "Tensor[2, 3] f32 cpu"

  // ---- data out, conversion, copies (src/core/tensor.cpp)
  template <class T> std::vector<T> to_vector() const {
    check_to_vector(dtype_of_v<T>);  // Error(OutOfMemory) for more than the host's memory
    std::vector<T> out;
    try {
      out.resize(numel());
    } catch (const std::exception&) {  // std::bad_alloc, std::length_error: only wick::Error leaves
      throw_host_alloc_failed(numel(), "to_vector");
    }
    copy_to_host(out.data());
    return out;
  }
  void copy_to_host(void* dst) const;  // numel * dtype_size bytes, row-major; synchronises
  template <class T> T item() const {  // a one-element tensor (any rank), as PyTorch
    check_item(dtype_of_v<T>);
    return to_vector<T>()[0];
  }
  double to_scalar_double() const;  // one-element tensor of any dtype
  Tensor to_dtype(DType dtype) const;
  Tensor to_device(Device device) const;
  Tensor contiguous() const;  // itself when already contiguous
  Tensor copy() const;        // always a new storage

  // ---- views, no copy (src/core/tensor_view.cpp)
  Tensor narrow(int64_t dim, size_t start, size_t len) const;
  Tensor index(const std::vector<Range>& ranges) const;  // one Range per leading dim
  std::vector<Tensor> chunk(size_t n, int64_t dim) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // swaps the last two dims
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor broadcast_as(const Shape& shape) const;
  Tensor broadcast_left(const Shape& left) const;
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else a copy
  Tensor flatten_all() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor get(size_t i) const;  // index the first dim, dropping it

  // ---- element-wise (src/core/tensor_elementwise.cpp)
  Tensor exp() const;
  Tensor log() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor neg() const;
  Tensor recip() const;
  Tensor sqr() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor gelu() const;      // tanh approximation
  Tensor gelu_erf() const;  // exact
  Tensor erf() const;
  Tensor relu() const;
  Tensor silu() const;
  Tensor sigmoid() const;
  Tensor ceil() const;
  Tensor floor() const;
  Tensor round() const;  // half away from zero, as Candle (Rust f32::round)
  // round(x * 10^decimals) / 10^decimals, as Candle (src/core/tensor_composite.cpp); decimals < 0
  // rounds to tens, hundreds, ... Integers: unchanged for decimals >= 0 (see docs/semantics.md).
  Tensor round_to(int decimals) const;
  Tensor sign() const;
  Tensor affine(double mul, double add) const;  // x * mul + add
  Tensor powf(double e) const;
  Tensor elu(double alpha) const;
  // Binary ops broadcast both operands (numpy rules); dtypes must match.
  Tensor add(const Tensor& o) const;
  Tensor sub(const Tensor& o) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor pow(const Tensor& exponent) const;  // exp(log(x) * e) for floats
  // Comparisons broadcast and return u8 (1 or 0).
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor eq(Scalar s) const;
  Tensor ne(Scalar s) const;
  Tensor lt(Scalar s) const;
  Tensor le(Scalar s) const;
  Tensor gt(Scalar s) const;
  Tensor ge(Scalar s) const;
  // this is the condition (any integer dtype, nonzero = true); the three broadcast together.
  Tensor where_cond(const Tensor& on_true, const Tensor& on_false) const;
  Tensor clamp(Scalar lo, Scalar hi) const;
  // Scalar arithmetic: the scalar is converted to this tensor's dtype.
  Tensor add(Scalar s) const;
  Tensor sub(Scalar s) const;
  Tensor mul(Scalar s) const;
  Tensor div(Scalar s) const;
  Tensor maximum(Scalar s) const;
  Tensor minimum(Scalar s) const;

  // ---- reductions (src/core/tensor_reduce.cpp). Half types accumulate in f32.
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor sum_all() const;
  Tensor max(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor min(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;  // u32
  Tensor argmin(int64_t dim, bool keepdim = false) const;  // u32
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims, bool keepdim = false, bool unbiased = true) const;
  Tensor log_sum_exp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor norm() const;  // Frobenius norm of all elements
  Tensor cumsum(int64_t dim) const;
  Tensor arg_sort_last_dim(bool ascending = true) const;  // u32
  std::pair<Tensor, Tensor> sort_last_dim(bool ascending = true) const;  // values, u32 indices
  std::pair<Tensor, Tensor> top_k_last_dim(size_t k) const;  // the k largest along the last dim: values, u32 indices

  // ---- indexing (src/core/tensor_index.cpp). ids: u8 u32 i16 i32 i64; out of range is Error(Index).
  Tensor index_select(const Tensor& ids, int64_t dim) const;
  Tensor gather(const Tensor& ids, int64_t dim) const;
  Tensor scatter(const Tensor& ids, const Tensor& src, int64_t dim) const;      // copy, then set
  Tensor scatter_add(const Tensor& ids, const Tensor& src, int64_t dim) const;  // copy, then add
  void scatter_set(const Tensor& ids, const Tensor& src, int64_t dim);          // in place
  void scatter_add_set(const Tensor& ids, const Tensor& src, int64_t dim);      // in place
  Tensor index_add(const Tensor& ids, const Tensor& src, int64_t dim) const;
  Tensor embedding(const Tensor& ids) const;  // this is the (vocab, hidden) table
  Tensor slice_assign(const std::vector<Range>& ranges, const Tensor& src) const;
  Tensor slice_scatter(const Tensor& src, int64_t dim, size_t start) const;
  // In place: this[.., start:start+src.dim(dim), ..] = src (a KV cache append). this may be a view
  // of a bigger storage (its other elements are untouched); shapes match except along dim; same
  // dtype and device; src any layout.
  void slice_set(const Tensor& src, int64_t dim, size_t start);
  // The same with the start row held in a tensor on this tensor's device (one element, u8 u32 i16
  // i32 i64, any shape and layout), read by the device itself: no synchronisation or host copy, so
  // a captured GPU graph can replay the write at a new position. An out-of-range start is clamped
  // to [0, dim size - src.dim(dim)] (XLA's dynamic_update_slice) rather than an error: checking it
  // would need a host read.
  void slice_set(const Tensor& src, int64_t dim, const Tensor& start);
  void copy_from(const Tensor& src);  // in place: this (any view) = src, same shape, dtype, device
  Tensor flip(const std::vector<int64_t>& dims) const;
  Tensor repeat(const Shape& times) const;
  Tensor pad_with_zeros(int64_t dim, size_t left, size_t right) const;
  Tensor pad_with_same(int64_t dim, size_t left, size_t right) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // ---- linear algebra (src/core/tensor_linalg.cpp)
  Tensor matmul(const Tensor& rhs) const;  // (..., m, k) x (..., k, n), batch dims broadcast
  Tensor dot(const Tensor& rhs) const;     // 1-D x 1-D -> scalar tensor of shape []
  Tensor mv(const Tensor& v) const;        // (m, k) x (k) -> (m)

  // ---- convolution, pooling, resampling (src/core/tensor_conv.cpp). NCL / NCHW.
  Tensor conv1d(const Tensor& kernel, const Conv1dParams& p = {}) const;
  Tensor conv_transpose1d(const Tensor& kernel, const Conv1dParams& p = {}) const;
  Tensor conv2d(const Tensor& kernel, const Conv2dParams& p = {}) const;
  Tensor conv_transpose2d(const Tensor& kernel, const Conv2dParams& p = {}) const;
  Tensor avg_pool2d(size_t kh, size_t kw, size_t sh, size_t sw) const;
  Tensor max_pool2d(size_t kh, size_t kw, size_t sh, size_t sw) const;
  Tensor upsample_nearest1d(size_t out_l) const;
  Tensor upsample_nearest2d(size_t out_h, size_t out_w) const;
  // PyTorch's interpolate(mode="bilinear"): scale factors, when given, drive the source
  // coordinate as PyTorch does with recompute_scale_factor=False.
  Tensor upsample_bilinear2d(size_t out_h, size_t out_w, bool align_corners,
                             std::optional<double> scale_h = std::nullopt,
                             std::optional<double> scale_w = std::nullopt) const;

  // ---- fused nn ops (src/core/tensor_nn.cpp). Float dtypes; half types accumulate in f32 and
  // round once. Strided inputs are accepted (made contiguous first where the kernel needs it).
  Tensor softmax_last_dim() const;
  Tensor log_softmax_last_dim() const;
  // Over any dim (negative counts from the end), as candle_nn::ops::softmax / log_softmax: the
  // last dim runs the fused kernel; another dim is moved last, computed, and moved back.
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  // x / sqrt(mean(x^2, last dim) + eps) * weight; weight (last dim) may be an undefined Tensor().
  // wick/fast.hpp has the norms and silu_mul that also give their rows in Q8_1.
  Tensor rms_norm(const Tensor& weight, double eps) const;
  // {x + residual, (x + residual).rms_norm(weight, eps)} in one pass over the rows: both equal add
  // then rms_norm bit for bit (the sum rounded to the dtype first). residual: x's shape and dtype.
  std::pair<Tensor, Tensor> add_rms_norm(const Tensor& residual, const Tensor& weight, double eps) const;
  // (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased var, as PyTorch);
  // weight and bias are optional (undefined Tensor()).
  Tensor layer_norm(const Tensor& weight, const Tensor& bias, double eps) const;
  // Rotary embeddings, as candle_nn::rotary_emb. this is (b, h, t, d) for rope_i (interleaved
  // pairs) and rope (halves), (b, t, h, d) for rope_thd; cos and sin are (t, d/2) or (b, t, d/2).
  Tensor rope_i(const Tensor& cos, const Tensor& sin) const;
  Tensor rope(const Tensor& cos, const Tensor& sin) const;
  Tensor rope_thd(const Tensor& cos, const Tensor& sin) const;
  Tensor silu_mul(const Tensor& up) const;  // silu(this) * up, broadcasting as binary ops
  Tensor swiglu() const;  // silu(first half of the last dim) * second half

  // Internal: build from parts (used by the core and backends' tests).
  Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype, Device device)
      : storage_(std::move(storage)), layout_(std::move(layout)), dtype_(dtype), device_(device) {}

 private:
  static void check_from_vector(size_t n, const Shape& shape);
  void check_to_vector(DType requested) const;
  void check_item(DType requested) const;
  [[noreturn]] void throw_host_alloc_failed(size_t numel, const char* op) const;

  std::shared_ptr<Storage> storage_;
  Layout layout_;
  DType dtype_ = DType::F32;
  Device device_;
};

// Scaled dot-product attention without the (t_q x t_kv) score matrix in memory at once.
// q (b, h_q, t_q, d), k (b, h_kv, t_kv, d), v (b, h_kv, t_kv, d_v), h_q a multiple of h_kv;
// returns (b, h_q, t_q, d_v). scale defaults to 1/sqrt(d). causal: query i sees keys
// j <= i + t_kv - t_q (bottom-right aligned, as a KV cache needs; PyTorch's is_causal when
// t_q == t_kv). f16, bf16, f32, f64.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                 std::optional<double> scale = std::nullopt);
// attention where batch bi sees only its first L_bi keys: what attention(q[bi], k[bi, :, :L_bi],
// v[bi, :, :L_bi], causal, scale) gives, so causal is bottom-right aligned to L_bi (query i sees
// keys j <= i + L_bi - t_q). L_bi = kv_len[bi]: kv_len is u32, i32 or i64 on q's device, shape (b)
// or one element for every batch, read by the device (a decode step captured into a GPU graph
// replays with new lengths). Values outside [causal ? t_q : 1, t_kv] are clamped into it, not an
// error (checking would need a host read). f16/bf16 decode shapes stay on the device; others read
// kv_len to the host (see docs/semantics.md).
Tensor attention_kv_len(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kv_len, bool causal = false,
                        std::optional<double> scale = std::nullopt);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return a.add(b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return a.sub(b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return a.mul(b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return a.div(b); }
inline Tensor operator-(const Tensor& a) { return a.neg(); }

}  // namespace wick

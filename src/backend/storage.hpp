#pragma once
// The backend contract: Candle's BackendStorage as C++ virtuals. Every backend implements
// every entry for every dtype where the math is defined. The core has validated shapes,
// dtypes and devices before a call arrives; a backend checks only what the core cannot
// (index values, allocation failures) and throws wick::Error for those.
//
// Conventions: a Layout says where an operand's elements are inside its storage (any
// strides, offset, zero-stride broadcast). Every op that returns a StoragePtr returns a
// new contiguous row-major storage holding exactly the result's elements.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "ops/op_kinds.hpp"
#include "wick/quant.hpp"
#include "wick/tensor.hpp"

namespace wick {

class Storage;
using StoragePtr = std::shared_ptr<Storage>;

struct MatmulDims {
  size_t b, m, n, k;  // batch count, (m x k) * (k x n)
};

// Output size of a convolution along one dim (PyTorch's formulas). The core has checked that
// every result is at least 1 before a backend sees the shape, so the arithmetic cannot wrap.
inline size_t conv_out_size(size_t in, size_t k, size_t pad, size_t stride, size_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}
inline size_t conv_transposed_out_size(size_t in, size_t k, size_t pad, size_t stride, size_t dil, size_t out_pad) {
  return (in - 1) * stride + dil * (k - 1) + out_pad + 1 - 2 * pad;
}

// Shapes of a 1-D convolution, already checked by the core (backends run it as a 2-D one).
struct Conv1dShape {
  size_t b, c_in, l_in, c_out, k_size;  // input (b, c_in, l_in), kernel (c_out, c_in/groups, k) or
                                         // (c_in, c_out/groups, k) for the transposed conv
  Conv1dParams p;
};
struct Conv2dShape {
  size_t b, c_in, h_in, w_in, c_out, k_h, k_w;
  Conv2dParams p;
  size_t h_out() const { return conv_out_size(h_in, k_h, p.padding_h, p.stride_h, p.dilation_h); }
  size_t w_out() const { return conv_out_size(w_in, k_w, p.padding_w, p.stride_w, p.dilation_w); }
  size_t h_out_transposed() const {
    return conv_transposed_out_size(h_in, k_h, p.padding_h, p.stride_h, p.dilation_h, p.output_padding_h);
  }
  size_t w_out_transposed() const {
    return conv_transposed_out_size(w_in, k_w, p.padding_w, p.stride_w, p.dilation_w, p.output_padding_w);
  }
};

// Fused nn ops. The core hands these contiguous operands (a start offset allowed), except
// attention, whose q/k/v only need a unit-stride last dim. Half types accumulate in f32.
struct NormArgs {
  const Storage* weight = nullptr;  // (cols) or none
  size_t weight_offset = 0;
  const Storage* bias = nullptr;  // (cols) or none; layer_norm only
  size_t bias_offset = 0;
  double eps = 1e-5;
  bool rms = false;  // rms_norm: x / sqrt(mean(x^2) + eps); else (x - mean) / sqrt(var + eps)
  // add_rms_norm: the rows normalised are x + residual, rounded to the dtype as add() rounds
  // (so the result equals add then norm bit for bit); that sum is returned in *sum.
  const Storage* residual = nullptr;  // same layout as x (contiguous), or none
  size_t residual_offset = 0;
  StoragePtr* sum = nullptr;  // set with residual
  // Optional: a backend that can also writes the output's rows quantized to Q8_1 (the bytes of
  // QTensor::quantize(out, Q8_1), cols a multiple of 32) into *q8_1 in the same pass; one that
  // does not leaves it null and the core quantizes the output.
  StoragePtr* q8_1 = nullptr;
};
enum class RopeKind : uint8_t {
  Interleaved,  // rope_i, x (b, h, t, d): pairs (x[2i], x[2i+1])
  HalfSplit,    // rope,   x (b, h, t, d): pairs (x[i], x[i + d/2])
  HalfSplitThd  // rope_thd, x (b, t, h, d): pairs (x[i], x[i + d/2])
};
struct RopeDims {
  size_t b, h, t, d;
  bool per_batch;  // cos/sin are (b, t, d/2) rather than (t, d/2)
};
// rope_kv_append's KV-cache writes: heads [q_heads, h) of the rotated x (b, h, t, d) go to
// k_cache and v (b, h - q_heads, t, d_v) to v_cache, each at its cache layout moved r rows along
// dim 2 as copy_strided_at does (r = clamp_start(start[start_offset], max_start)); k_l and vc_l
// are the caches' rows [0, t) of dim 2. The core has checked shapes, dtypes and aliasing.
struct KvAppend {
  size_t q_heads;
  const Storage* v;
  Layout v_l;
  Storage* k_cache;
  Layout k_l;
  Storage* v_cache;
  Layout vc_l;
  const Storage* start;
  size_t start_offset, max_start;
};
// q (b, h_q, t_q, d), k (b, h_kv, t_kv, d), v (b, h_kv, t_kv, d_v); h_q is a multiple of h_kv
// (grouped-query attention: q head i reads kv head i / (h_q / h_kv)). Output (b, h_q, t_q, d_v).
// causal: query i sees keys j <= i + (t_kv - t_q) (aligned at the bottom right, as a KV cache
// needs; for t_q == t_kv this is PyTorch's is_causal); the core guarantees t_kv >= t_q then.
// kv_len (attention_kv_len): batch bi attends to its first L_bi = clamp_kv_len(kv_len[bi]) keys
// (ops/positions.hpp), read where the storage lives; element bi is at kv_len_offset +
// bi * kv_len_stride of a U32/I32/I64 storage. nullptr: every batch has t_kv keys.
struct AttentionDims {
  size_t b, h_q, h_kv, t_q, t_kv, d, d_v;
  double scale;
  bool causal;
  const Storage* kv_len = nullptr;
  size_t kv_len_offset = 0;
  int64_t kv_len_stride = 0;
};

// fast::paged_attention (wick/fast.hpp): this is q (t, h_q, d), contiguous. k (t, h_kv, d) and v (t, h_kv, d_v)
// are contiguous of q's dtype; the caches are contiguous (rows, h_kv * d) and (rows, h_kv * d_v) from element
// offsets k_cache_offset / v_cache_offset, of cache_dtype; slot, seq, pos (t) and block_table (n_seqs,
// max_blocks) are contiguous I32 from their element offsets. First every token's k and v row is written at
// row pos::paged_index(slot[i], rows), then each token attends (ops/positions.hpp: paged_*). The core has
// checked shapes, dtypes and devices.
struct PagedAttention {
  size_t t, h_q, h_kv, d, d_v, rows, n_seqs, max_blocks, block_size, window;
  double scale;
  const Storage* k;
  const Storage* v;
  Storage* k_cache;
  Storage* v_cache;
  size_t k_cache_offset, v_cache_offset;
  DType cache_dtype;
  const Storage *slot, *seq, *pos, *table;
  size_t slot_offset, seq_offset, pos_offset, table_offset;
};

// A QTensor's blocks (wick/quant.hpp): `rows` rows of `cols` elements of `type`, each row
// cols / block_size blocks, rows back to back from byte 0 of a U8 storage. The core has checked
// that the type is supported and cols is a whole number of blocks.
struct QuantDims {
  GGMLType type;
  size_t rows, cols;
};

class Storage {
 public:
  virtual ~Storage() = default;
  virtual DType dtype() const = 0;
  virtual Device device() const = 0;
  virtual size_t numel() const = 0;  // elements allocated

  // ---- fill and copy
  // Copies the whole storage to host memory (numel * dtype_size bytes).
  virtual void copy_to_host(void* dst) const = 0;
  virtual StoragePtr try_clone(const Layout& l) const = 0;  // contiguous copy of the view
  virtual void const_set(Scalar v, const Layout& l) = 0;     // every element of the view = v
  // Writes the view src_l of this storage into dst, contiguous from dst_offset.
  virtual void copy_strided_src(Storage& dst, size_t dst_offset, const Layout& src_l) const = 0;
  // d1 rows of d2 elements: dst[dst_offset + i*dst_s + j] = src[src_offset + i*src_s + j].
  virtual void copy2d(Storage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_offset,
                      size_t dst_offset) const = 0;
  // Writes the view src_l of this storage into dst at dst_l moved r rows along one dim: every
  // element offset of dst_l plus r * row_stride, r = clamp_start(start[start_offset], max_start)
  // (ops/positions.hpp). start (u8 u32 i16 i32 i64) is read where it lives, so a GPU call neither
  // synchronises nor copies to the host (a captured graph can replay it with a new start).
  virtual void copy_strided_at(const Layout& src_l, Storage& dst, const Layout& dst_l, const Storage& start,
                               size_t start_offset, int64_t row_stride, size_t max_start) const = 0;
  virtual StoragePtr to_dtype(const Layout& l, DType dtype) const = 0;

  // ---- element-wise
  virtual StoragePtr affine(const Layout& l, double mul, double add) const = 0;
  virtual StoragePtr powf(const Layout& l, double e) const = 0;
  virtual StoragePtr elu(const Layout& l, double alpha) const = 0;
  virtual StoragePtr unary(UnaryOp op, const Layout& l) const = 0;
  // lhs_l and rhs_l have the same shape (broadcasting is done by the core with zero strides).
  virtual StoragePtr binary(BinaryOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const = 0;
  virtual StoragePtr cmp(CmpOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const = 0;  // u8
  // this is the condition; all three layouts have the same shape.
  virtual StoragePtr where_cond(const Layout& l, const Storage& t, const Layout& t_l, const Storage& f,
                                const Layout& f_l) const = 0;

  // ---- reductions: the result keeps every dim, the reduced ones with size 1.
  // ArgMin/ArgMax return u32 indices into the flattened reduced dims; ties and NaN follow
  // docs/semantics.md.
  virtual StoragePtr reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const = 0;
  virtual StoragePtr cumsum(const Layout& l, size_t dim) const = 0;
  virtual StoragePtr arg_sort(const Layout& l, bool ascending) const = 0;  // along the last dim, u32
  // along the last dim: the u32 indices (rows x k, contiguous) of the k largest, in arg_sort descending's order
  virtual StoragePtr top_k(const Layout& l, size_t k) const = 0;

  // ---- indexing. ids may be u8 u32 i16 i32 i64; an out-of-range id throws Error(Index).
  // index_select: out = l with dim replaced by ids.numel(); ids is 1-D.
  virtual StoragePtr index_select(const Storage& ids, const Layout& l, const Layout& ids_l, size_t dim) const = 0;
  // gather: out has ids' shape; out[..i..] = this[..ids[..i..]..] along dim.
  virtual StoragePtr gather(const Layout& l, const Storage& ids, const Layout& ids_l, size_t dim) const = 0;
  // In place on this storage (view l): this[..ids[..i..]..] = / += src[..i..] along dim.
  virtual void scatter_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                           const Layout& src_l, size_t dim) = 0;
  virtual void scatter_add_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                               const Layout& src_l, size_t dim) = 0;
  // Returns a copy of the view l with src slices added at positions ids (1-D) along dim.
  virtual StoragePtr index_add(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                               const Layout& src_l, size_t dim) const = 0;

  // ---- linear algebra: lhs (b, m, k), rhs (b, k, n) described by rank-3-or-more layouts
  // whose last two dims may be transposed; the output is contiguous (b, m, n).
  virtual StoragePtr matmul(const Storage& rhs, const MatmulDims& d, const Layout& lhs_l,
                            const Layout& rhs_l) const = 0;
  // matmul then swiglu (silu of the first half of the output's columns times the second half) in
  // one pass, each product rounded to the dtype first: d.n is even, the result (b, m, d.n / 2).
  // Null where this backend has no fused path for these operands: the core then runs matmul and
  // swiglu (a GPU fuses one f16 row where its matrix-vector tuning says so).
  virtual StoragePtr matmul_swiglu(const Storage& rhs, const MatmulDims& d, const Layout& lhs_l,
                                   const Layout& rhs_l) const {
    (void)rhs, (void)d, (void)lhs_l, (void)rhs_l;
    return nullptr;
  }

  // ---- convolution, pooling, resampling (NCL / NCHW)
  virtual StoragePtr conv1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                            const Conv1dShape& s) const = 0;
  virtual StoragePtr conv_transpose1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                                      const Conv1dShape& s) const = 0;
  virtual StoragePtr conv2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                            const Conv2dShape& s) const = 0;
  virtual StoragePtr conv_transpose2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                                      const Conv2dShape& s) const = 0;
  virtual StoragePtr avg_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const = 0;
  virtual StoragePtr max_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const = 0;
  virtual StoragePtr upsample_nearest1d(const Layout& l, size_t out_l) const = 0;
  virtual StoragePtr upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const = 0;
  virtual StoragePtr upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                         std::optional<double> scale_h, std::optional<double> scale_w) const = 0;

  // ---- fused nn ops (float dtypes); l is contiguous (offset allowed).
  // softmax over the last dim; log: log_softmax.
  virtual StoragePtr softmax_last_dim(const Layout& l, bool log) const = 0;
  virtual StoragePtr norm_last_dim(const Layout& l, const NormArgs& a) const = 0;
  // cos and sin are contiguous (t, d/2) or (b, t, d/2); the output has x's shape.
  virtual StoragePtr rope(RopeKind k, const Layout& l, const Storage& cos, const Layout& cos_l, const Storage& sin,
                          const Layout& sin_l, const RopeDims& d) const = 0;
  // rope (Interleaved or HalfSplit) that also appends to a KV cache (KvAppend): returns the whole
  // rotated x, as rope does, and writes the k heads and v into the caches.
  virtual StoragePtr rope_kv_append(RopeKind k, const Layout& l, const Storage& cos, const Layout& cos_l,
                                    const Storage& sin, const Layout& sin_l, const RopeDims& d,
                                    const KvAppend& a) const = 0;
  // silu(this) * up, element-wise; both layouts have the same shape (any strides). q8_1 (may be
  // null): as NormArgs::q8_1, the output's rows in Q8_1 where the backend writes them.
  virtual StoragePtr silu_mul(const Layout& l, const Storage& up, const Layout& up_l, StoragePtr* q8_1) const = 0;
  // this is q; every layout is rank 4 with a unit-stride last dim (other strides arbitrary).
  virtual StoragePtr attention(const Layout& q_l, const Storage& k, const Layout& k_l, const Storage& v,
                               const Layout& v_l, const AttentionDims& a) const = 0;
  // this is q (PagedAttention); returns (t, h_q, d_v) of q's dtype and writes the caches.
  virtual StoragePtr paged_attention(const PagedAttention& a) const = 0;

  // ---- quantized blocks (QuantDims above). Unless said otherwise `this` is the U8 block storage.
  // All rows decoded: (rows * cols) contiguous elements of dtype (F32, F16 or BF16).
  virtual StoragePtr dequantize(const QuantDims& q, DType dtype) const = 0;
  // this is a float tensor (F32/F16/BF16/F64) and l a contiguous (q.rows, q.cols) view (offset
  // allowed); returns the U8 blocks. A backend without a quantizer for q.type throws
  // Error(Unsupported) naming the fix.
  virtual StoragePtr quantize(const Layout& l, const QuantDims& q) const = 0;
  // y = x @ W^T with W the (q.rows = n, q.cols = k) blocks in this; x (m, k) is F32/F16/BF16 on
  // this device with x_l rank 2 and a unit last stride (any row stride, any offset). Returns
  // (m, n) contiguous in x's dtype. The backend picks the path (matrix-vector for m <= 8). xq (may
  // be null): x's rows already quantized to Q8_1 (m * cols / 32 blocks), which a matrix-vector
  // path on Q8_1 activations may use instead of quantizing x; the result is the same either way.
  virtual StoragePtr qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l, const Storage* xq) const = 0;
  // qmatmul of (x [+ a.residual]).rms_norm(a.weight, a.eps) for one row x (x_l (1, q.cols),
  // contiguous) with the norm inside the product's kernel (a.bias null, a.rms true, a.q8_1 unused;
  // *a.sum set as norm_last_dim sets it). Null, with nothing run, where this backend has no such
  // path for these operands: the core then runs the norm and qmatmul.
  virtual StoragePtr qmatmul_rms_norm(const QuantDims& q, const Storage& x, const Layout& x_l,
                                      const NormArgs& a) const {
    (void)q, (void)x, (void)x_l, (void)a;
    return nullptr;
  }
  // Rows of the (q.rows, q.cols) table at ids (u8 u32 i16 i32 i64, rank 1, any layout): returns
  // (ids, q.cols) contiguous in dtype (F32/F16/BF16). An id out of range throws Error(Index).
  virtual StoragePtr qembedding(const QuantDims& q, const Storage& ids, const Layout& ids_l, DType dtype) const = 0;
};

// Device-level services of a backend: allocation, upload, random numbers.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual StoragePtr alloc(size_t numel, DType dtype) = 0;  // contents unspecified
  virtual StoragePtr zeros(size_t numel, DType dtype) = 0;
  virtual StoragePtr from_host(const void* data, size_t numel, DType dtype) = 0;
  // Element i of the result is philox_uniform / philox_normal (src/ops/random.hpp) of (seed, i).
  virtual StoragePtr rand_uniform(size_t numel, DType dtype, uint64_t seed, double lo, double hi) = 0;
  virtual StoragePtr rand_normal(size_t numel, DType dtype, uint64_t seed, double mean, double std) = 0;
  virtual void synchronize() = 0;

  // Device work recorded once and replayed as one launch (a CUDA/HIP graph): wick::Graph.
  class Recording {
   public:
    virtual ~Recording() = default;
    virtual void replay() = 0;
  };
  // Runs body with this device's work recorded instead of run; nullptr where the backend does not
  // record (the CPU, whose ops finish as they are called: Graph runs the body again to replay).
  virtual std::unique_ptr<Recording> capture(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }
};

// The backend of a device; throws Error(Device) when it was not built or is absent.
Backend& backend_for(const Device& d);

}  // namespace wick

#pragma once
// The CPU reference backend. Each op family lives in its own file beside this one.
#include <cstddef>
#include <memory>

#include "backend/storage.hpp"

namespace wick::cpu {

class CpuStorage final : public Storage {
 public:
  CpuStorage(size_t numel, DType dtype);  // uninitialised; Error(OutOfMemory) on failure
  // Borrows read-only memory that `owner` keeps alive (a GGUF mapping): no copy. Only QTensor
  // blocks are made this way, and no op writes to them.
  CpuStorage(const void* borrowed, size_t numel, DType dtype, std::shared_ptr<const void> owner);
  ~CpuStorage() override;

  DType dtype() const override { return dtype_; }
  Device device() const override { return Device::cpu(); }
  size_t numel() const override { return numel_; }
  void* data() { return data_; }
  const void* data() const { return data_; }
  template <class T> T* ptr() { return static_cast<T*>(data_); }
  template <class T> const T* ptr() const { return static_cast<const T*>(data_); }

  // storage.cpp
  void copy_to_host(void* dst) const override;
  StoragePtr try_clone(const Layout& l) const override;
  void const_set(Scalar v, const Layout& l) override;
  void copy_strided_src(Storage& dst, size_t dst_offset, const Layout& src_l) const override;
  void copy2d(Storage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_offset,
              size_t dst_offset) const override;
  void copy_strided_at(const Layout& src_l, Storage& dst, const Layout& dst_l, const Storage& start,
                       size_t start_offset, int64_t row_stride, size_t max_start) const override;
  StoragePtr to_dtype(const Layout& l, DType dtype) const override;

  // elementwise.cpp
  StoragePtr affine(const Layout& l, double mul, double add) const override;
  StoragePtr powf(const Layout& l, double e) const override;
  StoragePtr elu(const Layout& l, double alpha) const override;
  StoragePtr unary(UnaryOp op, const Layout& l) const override;
  StoragePtr binary(BinaryOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const override;
  StoragePtr cmp(CmpOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const override;
  StoragePtr where_cond(const Layout& l, const Storage& t, const Layout& t_l, const Storage& f,
                        const Layout& f_l) const override;

  // reduce.cpp, sort_scan.cpp
  StoragePtr reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const override;
  StoragePtr cumsum(const Layout& l, size_t dim) const override;
  StoragePtr arg_sort(const Layout& l, bool ascending) const override;
  StoragePtr top_k(const Layout& l, size_t k) const override;

  // indexing.cpp
  StoragePtr index_select(const Storage& ids, const Layout& l, const Layout& ids_l, size_t dim) const override;
  StoragePtr gather(const Layout& l, const Storage& ids, const Layout& ids_l, size_t dim) const override;
  void scatter_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                   const Layout& src_l, size_t dim) override;
  void scatter_add_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                       const Layout& src_l, size_t dim) override;
  StoragePtr index_add(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                       const Layout& src_l, size_t dim) const override;

  // matmul.cpp
  StoragePtr matmul(const Storage& rhs, const MatmulDims& d, const Layout& lhs_l, const Layout& rhs_l) const override;

  // conv.cpp, pool_upsample.cpp
  StoragePtr conv1d(const Layout& l, const Storage& kernel, const Layout& kernel_l, const Conv1dShape& s) const override;
  StoragePtr conv_transpose1d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                              const Conv1dShape& s) const override;
  StoragePtr conv2d(const Layout& l, const Storage& kernel, const Layout& kernel_l, const Conv2dShape& s) const override;
  StoragePtr conv_transpose2d(const Layout& l, const Storage& kernel, const Layout& kernel_l,
                              const Conv2dShape& s) const override;
  StoragePtr avg_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const override;
  StoragePtr max_pool2d(const Layout& l, size_t kh, size_t kw, size_t sh, size_t sw) const override;
  StoragePtr upsample_nearest1d(const Layout& l, size_t out_l) const override;
  StoragePtr upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const override;
  StoragePtr upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                 std::optional<double> scale_h, std::optional<double> scale_w) const override;

  // nn.cpp
  StoragePtr softmax_last_dim(const Layout& l, bool log) const override;
  StoragePtr norm_last_dim(const Layout& l, const NormArgs& a) const override;
  StoragePtr rope(RopeKind k, const Layout& l, const Storage& cos, const Layout& cos_l, const Storage& sin,
                  const Layout& sin_l, const RopeDims& d) const override;
  StoragePtr rope_kv_append(RopeKind k, const Layout& l, const Storage& cos, const Layout& cos_l, const Storage& sin,
                            const Layout& sin_l, const RopeDims& d, const KvAppend& a) const override;
  StoragePtr silu_mul(const Layout& l, const Storage& up, const Layout& up_l, StoragePtr* q8_1) const override;
  StoragePtr attention(const Layout& q_l, const Storage& k, const Layout& k_l, const Storage& v, const Layout& v_l,
                       const AttentionDims& a) const override;
  StoragePtr paged_attention(const PagedAttention& a) const override;

  // quant.cpp (dequantize, qembedding), quantize.cpp (quantize), qmatmul.cpp (qmatmul)
  StoragePtr dequantize(const QuantDims& q, DType dtype) const override;
  StoragePtr quantize(const Layout& l, const QuantDims& q) const override;
  StoragePtr qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l, const Storage* xq) const override;
  StoragePtr qembedding(const QuantDims& q, const Storage& ids, const Layout& ids_l, DType dtype) const override;

 private:
  std::shared_ptr<const void> owner_;  // set for borrowed memory, which is not ours to free
  void* data_ = nullptr;
  size_t numel_ = 0;
  DType dtype_;
};

inline const CpuStorage& as_cpu(const Storage& s) { return static_cast<const CpuStorage&>(s); }
inline CpuStorage& as_cpu(Storage& s) { return static_cast<CpuStorage&>(s); }
inline std::shared_ptr<CpuStorage> new_storage(size_t numel, DType dtype) {
  return std::make_shared<CpuStorage>(numel, dtype);
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  StoragePtr alloc(size_t numel, DType dtype) override;
  StoragePtr zeros(size_t numel, DType dtype) override;
  StoragePtr from_host(const void* data, size_t numel, DType dtype) override;
  StoragePtr rand_uniform(size_t numel, DType dtype, uint64_t seed, double lo, double hi) override;
  StoragePtr rand_normal(size_t numel, DType dtype, uint64_t seed, double mean, double std) override;
  void synchronize() override {}
};

CpuBackend& cpu_backend();

}  // namespace wick::cpu

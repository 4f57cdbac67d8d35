#pragma once
// The GPU backend's storage and per-device context. One source for CUDA and HIP.
#include <memory>
#include <mutex>
#include <string>

#include "backend/gpu/runtime.hpp"
#include "backend/storage.hpp"

namespace wick::gpu {

// Device discovery and opening (device.cu, allocator.cu); the core reaches these through
// backend/registry.hpp (registry.cu).
DeviceKind built_kind();           // Cuda or Rocm
std::string built_targets();       // e.g. "80;90" or "gfx90a;gfx942"
int device_count();                // 0 when no driver or no device
std::string unavailable_reason();  // why device_count() is 0, for `wick info`
Backend& backend(int ordinal);     // opens the device; Error(Device) naming the reason
DeviceInfo device_info(int ordinal);
MemoryStats memory_stats(int ordinal);
void empty_cache(int ordinal);

class Allocator;
struct BlasHandle;

// One per opened device: its stream (all wick work on the device is ordered on it), the
// caching allocator, the BLAS handle, and a small device buffer for kernel error flags.
struct DeviceContext {
  int ordinal = 0;
  gpuStream_t stream = nullptr;
  gpuDeviceProp_t prop{};
  Allocator* alloc = nullptr;
  BlasHandle* blas = nullptr;  // created on first matmul
  std::mutex blas_mutex;
  int* error_flag = nullptr;   // device int, 0 when no kernel reported an error
  std::string arch;            // "sm_90", "gfx942"
};
DeviceContext& context(int ordinal);  // opened on first use
// Makes ordinal the current device of this thread for the caller's scope.
struct DeviceGuard {
  explicit DeviceGuard(int ordinal);
  ~DeviceGuard();
  int previous;
  bool changed = false;  // whether the constructor switched devices (then the destructor restores)
};

// Memory from the device's caching allocator; returned to the cache when freed.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  int ordinal = 0;
};
DeviceBuffer device_alloc(int ordinal, size_t bytes);  // Error(OutOfMemory) after one cache flush
void device_free(const DeviceBuffer& b);

// Scratch memory from the caching allocator, returned on scope exit (stream-ordered reuse).
struct Scratch {
  DeviceBuffer b;
  Scratch(int ordinal, size_t bytes) : b(device_alloc(ordinal, bytes)) {}
  ~Scratch() { device_free(b); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

class GpuStorage final : public Storage {
 public:
  GpuStorage(int ordinal, size_t numel, DType dtype);
  ~GpuStorage() override;

  DType dtype() const override { return dtype_; }
  Device device() const override;
  size_t numel() const override { return numel_; }
  int ordinal() const { return buf_.ordinal; }
  DeviceContext& ctx() const { return context(buf_.ordinal); }
  gpuStream_t stream() const { return ctx().stream; }
  void* data() { return buf_.ptr; }
  const void* data() const { return buf_.ptr; }
  template <class T> T* ptr() { return static_cast<T*>(buf_.ptr); }
  template <class T> const T* ptr() const { return static_cast<const T*>(buf_.ptr); }

  // kernels/fill_copy.cu
  void copy_to_host(void* dst) const override;
  StoragePtr try_clone(const Layout& l) const override;
  void const_set(Scalar v, const Layout& l) override;
  void copy_strided_src(Storage& dst, size_t dst_offset, const Layout& src_l) const override;
  void copy2d(Storage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_offset,
              size_t dst_offset) const override;
  void copy_strided_at(const Layout& src_l, Storage& dst, const Layout& dst_l, const Storage& start,
                       size_t start_offset, int64_t row_stride, size_t max_start) const override;
  StoragePtr to_dtype(const Layout& l, DType dtype) const override;

  // kernels/elementwise.cu
  StoragePtr affine(const Layout& l, double mul, double add) const override;
  StoragePtr powf(const Layout& l, double e) const override;
  StoragePtr elu(const Layout& l, double alpha) const override;
  StoragePtr unary(UnaryOp op, const Layout& l) const override;
  StoragePtr binary(BinaryOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const override;
  StoragePtr cmp(CmpOp op, const Storage& rhs, const Layout& lhs_l, const Layout& rhs_l) const override;
  StoragePtr where_cond(const Layout& l, const Storage& t, const Layout& t_l, const Storage& f,
                        const Layout& f_l) const override;

  // kernels/reduce.cu, kernels/sort_scan.cu
  StoragePtr reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const override;
  StoragePtr cumsum(const Layout& l, size_t dim) const override;
  StoragePtr arg_sort(const Layout& l, bool ascending) const override;
  StoragePtr top_k(const Layout& l, size_t k) const override;

  // kernels/indexing.cu
  StoragePtr index_select(const Storage& ids, const Layout& l, const Layout& ids_l, size_t dim) const override;
  StoragePtr gather(const Layout& l, const Storage& ids, const Layout& ids_l, size_t dim) const override;
  void scatter_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                   const Layout& src_l, size_t dim) override;
  void scatter_add_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                       const Layout& src_l, size_t dim) override;
  StoragePtr index_add(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                       const Layout& src_l, size_t dim) const override;

  // kernels/matmul.cu (+ blas.cu)
  StoragePtr matmul(const Storage& rhs, const MatmulDims& d, const Layout& lhs_l, const Layout& rhs_l) const override;
  StoragePtr matmul_swiglu(const Storage& rhs, const MatmulDims& d, const Layout& lhs_l,
                           const Layout& rhs_l) const override;

  // kernels/conv.cu, kernels/pool_upsample.cu
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

  // kernels/nn.cu
  StoragePtr softmax_last_dim(const Layout& l, bool log) const override;
  StoragePtr norm_last_dim(const Layout& l, const NormArgs& a) const override;
  StoragePtr rope(RopeKind k, const Layout& l, const Storage& cos, const Layout& cos_l, const Storage& sin,
                  const Layout& sin_l, const RopeDims& d) const override;
  StoragePtr rope_kv_append(RopeKind k, const Layout& l, const Storage& cos, const Layout& cos_l, const Storage& sin,
                            const Layout& sin_l, const RopeDims& d, const KvAppend& a) const override;
  StoragePtr silu_mul(const Layout& l, const Storage& up, const Layout& up_l, StoragePtr* q8_1) const override;

  // kernels/attention.cu (+ blas.cu)
  StoragePtr attention(const Layout& q_l, const Storage& k, const Layout& k_l, const Storage& v, const Layout& v_l,
                       const AttentionDims& a) const override;
  // kernels/attention_paged.cu
  StoragePtr paged_attention(const PagedAttention& a) const override;

  // kernels/quant.cu (dequantize, quantize, qembedding), kernels/qmatmul.cu (qmatmul, qmatmul_rms_norm)
  StoragePtr dequantize(const QuantDims& q, DType dtype) const override;
  StoragePtr quantize(const Layout& l, const QuantDims& q) const override;
  StoragePtr qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l, const Storage* xq) const override;
  StoragePtr qmatmul_rms_norm(const QuantDims& q, const Storage& x, const Layout& x_l,
                              const NormArgs& a) const override;
  StoragePtr qembedding(const QuantDims& q, const Storage& ids, const Layout& ids_l, DType dtype) const override;

 private:
  DeviceBuffer buf_;
  size_t numel_ = 0;
  DType dtype_;
};

inline const GpuStorage& as_gpu(const Storage& s) { return static_cast<const GpuStorage&>(s); }
inline GpuStorage& as_gpu(Storage& s) { return static_cast<GpuStorage&>(s); }
inline std::shared_ptr<GpuStorage> new_storage(int ordinal, size_t numel, DType dtype) {
  return std::make_shared<GpuStorage>(ordinal, numel, dtype);
}

// Index-checking kernels set ctx.error_flag; this reads it (synchronising the stream),
// clears it and throws Error(Index) with `what` when it was set.
void throw_if_index_error(DeviceContext& ctx, const std::string& what);

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(int ordinal) : ordinal_(ordinal) {}
  Device device() const override;
  StoragePtr alloc(size_t numel, DType dtype) override;
  StoragePtr zeros(size_t numel, DType dtype) override;
  StoragePtr from_host(const void* data, size_t numel, DType dtype) override;
  StoragePtr rand_uniform(size_t numel, DType dtype, uint64_t seed, double lo, double hi) override;
  StoragePtr rand_normal(size_t numel, DType dtype, uint64_t seed, double mean, double std) override;
  void synchronize() override;
  std::unique_ptr<Recording> capture(const std::function<void()>& body) override;  // graph.cu

 private:
  int ordinal_;
};

}  // namespace wick::gpu

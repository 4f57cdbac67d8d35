#pragma once
// The quantized matrix-vector path of kernels/qmatmul.cu on raw device pointers, for
// GpuStorage::qmatmul and the benchmark (bench/gpu_qmatvec.cu), which times it without the
// Tensor layer around it.
#include <cstddef>

#include "backend/gpu/runtime.hpp"
#include "wick/dtype.hpp"
#include "wick/quant.hpp"

namespace wick::gpu {

// Bytes of device scratch qmatvec needs for m rows of length k (the Q8_1 activations).
size_t qmatvec_scratch_bytes(size_t m, size_t k);

// y = x @ W^T on stream s: W (n, k) blocks of type t at w; x rows (m in 1..8) of x_dtype
// (F32/F16/BF16) at x + x_offset + i * x_row_stride elements, unit stride along k; y (m, n)
// contiguous in x_dtype. k is a multiple of t's block size (the core checked it). x is first
// quantized to Q8_1 into `scratch` (qmatvec_scratch_bytes), then every weight row is dotted with
// all m rows in one pass over W. rows_per_block (1, 2, 4, 8; m = 1 only) overrides the tuned
// number of weight rows per thread block and block_threads (a multiple of 64 up to
// tune::kQmvMaxBlock) the threads per block, for the benchmark's sweep; 0 takes the tuned values.
void qmatvec(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, const void* x, DType x_dtype, size_t m,
             size_t x_offset, size_t x_row_stride, void* scratch, void* y, int rows_per_block = 0,
             int block_threads = 0);

// The same product on rows already in Q8_1 (xq: xq_rows >= m rows of k / 32 blocks, the padded
// rows past m zeros or anything: their results are not stored); y (m, n) in y_dtype. No
// quantization kernel: a producer wrote xq (kernels/q8_1_store.cuh).
void qmatvec_q8_1(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, const void* xq, size_t xq_rows,
                  size_t m, void* y, DType y_dtype, int rows_per_block = 0, int block_threads = 0);

// One row x (k elements of x_dtype, F32/F16/BF16, 16-byte aligned like every pointer here) to be
// normalised before the product: rms_norm(x + res) with weight w (add_rms_norm's math; res may be
// null), the sum x + res stored at sum.
struct NormedRow {
  const void* x;
  const void* res;
  const void* w;
  void* sum;
  double eps;
};
// Whether qmatvec_normed takes this product: the staged kernel's Q4_0 / Q8_0 shapes (kernels/
// qmatmul.cu), 16-byte aligned rows, a row within the prologue's registers and the block within the
// device's shared memory. r.sum is not looked at: a caller allocates it only when this is true.
bool qmatvec_normed_takes(GGMLType t, const void* w, size_t n, size_t k, DType x_dtype, const NormedRow& r);
// y (1, n) = rms_norm(...) @ W^T with the norm inside the product's kernel: each block of the
// staged kernel normalises and quantizes the row itself, so no norm kernel runs first. Only where
// qmatvec_normed_takes is true (else the caller runs the norm, then qmatvec_q8_1); with r.res, r.sum
// is set and 16-byte aligned.
void qmatvec_normed(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, DType x_dtype, const NormedRow& r,
                    void* y);

}  // namespace wick::gpu

#pragma once
// The BLAS adapter of blas.cu (cuBLAS or rocBLAS), for the kernels that hand a product to it.
#include <cstdint>

#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

// Column-major C (m x n, ldc) = alpha op(A) (m x k) * op(B) (k x n) for `batch` matrices,
// the i-th at A + i*sa, B + i*sb, C + i*sc (elements; 0 broadcasts). Inputs of dtype `in`,
// C of dtype `out`: in == out (F16, BF16, F32 or F64), or F16/BF16 in with F32 out. f32
// accumulation (no TF32) for all but f64, which accumulates in f64. Runs on ctx.stream.
void blas_gemm_ex(DeviceContext& ctx, DType in, DType out, bool ta, bool tb, int m, int n, int k, double alpha,
                  const void* a, int lda, int64_t sa, const void* b, int ldb, int64_t sb, void* c, int ldc, int64_t sc,
                  int batch);

// The same-dtype product of kernels/matmul.cu: column-major C = op(A) op(B), strided-batched.
void blas_gemm(DeviceContext& ctx, DType dtype, bool ta, bool tb, int m, int n, int k, const void* a, int lda,
               int64_t sa, const void* b, int ldb, int64_t sb, void* c, int ldc, int64_t sc, int batch);

// Row-major C (m x n, ldc) = alpha op(A) op(B), strided-batched, as blas_gemm_ex (kernels/attention.cu).
void blas_gemm_rm(DeviceContext& ctx, DType in, DType out, bool ta, bool tb, int m, int n, int k, double alpha,
                  const void* a, int lda, int64_t sa, const void* b, int ldb, int64_t sb, void* c, int ldc, int64_t sc,
                  int batch);

// Destroys a device's handle (device.cu's exit handler); null is a no-op.
void destroy_blas(BlasHandle* b);

}  // namespace wick::gpu

// The BLAS adapter: column-major strided-batched gemm through cuBLAS or rocBLAS. With
// runtime.hpp, the only file that spells a vendor's names; kernels/matmul.cu maps wick's
// row-major layouts onto blas_gemm(), kernels/attention.cu uses blas_gemm_rm().
#include "backend/gpu/blas.hpp"

#include <string>

#include "backend/gpu/gpu_storage.hpp"

#if defined(WICK_GPU_HIP)
#include <rocblas/rocblas.h>
#else
#include <cublas_v2.h>
#endif

namespace wick::gpu {

// Created on first use per device; destroyed by the device's exit handler (device.cu), which
// runs before the runtime's own teardown.
struct BlasHandle {
#if defined(WICK_GPU_HIP)
  rocblas_handle h = nullptr;
#else
  cublasHandle_t h = nullptr;
#endif
};

namespace {

#if defined(WICK_GPU_HIP)
void check_blas(rocblas_status s, const char* what) {
  if (s != rocblas_status_success)
    throw Error(ErrorKind::Device, std::string("rocblas call ") + what + " failed: status " + std::to_string(int(s)) +
                                       " (" + rocblas_status_to_string(s) + ")");
}
#else
void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::Device, std::string("cublas call ") + what + " failed: status " + std::to_string(int(s)) +
                                       " (" + cublasGetStatusString(s) + ")");
}
#endif

// Caller holds ctx.blas_mutex and has made ctx.ordinal the current device.
BlasHandle& handle_locked(DeviceContext& ctx) {
  if (ctx.blas) return *ctx.blas;
  auto* b = new BlasHandle;
#if defined(WICK_GPU_HIP)
  rocblas_status s = rocblas_create_handle(&b->h);
  if (s != rocblas_status_success) {
    delete b;
    check_blas(s, "rocblas_create_handle");
  }
  check_blas(rocblas_set_stream(b->h, ctx.stream), "rocblas_set_stream");
#else
  cublasStatus_t s = cublasCreate(&b->h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    delete b;
    check_blas(s, "cublasCreate");
  }
  check_blas(cublasSetStream(b->h, ctx.stream), "cublasSetStream");
  // No TF32 (CUBLAS_COMPUTE_32F already excludes it) and no reduced-precision split-K
  // reductions for f16/bf16: results stay close to the CPU's f32 accumulation.
  check_blas(cublasSetMathMode(b->h, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
             "cublasSetMathMode");
#endif
  ctx.blas = b;
  return *b;
}

}  // namespace

void destroy_blas(BlasHandle* b) {
  if (!b) return;
#if defined(WICK_GPU_HIP)
  (void)rocblas_destroy_handle(b->h);
#else
  (void)cublasDestroy(b->h);
#endif
  delete b;
}

// Column-major C (m x n, ldc) = alpha op(A) (m x k) * op(B) (k x n) for `batch` matrices,
// the i-th at A + i*sa, B + i*sb, C + i*sc (elements; 0 broadcasts). Inputs of dtype `in`,
// C of dtype `out`: in == out (F16, BF16, F32 or F64), or F16/BF16 in with F32 out. f32
// accumulation (no TF32) for all but f64, which accumulates in f64. Runs on ctx.stream.
void blas_gemm_ex(DeviceContext& ctx, DType in, DType out, bool ta, bool tb, int m, int n, int k, double alpha,
                  const void* a, int lda, int64_t sa, const void* b, int ldb, int64_t sb, void* c, int ldc,
                  int64_t sc, int batch) {
  const bool f64 = in == DType::F64;
  const bool half_in = in == DType::F16 || in == DType::BF16;
  if (!(in == out ? (half_in || in == DType::F32 || f64) : (half_in && out == DType::F32)))
    throw Error(ErrorKind::Internal, std::string("blas_gemm: unsupported dtypes ") + dtype_name(in) + " -> " +
                                         dtype_name(out));
  std::lock_guard<std::mutex> lock(ctx.blas_mutex);
  BlasHandle& h = handle_locked(ctx);
  const float alpha_f = float(alpha), zero_f = 0.0f;
  const double zero_d = 0.0;
  const void* al = f64 ? static_cast<const void*>(&alpha) : static_cast<const void*>(&alpha_f);
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
#if defined(WICK_GPU_HIP)
  auto type_of = [](DType d) {
    switch (d) {
      case DType::F16: return rocblas_datatype_f16_r;
      case DType::BF16: return rocblas_datatype_bf16_r;
      case DType::F32: return rocblas_datatype_f32_r;
      default: return rocblas_datatype_f64_r;
    }
  };
  const rocblas_datatype ti = type_of(in), to = type_of(out);
  const rocblas_datatype compute = f64 ? rocblas_datatype_f64_r : rocblas_datatype_f32_r;
  const rocblas_operation opa = ta ? rocblas_operation_transpose : rocblas_operation_none;
  const rocblas_operation opb = tb ? rocblas_operation_transpose : rocblas_operation_none;
  // beta = 0: C is not read, so D aliases it.
  check_blas(rocblas_gemm_strided_batched_ex(h.h, opa, opb, m, n, k, al, a, ti, lda, sa, b, ti, ldb, sb, beta, c, to,
                                             ldc, sc, c, to, ldc, sc, batch, compute, rocblas_gemm_algo_standard, 0,
                                             rocblas_gemm_flags_none),
             "rocblas_gemm_strided_batched_ex");
#else
  auto type_of = [](DType d) {
    switch (d) {
      case DType::F16: return CUDA_R_16F;
      case DType::BF16: return CUDA_R_16BF;
      case DType::F32: return CUDA_R_32F;
      default: return CUDA_R_64F;
    }
  };
  const cudaDataType_t ti = type_of(in), to = type_of(out);
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  check_blas(cublasGemmStridedBatchedEx(h.h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                        al, a, ti, lda, (long long)sa, b, ti, ldb, (long long)sb, beta, c, to, ldc,
                                        (long long)sc, batch, compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmStridedBatchedEx");
#endif
}

// The same-dtype product of kernels/matmul.cu: C = op(A) op(B), f32 accumulation for the
// 16-bit types (rounded once), f64 for f64.
void blas_gemm(DeviceContext& ctx, DType dtype, bool ta, bool tb, int m, int n, int k, const void* a, int lda,
               int64_t sa, const void* b, int ldb, int64_t sb, void* c, int ldc, int64_t sc, int batch) {
  blas_gemm_ex(ctx, dtype, dtype, ta, tb, m, n, k, 1.0, a, lda, sa, b, ldb, sb, c, ldc, sc, batch);
}

// Row-major C (m x n, ldc) = alpha op(A) (m x k) * op(B) (k x n): a row-major matrix is the
// column-major storage of its transpose, so this is column-major C^T = op(B)^T op(A)^T, with
// B first and each operand keeping its own flag and leading dim.
void blas_gemm_rm(DeviceContext& ctx, DType in, DType out, bool ta, bool tb, int m, int n, int k, double alpha,
                  const void* a, int lda, int64_t sa, const void* b, int ldb, int64_t sb, void* c, int ldc,
                  int64_t sc, int batch) {
  blas_gemm_ex(ctx, in, out, tb, ta, n, m, k, alpha, b, ldb, sb, a, lda, sa, c, ldc, sc, batch);
}

}  // namespace wick::gpu

#pragma once
// Entries of kernels/quant.cu that other GPU kernel files call (kernels/qmatmul.cu's prefill rows).
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

// y = x @ W^T for many rows (the prefill path of GpuStorage::qmatmul): W (q.rows = n, q.cols = k)
// in the blocks of `w`; x (m, k) f32/f16/bf16 on w's device, x_l rank 2 with a unit last stride
// (any row stride, any offset). Returns (m, n) contiguous in x's dtype. W is dequantized to f16
// (bf16 for bf16 x) in chunks of rows and multiplied by the vendor GEMM with f32 accumulation;
// f32 x is rounded to f16 for the product (as llama.cpp's cuBLAS path).
StoragePtr qmatmul_prefill(const GpuStorage& w, const QuantDims& q, const Storage& x, const Layout& x_l);

}  // namespace wick::gpu

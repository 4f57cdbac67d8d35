#pragma once
// The f16/bf16 matrix-vector path of kernels/matmul.cu on raw device pointers, for the benchmark
// (bench/gpu_matvec.cu), which times it without the Tensor layer around it.
#include <cstddef>
#include <cstdint>

#include "backend/gpu/runtime.hpp"
#include "wick/dtype.hpp"

namespace wick::gpu {

// y (m, n) = x (m, k) W^T on stream s, W (n, k) row-major with row stride w_ld, x rows (m in 1..8)
// with row stride x_ld, dt f16 or bf16, k a multiple of 8 and every pointer and stride 16-byte
// aligned (matmul's matvec_applies). rows_per_block (1, 2, 4; m = 1 only) overrides the tuned
// weight rows per thread block and block_threads (a multiple of 64 up to tune::kMvMaxBlock) the
// threads per block, for the benchmark's sweep; 0 takes the tuned values.
void matvec(gpuStream_t s, DType dt, const void* x, int64_t x_ld, size_t m, const void* w, int64_t w_ld, size_t n,
            size_t k, void* y, int rows_per_block = 0, int block_threads = 0);

}  // namespace wick::gpu

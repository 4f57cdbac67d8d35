#pragma once
// WICK_HD marks functions usable on host and device (nvcc/hipcc); plain inline under g++.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define WICK_HD __host__ __device__ inline
#else
#define WICK_HD inline
#endif

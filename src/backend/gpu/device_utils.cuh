#pragma once
// Device-side building blocks shared by every kernel file: warp size and shuffles, layouts
// passed by value, and the element-wise launcher with its vectorised contiguous path.
#include <array>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <utility>

#include "backend/gpu/runtime.hpp"
#include "backend/gpu/tuning.hpp"
#include "ops/capabilities.hpp"
#include "ops/dot4.hpp"  // dot4_i8: the int8 dot-product helper (__dp4a / sdot4 / sudot4 / portable)
#include "wick/layout.hpp"

namespace wick::gpu {

// The physical warp size is a property of the compile target: 64-lane wavefronts on AMD
// CDNA (gfx9: MI100/200/300), 32 lanes on RDNA (gfx10+) and NVIDIA. Host code never uses
// this constant: launch configurations are multiples of 64 so both fit.
constexpr int kWarpSize = WICK_WAVE_SIZE;
constexpr int kMaxWarpsPerBlock = 1024 / 32;  // shared arrays sized for the smallest warp
constexpr int kBlock = tune::kBlock;          // default block: a multiple of 64

// Every kernel states the largest block it is launched with (the launcher's constant). Without it
// AMDGPU assumes 1024-thread blocks and caps a wave64 kernel at 128 VGPRs, so kernels launched
// with 256 threads spilled to scratch (scripts/amd_resource_usage.sh checks it).
#define WICK_LAUNCH_BOUNDS(n) __launch_bounds__(n)

// Programmatic dependent launch (PDL; CUDA on sm_90 and later): a kernel started by launch_kernel()
// may become resident while the kernel before it in the stream is still running, so its launch
// overlaps that kernel's tail instead of following it (a decode step is hundreds of small kernels).
// Every kernel's first statement is kernel_entry(): it waits until the previous kernel has completed
// and its writes are visible (so, kernel by kernel, all earlier work), then lets the next kernel
// launch. Nothing may touch memory before it. AMD has no such launch: there it is empty, and the
// launch is an ordinary one.
__device__ __forceinline__ void kernel_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#if !defined(WICK_GPU_HIP)
// A shared-memory pointer as a shared-window address, what cp.async and ldmatrix take (NVIDIA): a
// kernel may compute a lane's base once and fold its offsets into the instructions.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#endif
#if WICK_HAS_CP_ASYNC
// cp_async16 to a shared-window address (smem_addr).
__device__ __forceinline__ void cp_async16_to(unsigned s, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
#endif
// 16 bytes global -> shared without a register round trip (cp.async, NVIDIA sm_80+); src_bytes 0
// writes zeros and reads nothing. Elsewhere an ordinary copy through a register, so a kernel that
// streams through a shared ring keeps one source. cp_async_wait<N>() returns once at most N of the
// thread's committed groups are still in flight: its own copies before them are then visible to it.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
#if WICK_HAS_CP_ASYNC
  cp_async16_to(smem_addr(smem), gmem, src_bytes);
#else
  uint4 v = make_uint4(0, 0, 0, 0);
  if (src_bytes) v = *static_cast<const uint4*>(gmem);
  *static_cast<uint4*>(smem) = v;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if WICK_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if WICK_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// __restrict__ lets the compiler move loads through a pointer above the wait in kernel_entry() (the
// wait is not an access "through" that pointer), reading what the previous kernel has not yet written:
// kernels say WICK_RESTRICT, which is __restrict__ only where there is no PDL.
#if defined(WICK_GPU_HIP)
#define WICK_RESTRICT __restrict__
#else
#define WICK_RESTRICT
#endif

// Whether `kernel` may be launched with PDL on the current device: its code was built for sm_90 or
// later (so kernel_entry() waits). H100, `wick bench-llm FILE -p 0 -n 128` with the attribute off
// and on: tg128 1.1B Q4_0 764 -> 834 t/s, 7B Q4_0 344 -> 361.
bool pdl_allowed(const void* kernel);

// Whether the binary the runtime picked for the current device holds `kernel`'s sm_80+ code (a build
// for older targets only would JIT a body compiled without it): the tensor-core kernels ask before
// they take a launch. False on HIP builds.
bool has_sm80_body(const void* kernel);

// The shared memory a block gets without asking (CUDA; HIP's launches take up to the workgroup's LDS).
constexpr size_t kUnaskedSmem = 48 * 1024;
// `kernel`'s static shared memory (its __shared__ arrays, the cdna emulation's wave exchange among
// them), kept per kernel: a block's dynamic bytes come on top of it.
size_t static_smem(const void* kernel);
// Asks for `dynamic` bytes of dynamic shared memory for `kernel` where, with its static arrays, the
// block passes the 48 KiB a launch gets unasked (the current device's attribute).
void allow_dynamic_smem(const void* kernel, size_t dynamic, const char* what);

// Blocks of `kernel` (launched with `block` threads and `smem` bytes of dynamic shared memory) that one
// SM of device `ordinal` holds at once: the runtime's occupancy answer, kept per (device, kernel,
// block, smem) since it never changes; 1 if the runtime cannot say. For grids of one resident wave.
int resident_blocks(int ordinal, const void* kernel, int block, size_t smem);

// The one way kernels are launched: kernel<<<grid, block, smem, s>>>(args...), with PDL where allowed.
template <class... P, class... A>
void launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, gpuStream_t s, A&&... args) {
#if !defined(WICK_GPU_HIP)
  if (pdl_allowed(reinterpret_cast<const void*>(kernel))) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);  // its error stays for check_launch()
    return;
  }
#endif
  kernel<<<grid, block, smem, s>>>(std::forward<A>(args)...);
}

#if WICK_WAVE_ON_WARP_PAIRS
// The cdna emulation (-DWICK_GPU_EMULATE=cdna) runs a 64-lane wave on two NVIDIA warps: wave w of a
// block is warps 2w and 2w+1 (linear thread ids 64w..64w+63, as AMD forms waves). A shuffle whose
// partner lane is in the other warp goes through shared memory, the two warps meeting at named
// barrier 1 + w (barrier 0 is __syncthreads), which only the wave's 64 threads wait for. An NVIDIA
// block has 16 barriers, so at most 15 waves (960 threads): the AMD tuning keeps blocks <= 512.
constexpr int kMaxEmulatedWaves = 15;
__device__ __forceinline__ void wave_pair_barrier(unsigned wave) {
  asm volatile("barrier.sync %0, 64;" ::"r"(wave + 1) : "memory");
}
__device__ __noinline__ uint32_t wave64_xor_u32(uint32_t v, int lane_mask) {
  __shared__ uint32_t slot[kMaxEmulatedWaves][64];
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned id = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned wave = id / 64, lane = id % 64;
  if (wave >= unsigned(kMaxEmulatedWaves) || (wave + 1) * 64 > threads) {
    // On AMD this shuffle would read lanes of a wave that does not exist (a partial last wave) or
    // the block is larger than the emulation can pair: either way, stop loudly.
    printf("wick cdna emulation: wave64 shuffle in a block of %u threads (thread %u): %s\n", threads, id,
           wave >= unsigned(kMaxEmulatedWaves) ? "more than 15 waves" : "the wave's other half does not exist");
    __trap();
  }
  slot[wave][lane] = v;
  wave_pair_barrier(wave);
  const uint32_t r = slot[wave][lane ^ unsigned(lane_mask)];
  wave_pair_barrier(wave);  // every lane has read before a later shuffle rewrites the slots
  return r;
}
#endif

// The one shuffle helper: full-warp xor shuffle for any warp width.
template <class T> __device__ __forceinline__ T shfl_xor(T v, int lane_mask) {
#if defined(__HIPCC__)
  return __shfl_xor(v, lane_mask, kWarpSize);
#elif WICK_WAVE_ON_WARP_PAIRS
  if (lane_mask < 32) return __shfl_xor_sync(0xffffffffu, v, lane_mask, 32);  // the partner is in this warp
  static_assert(sizeof(T) % 4 == 0, "shfl_xor moves 32-bit words (shfl_xor_any takes other sizes)");
  uint32_t w[sizeof(T) / 4];
  __builtin_memcpy(w, &v, sizeof(T));
  for (auto& x : w) x = wave64_xor_u32(x, lane_mask);
  __builtin_memcpy(&v, w, sizeof(T));
  return v;
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, kWarpSize);
#endif
}

// shfl_xor for any trivially copyable value (accumulator structs, f16, 8-byte types): moved
// as 32-bit words.
template <class T> __device__ __forceinline__ T shfl_xor_any(const T& v, int lane_mask) {
  constexpr int kWords = int((sizeof(T) + 3) / 4);
  uint32_t w[kWords] = {};
  __builtin_memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = shfl_xor(w[i], lane_mask);
  T r;
  __builtin_memcpy(&r, w, sizeof(T));
  return r;
}

// Orders one warp's (wave's) shared-memory writes before its lanes' later reads of each other's
// words: __syncwarp on NVIDIA, the wave's two warps at their named barrier in the cdna emulation;
// an AMD wave runs its LDS instructions in order, so only the compiler must not move them.
__device__ __forceinline__ void wave_sync() {
#if WICK_WAVE_ON_WARP_PAIRS
  wave_pair_barrier(unsigned(threadIdx.x) / 64u);  // 1-D blocks
#elif defined(WICK_GPU_HIP)
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
  __syncwarp();
#endif
}

// Reduces v across the warp with op; every lane gets the result.
template <class T, class Op> __device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int m = kWarpSize / 2; m > 0; m >>= 1) v = op(v, shfl_xor(v, m));
  return v;
}

// v reduced over the g threads of a row; every one of them gets the result (a butterfly of
// commutative steps gives the same bits in every lane). g <= 32 is a power of two: an aligned
// lane group inside one warp (32 or 64 lanes), so xor masks below g never leave it. Otherwise
// g == blockDim.x, a multiple of 64: warps reduce, lane 0s meet in buf, each warp re-reduces
// the partials. Every thread of the block must call this (uniform control flow). Callers
// alternate between two bufs, so one barrier per call suffices: a buf is rewritten only after
// the barrier of a later call, which every reader of the earlier one has passed.
template <class C, class Op> __device__ __forceinline__ C row_reduce(C v, Op op, C identity, int g, C* buf) {
  if (g <= 32) {
    for (int m = g >> 1; m > 0; m >>= 1) v = op(v, shfl_xor(v, m));
    return v;
  }
  v = warp_reduce(v, op);
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  const int nw = int(blockDim.x) / kWarpSize;
  v = lane < nw ? buf[lane] : identity;
  return warp_reduce(v, op);
}

// The block's sums of acc[r][i] (the matrix-vector kernels: R weight rows by M rows of x per block):
// each warp's sum, then the warps' in warp order. Thread t < R * M gets entry t (r = t / M, i = t % M)
// in *sum and true; the other threads false. Every thread of the block must call it.
template <int R, int M>
__device__ __forceinline__ bool block_sum(const float (&acc)[R][M], float* sum) {
  __shared__ float part[kMaxWarpsPerBlock][R * M];
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int n_warps = int(blockDim.x) / kWarpSize;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float v = warp_reduce(acc[r][i], [](float a, float b) { return a + b; });
      if (lane == 0) part[warp][r * M + i] = v;
    }
  __syncthreads();
  const int t = int(threadIdx.x);
  if (t >= R * M) return false;
  float s = 0.0f;
  for (int q = 0; q < n_warps; ++q) s += part[q][t];
  *sum = s;
  return true;
}

// A layout by value, after merging dims that are contiguous with each other in every
// operand. Up to kMaxDims dims; larger ranks are split by the host into several launches.
constexpr int kMaxDims = 8;
template <int N> struct StridedDesc {
  int rank;
  int64_t dims[kMaxDims];
  int64_t strides[N][kMaxDims];
  int64_t offsets[N];
  __host__ __device__ int64_t offset(int k, int64_t i) const {
    int64_t o = offsets[k];
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = i / dims[d];
      o += (i - q * dims[d]) * strides[k][d];
      i = q;
    }
    return o;
  }
  // Every operand's offset of element i in one walk over the dims.
  __host__ __device__ void offsets_of(int64_t i, int64_t (&o)[N]) const {
    for (int k = 0; k < N; ++k) o[k] = offsets[k];
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = i / dims[d], r = i - q * dims[d];
      for (int k = 0; k < N; ++k) o[k] += r * strides[k][d];
      i = q;
    }
  }
};

// Builds the merged description of N layouts over `shape`; returns false if it needs more
// than kMaxDims dims (callers then split the work).
template <int N> bool make_desc(const Shape& shape, const std::array<const Layout*, N>& ls, StridedDesc<N>* out) {
  StridedDesc<N> d{};
  d.rank = 0;
  for (int k = 0; k < N; ++k) d.offsets[k] = int64_t(ls[k]->offset);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = d.rank > 0;
    for (int k = 0; k < N && merge; ++k) merge = d.strides[k][d.rank - 1] == ls[k]->strides[i] * int64_t(shape[i]);
    if (merge) {
      d.dims[d.rank - 1] *= int64_t(shape[i]);
      for (int k = 0; k < N; ++k) d.strides[k][d.rank - 1] = ls[k]->strides[i];
    } else {
      if (d.rank == kMaxDims) return false;
      d.dims[d.rank] = int64_t(shape[i]);
      for (int k = 0; k < N; ++k) d.strides[k][d.rank] = ls[k]->strides[i];
      ++d.rank;
    }
  }
  if (d.rank == 0) {
    d.rank = 1;
    d.dims[0] = 1;
    for (int k = 0; k < N; ++k) d.strides[k][0] = 1;
  }
  *out = d;
  return true;
}

template <int N> bool desc_is_contiguous(const StridedDesc<N>& d) {
  if (d.rank != 1) return false;
  for (int k = 0; k < N; ++k)
    if (d.strides[k][0] != 1) return false;
  return true;
}

inline unsigned grid_for(int64_t n, int block = kBlock) {
  int64_t g = (n + block - 1) / block;
  return unsigned(g < 1 ? 1 : (g > 65535 * 8 ? 65535 * 8 : g));  // grid-stride loops cover the rest
}

// ---- element-wise map: out[i] = f(in0[...], in1[...], ...), out contiguous.

template <class T, int V> struct alignas(sizeof(T) * V) VecOf {
  T v[V];
};

// Strided: one multi-index walk per element gives every operand's offset. Overloads for
// 1 to 3 inputs (nvcc allows one trailing pack per kernel).
template <class Out, class F, class A>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    map_strided_kernel(Out* WICK_RESTRICT out, int64_t n, F f, StridedDesc<1> d, const A* WICK_RESTRICT a) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t o[1];
    d.offsets_of(i, o);
    out[i] = f(a[o[0]]);
  }
}
template <class Out, class F, class A, class B>
__global__ void WICK_LAUNCH_BOUNDS(kBlock) map_strided_kernel(Out* WICK_RESTRICT out, int64_t n, F f, StridedDesc<2> d,
                                                              const A* WICK_RESTRICT a, const B* WICK_RESTRICT b) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t o[2];
    d.offsets_of(i, o);
    out[i] = f(a[o[0]], b[o[1]]);
  }
}
template <class Out, class F, class A, class B, class C>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    map_strided_kernel(Out* WICK_RESTRICT out, int64_t n, F f, StridedDesc<3> d, const A* WICK_RESTRICT a,
                       const B* WICK_RESTRICT b, const C* WICK_RESTRICT c) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t o[3];
    d.offsets_of(i, o);
    out[i] = f(a[o[0]], b[o[1]], c[o[2]]);
  }
}

template <class Out, class F, class... In>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    map_contig_kernel(Out* WICK_RESTRICT out, int64_t n, F f, const In* WICK_RESTRICT... in) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) out[i] = f(in[i]...);
}

// Contiguous, aligned: V elements per thread with one 16-byte-or-less vector access per
// operand (1 to 3 inputs: every element-wise op of the contract).
template <int V, class Out, class F, class A>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    map_vec_kernel(Out* WICK_RESTRICT out, int64_t nv, F f, const A* WICK_RESTRICT a) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nv; i += step) {
    VecOf<A, V> x = reinterpret_cast<const VecOf<A, V>*>(a)[i];
    VecOf<Out, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = f(x.v[j]);
    reinterpret_cast<VecOf<Out, V>*>(out)[i] = o;
  }
}
template <int V, class Out, class F, class A, class B>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    map_vec_kernel(Out* WICK_RESTRICT out, int64_t nv, F f, const A* WICK_RESTRICT a, const B* WICK_RESTRICT b) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nv; i += step) {
    VecOf<A, V> x = reinterpret_cast<const VecOf<A, V>*>(a)[i];
    VecOf<B, V> y = reinterpret_cast<const VecOf<B, V>*>(b)[i];
    VecOf<Out, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = f(x.v[j], y.v[j]);
    reinterpret_cast<VecOf<Out, V>*>(out)[i] = o;
  }
}
template <int V, class Out, class F, class A, class B, class C>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    map_vec_kernel(Out* WICK_RESTRICT out, int64_t nv, F f, const A* WICK_RESTRICT a, const B* WICK_RESTRICT b,
                   const C* WICK_RESTRICT c) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nv; i += step) {
    VecOf<A, V> x = reinterpret_cast<const VecOf<A, V>*>(a)[i];
    VecOf<B, V> y = reinterpret_cast<const VecOf<B, V>*>(b)[i];
    VecOf<C, V> z = reinterpret_cast<const VecOf<C, V>*>(c)[i];
    VecOf<Out, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = f(x.v[j], y.v[j], z.v[j]);
    reinterpret_cast<VecOf<Out, V>*>(out)[i] = o;
  }
}

template <class T> constexpr size_t max_size_of() { return sizeof(T); }
template <class T, class U, class... R> constexpr size_t max_size_of() {
  return sizeof(T) > max_size_of<U, R...>() ? sizeof(T) : max_size_of<U, R...>();
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class Out, class F, int N, size_t... K, class... In>
void launch_map_desc(std::index_sequence<K...> ks, gpuStream_t s, Out* out, int64_t n, F f, const StridedDesc<N>& d,
                     const In*... in) {
  if (!desc_is_contiguous<N>(d)) {
    (void)ks;
    void (*k)(Out*, int64_t, F, StridedDesc<N>, const In*...) = map_strided_kernel<Out, F, In...>;
    launch_kernel(k, grid_for(n), kBlock, 0, s, out, n, f, d, in...);
    return;
  }
  constexpr size_t kBytes = max_size_of<Out, In...>();
  constexpr int V = int(16 / kBytes) > 0 ? int(16 / kBytes) : 1;
  const bool vec_ok = V > 1 && sizeof...(In) <= 3 && aligned16(out) && (aligned16(in + d.offsets[K]) && ...);
  if constexpr (sizeof...(In) <= 3) {
    if (vec_ok) {
      const int64_t nv = n / V, done = nv * V;
      void (*vk)(Out*, int64_t, F, const In*...) = map_vec_kernel<V, Out, F, In...>;
      if (nv > 0) launch_kernel(vk, grid_for(nv), kBlock, 0, s, out, nv, f, (in + d.offsets[K])...);
      if (done < n)
        launch_kernel(map_contig_kernel<Out, F, In...>, 1, kBlock, 0, s, out + done, n - done, f,
                      (in + d.offsets[K] + done)...);
      return;
    }
  }
  launch_kernel(map_contig_kernel<Out, F, In...>, grid_for(n), kBlock, 0, s, out, n, f, (in + d.offsets[K])...);
}

// ---- tiled transpose: out (contiguous) = f(in...) where one input's unit-stride dim `a` is not
// the output's innermost dim `b` (a 2-D transpose, possibly batched). That input's T x T block is
// read along a into shared memory, then the output block is written along b, so both coalesce.
// The other inputs are read directly (coalesced when their stride along b is 0 or 1).

template <int N> struct TileDesc {
  int64_t na, nb;                 // extents of dims a and b
  int64_t tiles_a, tiles_b, n_tiles;
  int64_t sa[N], sb[N];           // every input's strides along a and b
  int64_t out_sa;                 // the output's stride along a (along b it is 1)
  StridedDesc<N + 1> batch;       // the other dims: inputs 0..N-1, then the output
};

template <class S> constexpr int tile_pad() { return sizeof(S) >= 4 ? 1 : int(4 / sizeof(S)); }  // one bank
template <class Out, class S> constexpr int tile_side() {
  return tune::transpose_tile(int(sizeof(Out) > sizeof(S) ? sizeof(Out) : sizeof(S)));
}

// Tile t's corner (a0, b0), valid extents (ra, rb) and every operand's offset of that corner.
template <int N> __device__ __forceinline__ void tile_at(const TileDesc<N>& td, int64_t t, int T, int64_t (&o)[N + 1],
                                                        int64_t& ra, int64_t& rb) {
  const int64_t tb = t % td.tiles_b, rest = t / td.tiles_b;
  const int64_t ta = rest % td.tiles_a, bi = rest / td.tiles_a;
  td.batch.offsets_of(bi, o);
  const int64_t a0 = ta * T, b0 = tb * T;
  for (int k = 0; k < N; ++k) o[k] += a0 * td.sa[k] + b0 * td.sb[k];
  o[N] += a0 * td.out_sa + b0;
  ra = td.na - a0 < T ? td.na - a0 : T;
  rb = td.nb - b0 < T ? td.nb - b0 : T;
}

// tile[b][a] = src[a + b * sb] over the valid (ra, rb) part; thread (x = a, y = rows of b).
template <int T, class S>
__device__ __forceinline__ void tile_stage(S* tile, const S* WICK_RESTRICT src, int64_t sb, int64_t ra, int64_t rb) {
  constexpr int R = tune::kTransposeBlock / T, W = T + tile_pad<S>();
  const int x = int(threadIdx.x) % T, y = int(threadIdx.x) / T;
  if (ra == T && rb == T) {
#pragma unroll 8
    for (int k = 0; k < T / R; ++k) tile[(y + k * R) * W + x] = src[x + int64_t(y + k * R) * sb];
  } else if (x < ra) {
    for (int j = y; j < rb; j += R) tile[j * W + x] = src[x + int64_t(j) * sb];
  }
}

// Calls put(a, b) for every valid element of the output block, thread x = b (coalesced).
template <int T, class Put> __device__ __forceinline__ void tile_emit(int64_t ra, int64_t rb, Put put) {
  constexpr int R = tune::kTransposeBlock / T;
  const int x = int(threadIdx.x) % T, y = int(threadIdx.x) / T;
  if (ra == T && rb == T) {
#pragma unroll 8
    for (int k = 0; k < T / R; ++k) put(y + k * R, x);
  } else if (x < rb) {
    for (int j = y; j < ra; j += R) put(j, x);
  }
}

template <class Out, class F, class A>
__global__ void WICK_LAUNCH_BOUNDS(tune::kTransposeBlock)
    map_tile_kernel(Out* WICK_RESTRICT out, F f, TileDesc<1> td, const A* WICK_RESTRICT a) {
  kernel_entry();
  constexpr int T = tile_side<Out, A>(), W = T + tile_pad<A>();
  __shared__ uint64_t raw[(T * W * sizeof(A) + 7) / 8];  // raw: the storage types have default member initialisers
  A* tile = reinterpret_cast<A*>(raw);
  for (int64_t t = blockIdx.x; t < td.n_tiles; t += gridDim.x) {
    int64_t o[2], ra, rb;
    tile_at<1>(td, t, T, o, ra, rb);
    tile_stage<T>(tile, a + o[0], td.sb[0], ra, rb);
    __syncthreads();
    Out* dst = out + o[1];
    tile_emit<T>(ra, rb, [&](int i, int j) { dst[i * td.out_sa + j] = f(tile[j * W + i]); });
    __syncthreads();  // the tile is rewritten by the next round
  }
}

// Two inputs, input P staged.
template <int P, class Out, class F, class A, class B>
__global__ void WICK_LAUNCH_BOUNDS(tune::kTransposeBlock)
    map_tile_kernel(Out* WICK_RESTRICT out, F f, TileDesc<2> td, const A* WICK_RESTRICT a, const B* WICK_RESTRICT b) {
  kernel_entry();
  using S = std::conditional_t<P == 0, A, B>;
  constexpr int T = tile_side<Out, S>(), W = T + tile_pad<S>();
  __shared__ uint64_t raw[(T * W * sizeof(S) + 7) / 8];
  S* tile = reinterpret_cast<S*>(raw);
  for (int64_t t = blockIdx.x; t < td.n_tiles; t += gridDim.x) {
    int64_t o[3], ra, rb;
    tile_at<2>(td, t, T, o, ra, rb);
    Out* dst = out + o[2];
    if constexpr (P == 0) {
      tile_stage<T>(tile, a + o[0], td.sb[0], ra, rb);
      __syncthreads();
      const B* q = b + o[1];
      const int64_t qa = td.sa[1], qb = td.sb[1];
      tile_emit<T>(ra, rb, [&](int i, int j) { dst[i * td.out_sa + j] = f(tile[j * W + i], q[i * qa + j * qb]); });
    } else {
      tile_stage<T>(tile, b + o[1], td.sb[1], ra, rb);
      __syncthreads();
      const A* q = a + o[0];
      const int64_t qa = td.sa[0], qb = td.sb[0];
      tile_emit<T>(ra, rb, [&](int i, int j) { dst[i * td.out_sa + j] = f(q[i * qa + j * qb], tile[j * W + i]); });
    }
    __syncthreads();
  }
}

// Finds the input to stage: the one input whose stride along the output's innermost dim is
// neither 0 nor 1 while another dim has stride 1 (returned in *p, that dim in *ka). False when
// no input or more than one is transposed, or the tile would be mostly empty.
template <int N> bool tile_plan(const StridedDesc<N>& d, int* p, int* ka) {
  const int L = d.rank - 1;
  if (L < 1) return false;
  *p = -1;
  for (int q = 0; q < N; ++q) {
    const int64_t sl = d.strides[q][L];
    if (sl == 0 || sl == 1) continue;
    int k = -1;
    for (int j = L - 1; j >= 0 && k < 0; --j)
      if (d.strides[q][j] == 1) k = j;
    if (k < 0) continue;  // no unit-stride dim: a tile would not make its reads coalesce
    if (*p >= 0) return false;
    *p = q;
    *ka = k;
  }
  return *p >= 0 && d.dims[*ka] >= tune::kTransposeMinExtent && d.dims[L] >= tune::kTransposeMinExtent;
}

// The tile description of d for tiles of side T, a = dim ka.
template <int N> TileDesc<N> make_tile_desc(const StridedDesc<N>& d, int ka, int T) {
  const int L = d.rank - 1;
  TileDesc<N> td{};
  int64_t os[kMaxDims];
  os[L] = 1;
  for (int j = L - 1; j >= 0; --j) os[j] = os[j + 1] * d.dims[j + 1];
  td.na = d.dims[ka];
  td.nb = d.dims[L];
  for (int k = 0; k < N; ++k) {
    td.sa[k] = d.strides[k][ka];
    td.sb[k] = d.strides[k][L];
  }
  td.out_sa = os[ka];
  StridedDesc<N + 1>& b = td.batch;
  b.rank = 0;
  int64_t n_batch = 1;
  for (int k = 0; k < N; ++k) b.offsets[k] = d.offsets[k];
  b.offsets[N] = 0;
  for (int j = 0; j < L; ++j) {
    if (j == ka) continue;
    b.dims[b.rank] = d.dims[j];
    for (int k = 0; k < N; ++k) b.strides[k][b.rank] = d.strides[k][j];
    b.strides[N][b.rank] = os[j];
    n_batch *= d.dims[j];
    ++b.rank;
  }
  if (b.rank == 0) {
    b.rank = 1;
    b.dims[0] = 1;
    for (int k = 0; k <= N; ++k) b.strides[k][0] = 0;
  }
  td.tiles_a = (td.na + T - 1) / T;
  td.tiles_b = (td.nb + T - 1) / T;
  td.n_tiles = n_batch * td.tiles_a * td.tiles_b;
  return td;
}

inline unsigned tile_grid(int64_t n_tiles) { return unsigned(n_tiles < (int64_t(1) << 20) ? n_tiles : (int64_t(1) << 20)); }

// Launches the tiled kernel when d is a transpose of one input (1 or 2 inputs); false otherwise.
template <class Out, class F, class A>
bool launch_map_tile(gpuStream_t s, Out* out, F f, const StridedDesc<1>& d, const A* a) {
  int p, ka;
  if (!tile_plan<1>(d, &p, &ka)) return false;
  const TileDesc<1> td = make_tile_desc<1>(d, ka, tile_side<Out, A>());
  void (*k)(Out*, F, TileDesc<1>, const A*) = map_tile_kernel<Out, F, A>;
  launch_kernel(k, tile_grid(td.n_tiles), tune::kTransposeBlock, 0, s, out, f, td, a);
  return true;
}
template <class Out, class F, class A, class B>
bool launch_map_tile(gpuStream_t s, Out* out, F f, const StridedDesc<2>& d, const A* a, const B* b) {
  int p, ka;
  if (!tile_plan<2>(d, &p, &ka)) return false;
  if (p == 0) {
    const TileDesc<2> td = make_tile_desc<2>(d, ka, tile_side<Out, A>());
    launch_kernel(map_tile_kernel<0, Out, F, A, B>, tile_grid(td.n_tiles), tune::kTransposeBlock, 0, s, out, f, td, a,
                  b);
  } else {
    const TileDesc<2> td = make_tile_desc<2>(d, ka, tile_side<Out, B>());
    launch_kernel(map_tile_kernel<1, Out, F, A, B>, tile_grid(td.n_tiles), tune::kTransposeBlock, 0, s, out, f, td, a,
                  b);
  }
  return true;
}

// Calls launch(desc, base, n) for the layouts ls over `shape`, splitting leading dims until
// the merged description fits kMaxDims; base is the row-major index of the part's first
// element and n its element count.
template <int N, class Launch>
void for_each_desc(const Shape& shape, const std::array<const Layout*, N>& ls, int64_t base, Launch&& launch) {
  const int64_t n = int64_t(shape_numel(shape));
  if (n == 0) return;
  StridedDesc<N> d;
  if (make_desc<N>(shape, ls, &d)) {
    launch(d, base, n);
    return;
  }
  const Shape inner(shape.begin() + 1, shape.end());
  const int64_t inner_n = int64_t(shape_numel(inner));
  for (size_t i0 = 0; i0 < shape[0]; ++i0) {
    std::array<Layout, N> sub;
    std::array<const Layout*, N> sp;
    for (int k = 0; k < N; ++k) {
      sub[k] = Layout(inner, std::vector<int64_t>(ls[k]->strides.begin() + 1, ls[k]->strides.end()),
                      size_t(int64_t(ls[k]->offset) + int64_t(i0) * ls[k]->strides[0]));
      sp[k] = &sub[k];
    }
    for_each_desc<N>(inner, sp, base + int64_t(i0) * inner_n, launch);
  }
}

// out[i] = f(in...) over `shape`, inputs read through their layouts; out is contiguous.
// Launches on stream s. Ranks that do not fit kMaxDims after merging are split (for_each_desc).
// kTile (1 or 2 inputs): a transposed input goes through the tiled kernel (more code: opt-in).
template <bool kTile = false, class Out, class F, class... In>
void launch_map(gpuStream_t s, Out* out, const Shape& shape, F f, const std::array<const Layout*, sizeof...(In)>& ls,
                const In*... in) {
  constexpr int N = int(sizeof...(In));
  for_each_desc<N>(shape, ls, 0, [&](const StridedDesc<N>& d, int64_t base, int64_t n) {
    bool done = false;
    if constexpr (kTile && N <= 2) done = launch_map_tile(s, out + base, f, d, in...);
    if (!done) launch_map_desc(std::make_index_sequence<N>{}, s, out + base, n, f, d, in...);
    check_launch("map");
  });
}

}  // namespace wick::gpu

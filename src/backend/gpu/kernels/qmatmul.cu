// GPU quantized matmul y = x @ W^T. Up to tune::kQmvMaxRows rows of x: the matrix-vector path
// here (llama.cpp's mmvq scheme, our code): x quantized on the device to Q8_1 (the bytes of
// quant_encode.hpp's quantize_block_q8_1), then one pass over W in which every weight chunk is
// unpacked once and dotted with all rows through dot4_i8 (ops/quant_dot.hpp). More rows: the
// prefill path of kernels/quant.cu (qmatmul_prefill).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/q8_1_store.cuh"
#include "backend/gpu/kernels/qmatvec.hpp"
#include "backend/gpu/kernels/quant.hpp"
#include "ops/quant_dot.hpp"
#include "ops/quant_encode.hpp"

namespace wick::gpu {
namespace {

using quant::dot::kQ8_1Bytes;

// Rows of x padded to the kernel's row count (1, 2, 4 or 8); the padded rows are zeros.
int padded_rows(size_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

// One Q8_1 block per 32 lanes (lane j: element j). Rows >= m are zero.
template <class T>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQmvQuantBlock)
    quantize_q8_1_kernel(const T* WICK_RESTRICT x, int64_t x_off, int64_t x_stride, int64_t m, int64_t rows, int64_t xb,
                         uint8_t* WICK_RESTRICT out) {
  kernel_entry();
  const int64_t blk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = int(threadIdx.x & 31);
  const bool valid = blk < rows * xb;  // every lane takes part in the shuffles
  const int64_t row = valid ? blk / xb : 0, b = blk - row * xb;
  const float v[1] = {valid && row < m ? cast<float>(x[x_off + row * x_stride + b * 32 + lane]) : 0.0f};
  store_q8_1<1>(v, lane, valid, out + (valid ? blk : 0) * kQ8_1Bytes);
}

// Output element (i, r) of dtype code: 0 f32, 1 f16, 2 bf16 (one kernel for every x dtype).
__device__ __forceinline__ void store_y(void* y, int dt, int64_t idx, float v) {
  if (dt == 0)
    static_cast<float*>(y)[idx] = v;
  else if (dt == 1)
    static_cast<f16*>(y)[idx] = from_f32<f16>(v);
  else
    static_cast<bf16*>(y)[idx] = from_f32<bf16>(v);
}

// R weight rows per block; the block's threads stride over the rows' chunks (consecutive
// threads: consecutive bytes), each chunk dotted with the M activation rows. Then a warp
// reduction, partial sums of the warps in shared memory, one thread per output.
template <class Tr, int M, int R>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQmvMaxBlock)
    qmv_kernel(const uint8_t* WICK_RESTRICT w, size_t row_bytes, int nblk, const uint8_t* WICK_RESTRICT xq,
               size_t xq_row_bytes, int64_t n, int m, void* WICK_RESTRICT y, int y_dt) {
  kernel_entry();
  constexpr int U = tune::kQmvUnroll;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const uint8_t* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + size_t(row0 + r < n ? row0 + r : n - 1) * row_bytes;  // past n: not stored
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;
  const int units = nblk * Tr::C, step = int(blockDim.x);
  for (int u0 = int(threadIdx.x); u0 < units; u0 += step * U) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int u = u0 + j * step;
      if (u < units) {
        const int ib = u / Tr::C, c = u % Tr::C;
        const quant::dot::XRows xr{xq + size_t(ib) * (Tr::QK / 32) * kQ8_1Bytes, xq_row_bytes};
#pragma unroll
        for (int r = 0; r < R; ++r) Tr::template run<M>(wr[r] + size_t(ib) * Tr::BB, c, xr, acc[r]);
      }
    }
  }
  float s;
  if (block_sum<R, M>(acc, &s)) {
    const int r = int(threadIdx.x) / M, i = int(threadIdx.x) % M;
    if (row0 + r < n && i < m) store_y(y, y_dt, int64_t(i) * n + row0 + r, s);
  }
}

// ---- The staged kernel: one row of x; Q4_0 and Q8_0 rows of whole 8-block groups (k a multiple of
// 256: 144 / 272 bytes, so every row starts 16-byte aligned) that fit one warp's portion. qmv_kernel's
// lanes read 2- and 4-byte pieces of 18- / 34-byte weight blocks and 36-byte activation blocks,
// several cache lines per warp load. Here a warp copies a whole row to its shared memory in 16-byte
// loads (512 contiguous bytes per warp load), then each lane dots whole pairs of blocks (PairDot)
// with x, which the block staged once as XPairs. The grid is one wave of resident blocks whose
// warps walk the rows, each loading its next row before it computes the current one.
template <GGMLType T>
struct Staged {
  using P = quant::dot::PairDot<T>;
  static constexpr int kGroup = 16 * P::kWords;  // 8 blocks = 4 pairs of 4 * kWords bytes
  static constexpr int kLoads = tune::kQmvStagedLoads;
  static constexpr int kSlot = kWarpSize * kLoads * 16;  // a warp's shared memory: one round of loads
  static constexpr int kPortionGroups = kSlot / kGroup;  // the longest row, in groups
  static constexpr int kPairsPerLane = (4 * kPortionGroups + kWarpSize - 1) / kWarpSize;
};

// Dynamic shared memory of a block: x's pairs, then a warp's round of loads per warp (threads * 16 *
// loads bytes in all, the same for 32- and 64-lane waves).
size_t staged_smem(int xblocks, int threads) {
  return size_t(xblocks / 2) * sizeof(quant::dot::XPair) + size_t(threads) * tune::kQmvStagedLoads * 16;
}

// 16 bytes of a row. On AMD a clang vector: an array of structs (uint4, VecOf) copied into LDS
// stayed in scratch under clang 21.
#if defined(WICK_GPU_HIP)
typedef uint32_t Piece __attribute__((ext_vector_type(4)));
#else
using Piece = uint4;
#endif

// A warp's loads of one row: lane l takes pieces l, l + wave, ... (512 contiguous bytes per warp
// load on 32 lanes).
template <int L>
__device__ __forceinline__ void load_row(Piece (&buf)[L], const uint8_t* row, int lane, int pieces) {
  const auto* src = reinterpret_cast<const Piece*>(row);
#pragma unroll
  for (int j = 0; j < L; ++j)
    if (lane + j * kWarpSize < pieces) buf[j] = src[lane + j * kWarpSize];
}

template <GGMLType T>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQmvStagedBlock)
    qmv_staged_kernel(const uint8_t* WICK_RESTRICT w, int gpr, int64_t n, const uint8_t* WICK_RESTRICT xq,
                      int xblocks, void* WICK_RESTRICT y, int y_dt) {
  kernel_entry();
  using S = Staged<T>;
  using P = typename S::P;
  using quant::dot::XPair;
  extern __shared__ Piece smem[];
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int nwarps = int(blockDim.x) / kWarpSize;
  auto* xs = reinterpret_cast<XPair*>(smem);
  Piece* ws = smem + size_t(xblocks / 2) * (sizeof(XPair) / 16) + size_t(warp) * (S::kSlot / 16);
  const int64_t row_bytes = int64_t(gpr) * S::kGroup, tw = int64_t(gridDim.x) * nwarps;
  const int pieces = gpr * (S::kGroup / 16), pairs = 4 * gpr;  // of a row (the host keeps gpr <= kPortionGroups)

  Piece buf[S::kLoads];
  int64_t row = int64_t(blockIdx.x) * nwarps + warp;
  if (row < n) load_row(buf, w + row * row_bytes, lane, pieces);  // in flight while x is staged

  for (int b = int(threadIdx.x); b < xblocks; b += int(blockDim.x))
    quant::dot::set_xpair_half(xs[b / 2], b % 2, xq + size_t(b) * kQ8_1Bytes);
  __syncthreads();

  const auto* wsw = reinterpret_cast<const uint32_t*>(ws);
  for (; row < n; row += tw) {
#pragma unroll
    for (int j = 0; j < S::kLoads; ++j)
      if (lane + j * kWarpSize < pieces) ws[lane + j * kWarpSize] = buf[j];
    wave_sync();
    if (row + tw < n) load_row(buf, w + (row + tw) * row_bytes, lane, pieces);
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < S::kPairsPerLane; ++i) {
      const int p = lane + i * kWarpSize;
      if (p < pairs) {
        uint32_t wv[P::kWords];
#pragma unroll
        for (int t = 0; t < P::kWords; ++t) wv[t] = wsw[p * P::kWords + t];
        acc += P::run(wv, xs[p]);
      }
    }
    wave_sync();  // every lane has read the row before the next one is stored
    acc = warp_reduce(acc, [](float a, float b) { return a + b; });
    if (lane == 0) store_y(y, y_dt, row, acc);
  }
}

// Whether the staged kernel may take this product by its shape (the one it was measured to win,
// tune::kQmvStaged*); WICK_QMV_STAGED=0: never, to compare. The caller then checks that a row fits
// one warp's portion (staged_row_fits) at the device's wave size.
bool staged_shape(GGMLType t, size_t n, size_t k, size_t m) {
  static const bool enabled = tune::knob("WICK_QMV_STAGED") != "0";
  return enabled && m == 1 && (t == GGMLType::Q4_0 || t == GGMLType::Q8_0) && k % 256 == 0 &&
         k >= size_t(tune::kQmvStagedMinK) && n >= size_t(tune::kQmvStagedMinRows);
}
// A row of k within one warp's portion at the host's idea of the wave size (a wider device wave,
// as in the cdna emulation, only holds more).
bool staged_row_fits(GGMLType t, size_t k, int wave_size) {
  const size_t group = t == GGMLType::Q4_0 ? Staged<GGMLType::Q4_0>::kGroup : Staged<GGMLType::Q8_0>::kGroup;
  return k / 256 <= size_t(wave_size) * tune::kQmvStagedLoads * 16 / group;
}

template <GGMLType T>
void launch_staged(gpuStream_t s, const uint8_t* w, size_t n, size_t k, const uint8_t* xq, void* y, int y_dt,
                   const gpuDeviceProp_t& prop, int dev) {
  const int threads = tune::kQmvStagedBlock, xblocks = int(k / 32);
  const size_t smem = staged_smem(xblocks, threads);
  const int64_t warps = std::max(1, threads / std::max(1, prop.warpSize));
  const int64_t need = (int64_t(n) + warps - 1) / warps;
  const int64_t wave = int64_t(std::max(1, prop.multiProcessorCount)) *
                       resident_blocks(dev, reinterpret_cast<const void*>(qmv_staged_kernel<T>), threads, smem);
  const unsigned grid = unsigned(std::max<int64_t>(1, std::min(need, wave)));
  launch_kernel(qmv_staged_kernel<T>, grid, threads, smem, s, w, int(k / 256), int64_t(n), xq, xblocks, y, y_dt);
  check_launch("qmatvec (staged)");
}

template <int M, int R>
void launch_qmv_r(gpuStream_t s, GGMLType t, const uint8_t* w, size_t n, size_t k, const uint8_t* xq,
                  size_t xq_row_bytes, int m, void* y, int y_dt, int threads) {
  const unsigned grid = unsigned((n + R - 1) / R);
  const bool known = quant::dot::dispatch_dot(t, [&](auto tr) {
    using Tr = decltype(tr);
    const size_t nblk = k / Tr::QK;
    launch_kernel(qmv_kernel<Tr, M, R>, grid, threads, 0, s, w, nblk * Tr::BB, int(nblk), xq, xq_row_bytes, int64_t(n),
                  m, y, y_dt);
  });
  if (!known)
    throw Error(ErrorKind::Unsupported, std::string("qmatmul: no GPU matrix-vector kernel for ") + ggml_type_name(t) +
                                            "; supported: " + ggml_supported_types());
  check_launch("qmatvec");
}

// One activation row may take 1, 2, 4 or 8 weight rows per block (rows_per_block, 0: the tuned
// choice); more rows keep a fixed R (each weight row costs M accumulators).
template <int M>
void launch_qmv(gpuStream_t s, GGMLType t, const uint8_t* w, size_t n, size_t k, const uint8_t* xq, size_t xq_row_bytes,
                int m, void* y, int y_dt, int rows_per_block, int threads) {
  if constexpr (M == 1) {
    switch (rows_per_block ? rows_per_block : tune::kQmvRows1) {
      case 1:
        return launch_qmv_r<1, 1>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      case 2:
        return launch_qmv_r<1, 2>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      case 4:
        return launch_qmv_r<1, 4>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      case 8:
        return launch_qmv_r<1, 8>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
      default:
        break;
    }
    throw Error(ErrorKind::Argument,
                "qmatvec: rows_per_block must be 0, 1, 2, 4 or 8, got " + std::to_string(rows_per_block));
  } else {
    launch_qmv_r<M, tune::kQmvRows>(s, t, w, n, k, xq, xq_row_bytes, m, y, y_dt, threads);
  }
}

// Rows per block and threads for one row of x of type t over n rows of k elements, where the
// caller asked for the tuned choice (tune::kQmvQ4K*, kQmvShort*, kQmvLongK*; {0, 0}: the tuned
// defaults). WICK_QMV_CHOICE=off keeps the defaults for every type and shape (the A/B knob).
std::pair<int, int> one_row_choice(GGMLType t, size_t n, size_t k) {
  static const bool off = tune::knob("WICK_QMV_CHOICE") == "off";
  if (off) return {0, 0};
  const bool q40 = t == GGMLType::Q4_0, q4k = t == GGMLType::Q4_K;
  if (k <= size_t(tune::kQmvShortK) && n >= size_t(tune::kQmvManyRows)) {
    if (q40) return {tune::kQmvShortQ40Rows, tune::kQmvShortQ40Block};
    if (q4k) return {tune::kQmvShortQ4KRows, tune::kQmvShortQ4KBlock};
  }
  if (q4k && k >= size_t(tune::kQmvQ4KLongK)) return {tune::kQmvQ4KLongRows, 0};
  if ((q40 || t == GGMLType::Q8_0) && k >= size_t(tune::kQmvLongK)) return {tune::kQmvLongKRows, tune::kQmvLongKBlock};
  return {0, 0};
}

}  // namespace

size_t qmatvec_scratch_bytes(size_t m, size_t k) { return size_t(padded_rows(m)) * (k / 32) * kQ8_1Bytes; }

void qmatvec(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, const void* x, DType x_dtype, size_t m,
             size_t x_offset, size_t x_row_stride, void* scratch, void* y, int rows_per_block, int block_threads) {
  if (m == 0 || m > size_t(tune::kQmvMaxRows))
    throw Error(ErrorKind::Internal, "qmatvec: " + std::to_string(m) + " rows; the matrix-vector path takes 1 to " +
                                         std::to_string(tune::kQmvMaxRows));
  if (n == 0 || k == 0) return;
  const int rows = padded_rows(m);
  const int64_t xb = int64_t(k / 32);
  auto* xq = static_cast<uint8_t*>(scratch);
  const int64_t lanes = int64_t(rows) * xb * 32;
  const unsigned qgrid = unsigned((lanes + tune::kQmvQuantBlock - 1) / tune::kQmvQuantBlock);
  auto quantize = [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(quantize_q8_1_kernel<T>, qgrid, tune::kQmvQuantBlock, 0, s, static_cast<const T*>(x),
                  int64_t(x_offset), int64_t(x_row_stride), int64_t(m), rows, xb, xq);
  };
  switch (x_dtype) {
    case DType::F32:
      quantize(float{});
      break;
    case DType::F16:
      quantize(f16{});
      break;
    case DType::BF16:
      quantize(bf16{});
      break;
    default:
      throw Error(ErrorKind::DType, std::string("qmatmul: x must be f32, f16 or bf16, got ") + dtype_name(x_dtype));
  }
  check_launch("qmatvec quantize");
  qmatvec_q8_1(s, t, w, n, k, xq, size_t(rows), m, y, x_dtype, rows_per_block, block_threads);
}

void qmatvec_q8_1(gpuStream_t s, GGMLType t, const void* w, size_t n, size_t k, const void* xq, size_t xq_rows,
                  size_t m, void* y, DType y_dtype, int rows_per_block, int block_threads) {
  const int rows = padded_rows(m);
  if (m == 0 || m > size_t(tune::kQmvMaxRows) || xq_rows < size_t(rows))
    throw Error(ErrorKind::Internal, "qmatvec: " + std::to_string(m) + " rows with " + std::to_string(xq_rows) +
                                         " Q8_1 rows; the matrix-vector path takes 1 to " +
                                         std::to_string(tune::kQmvMaxRows) + " rows, padded to 1, 2, 4 or 8");
  if (n == 0 || k == 0) return;
  // The dot products load whole words of weight blocks, 16 bytes for Q4_K/Q5_K (quant_dot.hpp):
  // rows are whole blocks, so the weights' start must be 16-byte aligned (storage starts are).
  if (reinterpret_cast<uintptr_t>(w) % 16 != 0)
    throw Error(ErrorKind::Internal, "qmatvec: the weights start at a pointer that is not 16-byte aligned");
  const int y_dt = y_dtype == DType::F32 ? 0 : y_dtype == DType::F16 ? 1 : y_dtype == DType::BF16 ? 2 : -1;
  if (y_dt < 0)
    throw Error(ErrorKind::DType, std::string("qmatmul: y must be f32, f16 or bf16, got ") + dtype_name(y_dtype));
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xq);
  if (rows_per_block == 0 && block_threads == 0) {
    if (staged_shape(t, n, k, m)) {
      int dev = 0;
      (void)gpuGetDevice(&dev);
      const gpuDeviceProp_t& prop = context(dev).prop;
      if (staged_row_fits(t, k, prop.warpSize))
        return t == GGMLType::Q4_0 ? launch_staged<GGMLType::Q4_0>(s, wb, n, k, xb, y, y_dt, prop, dev)
                                   : launch_staged<GGMLType::Q8_0>(s, wb, n, k, xb, y, y_dt, prop, dev);
    }
    if (m == 1) std::tie(rows_per_block, block_threads) = one_row_choice(t, n, k);
  }
  const int threads = block_threads ? block_threads : tune::kQmvBlock;
  if (threads % 64 != 0 || threads > tune::kQmvMaxBlock)
    throw Error(ErrorKind::Argument, "qmatvec: block_threads must be 0 or a multiple of 64 up to " +
                                         std::to_string(tune::kQmvMaxBlock) + ", got " + std::to_string(block_threads));
  const size_t xq_row_bytes = (k / 32) * kQ8_1Bytes;
  switch (rows) {
    case 1:
      launch_qmv<1>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
    case 2:
      launch_qmv<2>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
    case 4:
      launch_qmv<4>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
    default:
      launch_qmv<8>(s, t, wb, n, k, xb, xq_row_bytes, int(m), y, y_dt, rows_per_block, threads);
      break;
  }
}

StoragePtr GpuStorage::qmatmul(const QuantDims& q, const Storage& x, const Layout& x_l, const Storage* xq) const {
  const size_t m = x_l.shape[0];
  if (m > size_t(tune::kQmvMaxRows)) return qmatmul_prefill(*this, q, x, x_l);
  DeviceGuard dg(ordinal());
  auto out = new_storage(ordinal(), m * q.rows, x.dtype());
  // Rows already quantized by their producer (norms, silu_mul): no quantization kernel. The
  // kernel reads padded rows, so only row counts that need no padding take them.
  if (xq != nullptr && size_t(padded_rows(m)) == m) {
    qmatvec_q8_1(stream(), q.type, data(), q.rows, q.cols, as_gpu(*xq).data(), m, m, out->data(), x.dtype());
    return out;
  }
  Scratch xs(ordinal(), qmatvec_scratch_bytes(m, q.cols));
  qmatvec(stream(), q.type, data(), q.rows, q.cols, as_gpu(x).data(), x.dtype(), m, x_l.offset, size_t(x_l.strides[0]),
          xs.b.ptr, out->data());
  return out;
}

}  // namespace wick::gpu

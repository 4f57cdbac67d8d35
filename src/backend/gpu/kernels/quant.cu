// GPU quantized blocks: dequantize (every supported GGUF type -> f32/f16/bf16), embedding rows,
// the activation quantizers (Q8_0, Q8_1, Q8_K) and the prefill product (dequantize W + vendor GEMM).
//
// The block math is the host's: quant::dequantize_block (ops/quant_blocks.hpp) and the encoders
// of ops/quant_encode.hpp, so GPU and CPU agree bit for bit (f32) and byte for byte (blocks).
// Those decode or encode one whole GGUF block per call, so a thread block works in rounds: the
// raw bytes of kGroup blocks are staged in shared memory with coalesced 32-bit loads, one thread
// per GGUF block decodes into an f32 stage (a padded stride keeps the lanes on distinct banks),
// and the round is written out by consecutive threads to consecutive addresses. The five types
// the benchmarks name also have a faster path, 8 elements per thread (decode8 below).
//
// Measured on an H100 (HBM3): 4096 x 4096 Q4_K -> f16 in 19.8 us (2.2 TB/s read + written);
// the prefill 512 x 4096 x 4096 Q4_K with f16 x in 45.3 us, 60% of wick's f16 matmul (27.4 us).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/gpu/blas.hpp"
#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/quant.hpp"
#include "backend/matmul_block.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/quant_blocks.hpp"
#include "ops/quant_encode.hpp"

namespace wick::gpu {
namespace {

// Compile-time facts of a block type, and the shared-memory geometry of one round.
template <GGMLType kT> struct QB {
  static constexpr int kElems = int(quant::ggml_type_info(kT)->block_elems);
  static constexpr int kBytes = int(quant::ggml_type_info(kT)->block_bytes);
  static constexpr int kGroup = tune::kQuantStageElems / kElems;  // GGUF blocks per round
  // f32 stage: an odd stride puts thread i's element j on bank (i + j) % 32, not all on one.
  static constexpr int kStride = kElems + 1;
  // Raw bytes: blocks of a whole, even number of 32-bit words get one word of padding (Q4_K's
  // 36 words would put every 8th lane on the same bank); other sizes already spread.
  static constexpr int kRawStride = (kBytes % 4 == 0 && (kBytes / 4) % 2 == 0) ? kBytes + 4 : kBytes;
  static constexpr int kRawWords = (kGroup * kRawStride + 3) / 4;
  static_assert(kGroup >= 1 && kGroup * kElems == tune::kQuantStageElems, "stage holds whole blocks");
  static_assert(size_t(kGroup * kStride * 4 + kRawWords * 4) <= kUnaskedSmem, "shared memory of a round within 48 KiB");
};

// Runs f(std::integral_constant<GGMLType, T>) for the block types wick decodes.
template <class F> void dispatch_qtype(GGMLType t, const char* op, F&& f) {
  using G = GGMLType;
  switch (t) {
#define WICK_QCASE(T) \
  case G::T:          \
    return f(std::integral_constant<G, G::T>{});
    WICK_QCASE(Q4_0)
    WICK_QCASE(Q4_1)
    WICK_QCASE(Q5_0)
    WICK_QCASE(Q5_1)
    WICK_QCASE(Q8_0)
    WICK_QCASE(Q8_1)
    WICK_QCASE(Q2_K)
    WICK_QCASE(Q3_K)
    WICK_QCASE(Q4_K)
    WICK_QCASE(Q5_K)
    WICK_QCASE(Q6_K)
    WICK_QCASE(Q8_K)
    WICK_QCASE(IQ4_NL)
    WICK_QCASE(IQ4_XS)
    WICK_QCASE(MXFP4)
#undef WICK_QCASE
    default:
      throw Error(ErrorKind::Unsupported, std::string(op) + ": ggml type " + ggml_type_name(t) +
                                              " has no GPU kernel; supported: " + ggml_supported_types());
  }
}

// Copies nb blocks of raw bytes from global src (contiguous) to the padded shared raw area.
// aligned4: src is 4-byte aligned (then whole words move, coalesced).
template <class B>
__device__ void stage_raw(uint8_t* raw, const uint8_t* WICK_RESTRICT src, int nb, bool aligned4) {
  const int n = nb * B::kBytes;
  if (aligned4) {
    const uint32_t* s32 = reinterpret_cast<const uint32_t*>(src);
    uint32_t* r32 = reinterpret_cast<uint32_t*>(raw);
    const int nw = n / 4;
    if constexpr (B::kBytes % 4 == 0) {
      constexpr int kW = B::kBytes / 4, kRW = B::kRawStride / 4;
      for (int w = threadIdx.x; w < nw; w += blockDim.x) r32[(w / kW) * kRW + w % kW] = s32[w];
    } else {  // no padding: the raw area is the bytes as they are
      for (int w = threadIdx.x; w < nw; w += blockDim.x) r32[w] = s32[w];
      for (int b = nw * 4 + int(threadIdx.x); b < n; b += blockDim.x) raw[b] = src[b];
    }
  } else {
    for (int b = threadIdx.x; b < n; b += blockDim.x) raw[(b / B::kBytes) * B::kRawStride + b % B::kBytes] = src[b];
  }
}

// Writes the n stage elements (GGUF block i's element j at stage[i * S + j]) to out[0, n) as
// Out: consecutive threads write consecutive 32-bit words (two elements of a 16-bit type).
template <int E, int S, class Out>
__device__ void store_stage(Out* WICK_RESTRICT out, const float* stage, int n) {
  if constexpr (sizeof(Out) == 2) {  // E is even, so a pair never straddles two blocks
    uint32_t* o32 = reinterpret_cast<uint32_t*>(out);
    for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
      const int e = 2 * p, s = (e / E) * S + e % E;
      o32[p] = uint32_t(cast<Out>(stage[s]).bits) | (uint32_t(cast<Out>(stage[s + 1]).bits) << 16);
    }
  } else {
    for (int e = threadIdx.x; e < n; e += blockDim.x) out[e] = stage[(e / E) * S + e % E];
  }
}

// out[g * E ..] = the decoded block g of in, for g in [0, n_blocks). out 4-byte aligned.
template <GGMLType kT, class Out>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQuantBlock)
    dequant_kernel(const uint8_t* WICK_RESTRICT in, Out* WICK_RESTRICT out, int64_t n_blocks, bool aligned4) {
  kernel_entry();
  using B = QB<kT>;
  __shared__ float stage[B::kGroup * B::kStride];
  __shared__ uint32_t raw32[B::kRawWords];
  uint8_t* raw = reinterpret_cast<uint8_t*>(raw32);
  for (int64_t g0 = int64_t(blockIdx.x) * B::kGroup; g0 < n_blocks; g0 += int64_t(gridDim.x) * B::kGroup) {
    const int nb = int(n_blocks - g0 < B::kGroup ? n_blocks - g0 : B::kGroup);
    stage_raw<B>(raw, in + g0 * B::kBytes, nb, aligned4);
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += blockDim.x)
      quant::dequantize_block(kT, raw + i * B::kRawStride, stage + i * B::kStride);
    __syncthreads();
    store_stage<B::kElems, B::kStride>(out + g0 * B::kElems, stage, nb * B::kElems);
    __syncthreads();  // the stage is rewritten by the next round
  }
}

// The speed path for the types the benchmarks name (Q4_0, Q8_0, Q4_K, Q6_K, MXFP4): a thread
// decodes 8 consecutive elements and stores them with one 16-byte (two for f32) store, with no
// shared memory and no barrier (the staged kernel above tops out near half the copy bandwidth).
// Each element is the same expression, with the same roundings in the same order, as in
// quant::dequantize_block (test_gpu_quant compares the two bit for bit on random bytes); the
// field helpers are quant_blocks.hpp's own.
template <GGMLType kT>
constexpr bool kHasDecode8 = kT == GGMLType::Q4_0 || kT == GGMLType::Q8_0 || kT == GGMLType::Q4_K ||
                             kT == GGMLType::Q6_K || kT == GGMLType::MXFP4;

// fp4 e2m1 doubled, as quant::detail::mxfp4_value but without its local table: an int first,
// so code 8 gives +0 as the table does.
__device__ __forceinline__ float mxfp4_value_nt(uint32_t q) {
  const uint32_t e = (q >> 1) & 3u, m = q & 1u;
  const int mag = int(e == 0 ? m : (2u + m) << (e - 1));
  return float((q & 8u) ? -mag : mag);
}

// Elements o .. o + 7 (o % 8 == 0) of the block at b.
template <GGMLType kT>
__device__ __forceinline__ void decode8(const uint8_t* WICK_RESTRICT b, int o, float* v) {
  using namespace quant::detail;
  if constexpr (kT == GGMLType::Q4_0 || kT == GGMLType::MXFP4) {  // nibbles: low j, high j + 16
    const bool mx = kT == GGMLType::MXFP4;
    const float d = mx ? e8m0_half(b[0]) : ld_f16(b);
    const uint8_t* qs = b + (mx ? 1 : 2) + (o & 15);
    const int sh = o < 16 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t q = (qs[i] >> sh) & 15u;
      v[i] = mx ? mul_rn(d, mxfp4_value_nt(q)) : mul_rn(d, float(int(q) - 8));
    }
  } else if constexpr (kT == GGMLType::Q8_0) {
    const float d = ld_f16(b);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = mul_rn(float(int8_t(b[2 + o + i])), d);
  } else if constexpr (kT == GGMLType::Q4_K) {
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint32_t g = uint32_t(o) >> 5, l = uint32_t(o) & 31u;
    uint32_t sc, mn;
    scale_min_k4(b + 4, g, sc, mn);
    const float dl = mul_rn(d, float(sc)), ml = mul_rn(dmin, float(mn));
    const uint8_t* qs = b + 16 + (g >> 1) * 32 + l;
    const int sh = 4 * int(g & 1u);
    uint8_t q8[8];
    if ((reinterpret_cast<uintptr_t>(qs) & 7u) == 0) {  // blocks of 144 bytes: aligned when the tensor is
      const uint2 w = *reinterpret_cast<const uint2*>(qs);
#pragma unroll
      for (int i = 0; i < 4; ++i) q8[i] = uint8_t(w.x >> (8 * i)), q8[i + 4] = uint8_t(w.y >> (8 * i));
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q8[i] = qs[i];
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = sub_rn(mul_rn(dl, float((q8[i] >> sh) & 15u)), ml);
  } else if constexpr (kT == GGMLType::Q6_K) {
    // half h of 128; quarter w of it: low nibbles of ql[l] (w 0, 2: low / high nibble) or
    // ql[l + 32] (w 1, 3), bits 2w..2w+1 of qh[l]; scale 8h + l / 16 + 2w.
    const uint32_t h = uint32_t(o) >> 7, w = (uint32_t(o) >> 5) & 3u, l = uint32_t(o) & 31u;
    const float d = ld_f16(b + 208);
    const float s = mul_rn(d, float(int8_t(b[192 + h * 8 + (l >> 4) + 2 * w])));
    const uint8_t* l8 = b + h * 64 + l + (w & 1u) * 32;
    const uint8_t* h8 = b + 128 + h * 32 + l;
    const int lsh = w >= 2 ? 4 : 0, hsh = 2 * int(w);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = mul_rn(s, float(int(((l8[i] >> lsh) & 15u) | (((h8[i] >> hsh) & 3u) << 4)) - 32));
  }
}

template <class Out>
__device__ __forceinline__ void store8(Out* WICK_RESTRICT out, const float* v) {
  if constexpr (sizeof(Out) == 2) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = uint32_t(cast<Out>(v[2 * i]).bits) | (uint32_t(cast<Out>(v[2 * i + 1]).bits) << 16);
    *reinterpret_cast<uint4*>(out) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    reinterpret_cast<float4*>(out)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(out)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

// out (16-byte aligned) [8 t .. 8 t + 8) for every t < n8 (elements / 8).
template <GGMLType kT, class Out>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQuantBlock)
    dequant8_kernel(const uint8_t* WICK_RESTRICT in, Out* WICK_RESTRICT out, int64_t n8) {
  kernel_entry();
  using B = QB<kT>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n8; t += step) {
    const int64_t e = t * 8, blk = e / B::kElems;
    float v[8];
    decode8<kT>(in + blk * B::kBytes, int(e - blk * B::kElems), v);
    store8(out + e, v);
  }
}

// Embedding: output row r is table row ids[r * ids_stride]; block g of the output is block
// g % bpr of that row. An id outside [0, rows) leaves zeros and records the smallest such r.
template <GGMLType kT, class Out, class I>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQuantBlock)
    embed_kernel(const uint8_t* WICK_RESTRICT table, int64_t rows, int64_t bpr, const I* WICK_RESTRICT ids,
                 int64_t ids_stride, int64_t n_ids, Out* WICK_RESTRICT out, unsigned long long* first_bad) {
  kernel_entry();
  using B = QB<kT>;
  __shared__ float stage[B::kGroup * B::kStride];
  const int64_t n_blocks = n_ids * bpr;
  for (int64_t g0 = int64_t(blockIdx.x) * B::kGroup; g0 < n_blocks; g0 += int64_t(gridDim.x) * B::kGroup) {
    const int nb = int(n_blocks - g0 < B::kGroup ? n_blocks - g0 : B::kGroup);
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
      const int64_t g = g0 + i, r = g / bpr, j = g - r * bpr;
      const int64_t id = int64_t(ids[r * ids_stride]);
      float* o = stage + i * B::kStride;
      if (id < 0 || id >= rows) {
        atomicMin(first_bad, static_cast<unsigned long long>(r));
        for (int e = 0; e < B::kElems; ++e) o[e] = 0.0f;
      } else {
        quant::dequantize_block(kT, table + (id * bpr + j) * B::kBytes, o);
      }
    }
    __syncthreads();
    store_stage<B::kElems, B::kStride>(out + g0 * B::kElems, stage, nb * B::kElems);
    __syncthreads();
  }
}

// Activation quantizers: block g of the output encodes x[g * E .. g * E + E) (x contiguous).
template <GGMLType kT> __device__ void encode_block(const float* x, uint8_t* out) {
  if constexpr (kT == GGMLType::Q8_0)
    quant::quantize_block_q8_0(x, out);
  else if constexpr (kT == GGMLType::Q8_1)
    quant::quantize_block_q8_1(x, out);
  else
    quant::quantize_block_q8_K(x, out);
}

template <GGMLType kT, class T>
__global__ void WICK_LAUNCH_BOUNDS(tune::kQuantBlock)
    quantize_kernel(const T* WICK_RESTRICT x, uint8_t* WICK_RESTRICT out, int64_t n_blocks, bool aligned4) {
  kernel_entry();
  using B = QB<kT>;
  static_assert(B::kRawStride == B::kBytes, "the activation blocks need no raw padding");
  __shared__ float stage[B::kGroup * B::kStride];
  __shared__ uint32_t raw32[B::kRawWords];
  uint8_t* raw = reinterpret_cast<uint8_t*>(raw32);
  for (int64_t g0 = int64_t(blockIdx.x) * B::kGroup; g0 < n_blocks; g0 += int64_t(gridDim.x) * B::kGroup) {
    const int nb = int(n_blocks - g0 < B::kGroup ? n_blocks - g0 : B::kGroup);
    const int n = nb * B::kElems;
    const T* src = x + g0 * B::kElems;
    for (int e = threadIdx.x; e < n; e += blockDim.x)
      stage[(e / B::kElems) * B::kStride + e % B::kElems] = cast<float>(src[e]);
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += blockDim.x) encode_block<kT>(stage + i * B::kStride, raw + i * B::kBytes);
    __syncthreads();
    uint8_t* dst = out + g0 * B::kBytes;
    const int nbytes = nb * B::kBytes;
    if (aligned4) {
      const int nw = nbytes / 4;
      for (int w = threadIdx.x; w < nw; w += blockDim.x) reinterpret_cast<uint32_t*>(dst)[w] = raw32[w];
      for (int b = nw * 4 + int(threadIdx.x); b < nbytes; b += blockDim.x) dst[b] = raw[b];
    } else {
      for (int b = threadIdx.x; b < nbytes; b += blockDim.x) dst[b] = raw[b];
    }
    __syncthreads();
  }
}

unsigned rounds_grid(int64_t n_blocks, int group) {
  const int64_t r = (n_blocks + group - 1) / group;
  return unsigned(r < 1 ? 1 : (r > 65535 * 8 ? 65535 * 8 : r));  // grid-stride rounds cover the rest
}

bool is_aligned4(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 3u) == 0; }

// Decodes n_blocks blocks of type t at in (device) into out (device, 4-byte aligned) as Out.
template <class Out> void dequant_launch(gpuStream_t s, GGMLType t, const uint8_t* in, Out* out, int64_t n_blocks) {
  if (n_blocks == 0) return;
  dispatch_qtype(t, "dequantize", [&](auto tc) {
    constexpr GGMLType kT = decltype(tc)::value;
    if constexpr (kHasDecode8<kT>) {
      if ((reinterpret_cast<uintptr_t>(out) & 15u) == 0) {
        const int64_t n8 = n_blocks * QB<kT>::kElems / 8;
        launch_kernel(dequant8_kernel<kT, Out>, grid_for(n8, tune::kQuantBlock), tune::kQuantBlock, 0, s, in, out, n8);
        check_launch("dequantize");
        return;
      }
    }
    launch_kernel(dequant_kernel<kT, Out>, rounds_grid(n_blocks, QB<kT>::kGroup), tune::kQuantBlock, 0, s, in, out,
                  n_blocks, is_aligned4(in));
    check_launch("dequantize");
  });
}

void dequant_launch_dtype(gpuStream_t s, GGMLType t, const uint8_t* in, void* out, DType dt, int64_t n_blocks) {
  switch (dt) {
    case DType::F32:
      return dequant_launch(s, t, in, static_cast<float*>(out), n_blocks);
    case DType::F16:
      return dequant_launch(s, t, in, static_cast<f16*>(out), n_blocks);
    case DType::BF16:
      return dequant_launch(s, t, in, static_cast<bf16*>(out), n_blocks);
    default:
      throw Error(ErrorKind::DType, std::string("dequantize: decodes to f32, f16 or bf16, not ") + dtype_name(dt));
  }
}

// f(T{}) for the dtypes a quantized op reads or writes: f32, f16, bf16 (and f64 when with_f64).
template <class F> void dispatch_qfloat(DType d, const char* op, bool with_f64, F&& f) {
  switch (d) {
    case DType::F32:
      return f(float{});
    case DType::F16:
      return f(f16{});
    case DType::BF16:
      return f(bf16{});
    case DType::F64:
      if (with_f64) return f(double{});
      [[fallthrough]];
    default:
      throw Error(ErrorKind::Internal, std::string(op) + ": unexpected dtype " + dtype_name(d));
  }
}

template <class To, class From> struct CastTo {
  __device__ To operator()(From v) const { return cast<To>(v); }
};

}  // namespace

StoragePtr GpuStorage::dequantize(const QuantDims& q, DType dtype) const {
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), q.rows * q.cols, dtype);
  const int64_t n_blocks = int64_t(q.rows * (q.cols / ggml_block_size(q.type)));
  dequant_launch_dtype(stream(), q.type, ptr<uint8_t>(), out->data(), dtype, n_blocks);
  return out;
}

StoragePtr GpuStorage::qembedding(const QuantDims& q, const Storage& ids_s, const Layout& ids_l, DType dtype) const {
  const GpuStorage& ids = as_gpu(ids_s);
  DeviceGuard g(ordinal());
  const int64_t n_ids = int64_t(ids_l.numel());
  auto out = new_storage(ordinal(), size_t(n_ids) * q.cols, dtype);
  if (n_ids == 0 || q.cols == 0) return out;
  const int64_t bpr = int64_t(q.cols / ggml_block_size(q.type));
  gpuStream_t s = stream();
  Scratch bad_buf(ordinal(), sizeof(unsigned long long));
  auto* bad = static_cast<unsigned long long*>(bad_buf.b.ptr);
  check(gpuMemsetAsync(bad, 0xff, sizeof(unsigned long long), s), "MemsetAsync");
  const int64_t ids_stride = ids_l.rank() ? ids_l.strides[0] : 0;
  dispatch_index_dtype(ids.dtype(), "embedding", [&](auto itag) {
    using I = decltype(itag);
    const I* id = ids.ptr<I>() + ids_l.offset;
    dispatch_qfloat(dtype, "embedding", false, [&](auto otag) {
      using Out = decltype(otag);
      dispatch_qtype(q.type, "embedding", [&](auto tc) {
        constexpr GGMLType kT = decltype(tc)::value;
        launch_kernel(embed_kernel<kT, Out, I>, rounds_grid(n_ids * bpr, QB<kT>::kGroup), tune::kQuantBlock, 0, s,
                      ptr<uint8_t>(), int64_t(q.rows), bpr, id, ids_stride, n_ids, out->template ptr<Out>(), bad);
        check_launch("embedding");
      });
    });
    // The first bad position (row-major, as the CPU's loop finds it), then its value, for the
    // CPU's message. One synchronisation on the good path.
    unsigned long long pos = ~0ull;
    check(gpuMemcpyAsync(&pos, bad, sizeof(pos), gpuMemcpyDeviceToHost, s), "MemcpyAsync(D2H)");
    check(gpuStreamSynchronize(s), "StreamSynchronize");
    if (pos == ~0ull) return;
    I v{};
    check(gpuMemcpyAsync(&v, id + int64_t(pos) * ids_stride, sizeof(I), gpuMemcpyDeviceToHost, s), "MemcpyAsync(D2H)");
    check(gpuStreamSynchronize(s), "StreamSynchronize");
    throw Error(ErrorKind::Index, "embedding: id " + std::to_string(int64_t(v)) + " at position " +
                                      std::to_string(pos) + " is out of range for a table of " +
                                      std::to_string(q.rows) + " rows");
  });
  return out;
}

StoragePtr GpuStorage::quantize(const Layout& l, const QuantDims& q) const {
  if (q.type != GGMLType::Q8_0 && q.type != GGMLType::Q8_1 && q.type != GGMLType::Q8_K)
    throw Error(ErrorKind::Unsupported, std::string("quantize: the GPU encodes the activation types Q8_0, Q8_1 and "
                                                    "Q8_K, not ") +
                                            ggml_type_name(q.type) +
                                            "; quantize on the CPU, then .to(device): "
                                            "QTensor::quantize(x.to_device(Device::cpu()), type).to(device)");
  DeviceGuard g(ordinal());
  const int64_t n_blocks = int64_t(q.rows * (q.cols / ggml_block_size(q.type)));
  auto out = new_storage(ordinal(), size_t(n_blocks) * ggml_type_size(q.type), DType::U8);
  if (n_blocks == 0) return out;
  gpuStream_t s = stream();
  dispatch_qfloat(dtype_, "quantize", true, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ptr<T>() + l.offset;
    auto go = [&](auto tc) {
      constexpr GGMLType kT = decltype(tc)::value;
      launch_kernel(quantize_kernel<kT, T>, rounds_grid(n_blocks, QB<kT>::kGroup), tune::kQuantBlock, 0, s, x,
                    out->template ptr<uint8_t>(), n_blocks, is_aligned4(out->data()));
      check_launch("quantize");
    };
    if (q.type == GGMLType::Q8_0)
      go(std::integral_constant<GGMLType, GGMLType::Q8_0>{});
    else if (q.type == GGMLType::Q8_1)
      go(std::integral_constant<GGMLType, GGMLType::Q8_1>{});
    else
      go(std::integral_constant<GGMLType, GGMLType::Q8_K>{});
  });
  return out;
}

StoragePtr qmatmul_prefill(const GpuStorage& w, const QuantDims& q, const Storage& x_s, const Layout& x_l) {
  const GpuStorage& x = as_gpu(x_s);
  DeviceGuard g(w.ordinal());
  const DType xt = x.dtype();
  if (xt != DType::F32 && xt != DType::F16 && xt != DType::BF16)
    throw Error(ErrorKind::Internal, std::string("qmatmul: x must be f32, f16 or bf16, got ") + dtype_name(xt));
  if (x_l.rank() != 2 || x_l.shape[1] != q.cols || (x_l.shape[1] > 1 && x_l.strides[1] != 1))
    throw Error(ErrorKind::Internal,
                "qmatmul: x must be (m, " + std::to_string(q.cols) + ") with a unit last stride, got " + x_l.str());
  const size_t m = x_l.shape[0], n = q.rows, k = q.cols;
  const size_t es = dtype_size(xt);
  auto out = new_storage(w.ordinal(), m * n, xt);
  if (m * n == 0) return out;
  gpuStream_t s = w.stream();
  if (k == 0) {
    check(gpuMemsetAsync(out->data(), 0, m * n * es, s), "MemsetAsync");
    return out;
  }
  // f16 keeps 11 bits of each weight (bf16 8); bf16 x keeps its range with bf16 weights.
  const DType wt = xt == DType::BF16 ? DType::BF16 : DType::F16;
  check_blas_int(int64_t(m), "m");
  check_blas_int(int64_t(n), "n");
  check_blas_int(int64_t(k), "k");

  // x as the GEMM reads it: itself when it is already wt with rows at least k apart, else a
  // contiguous wt copy (f32 x is rounded to f16 here).
  const void* xp = static_cast<const char*>(x.data()) + x_l.offset * es;
  int64_t ldx = x_l.strides[0];
  std::shared_ptr<GpuStorage> xc;
  if (xt != wt || ldx < int64_t(k) || ldx > int64_t(INT_MAX)) {
    xc = new_storage(w.ordinal(), m * k, wt);
    const Shape shape{m, k};
    dispatch_qfloat(xt, "qmatmul", false, [&](auto tag) {
      using T = decltype(tag);
      if (wt == DType::F16)
        launch_map(s, xc->ptr<f16>(), shape, CastTo<f16, T>{}, {&x_l}, x.ptr<T>());
      else
        launch_map(s, xc->ptr<bf16>(), shape, CastTo<bf16, T>{}, {&x_l}, x.ptr<T>());
    });
    xp = xc->data();
    ldx = int64_t(k);
  }

  // W in chunks of rows: dequantize into the scratch, then Y[:, n0:n0+nc] = X W_chunk^T, which
  // column-major is Y^T chunk (nc x m, ld n) = op_T(W chunk as k x nc, ld k) * (X^T: k x m, ld ldx).
  const size_t bpr = k / ggml_block_size(q.type), row_bytes = bpr * ggml_type_size(q.type);
  const size_t wes = dtype_size(wt);
  const size_t chunk = std::max<size_t>(1, std::min<size_t>(n, size_t(tune::kQuantPrefillScratchBytes) / (k * wes)));
  Scratch wbuf(w.ordinal(), chunk * k * wes);
  for (size_t n0 = 0; n0 < n; n0 += chunk) {
    const size_t nc = std::min(chunk, n - n0);
    dequant_launch_dtype(s, q.type, w.ptr<uint8_t>() + n0 * row_bytes, wbuf.b.ptr, wt, int64_t(nc * bpr));
    blas_gemm_ex(w.ctx(), wt, xt, true, false, int(nc), int(m), int(k), 1.0, wbuf.b.ptr, int(k), 0, xp, int(ldx), 0,
                 static_cast<char*>(out->data()) + n0 * es, int(n), 0, 1);
  }
  return out;
}

}  // namespace wick::gpu

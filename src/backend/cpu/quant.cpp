// CPU dequantization of GGUF blocks: the shared per-block decoder of src/ops/quant_blocks.hpp,
// blocks split into chunks over the thread pool.
#include "backend/cpu/quant.hpp"

#include <algorithm>
#include <string>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "ops/dtype_dispatch.hpp"
#include "wick/error.hpp"

namespace wick::cpu {

void dequantize_to_f32(GGMLType t, const uint8_t* bytes, size_t n_bytes, float* out, size_t n_elems) {
  const quant::GGMLTypeInfo* info = quant::ggml_type_info(t);
  if (!info)
    throw Error(ErrorKind::Unsupported, "dequantize_to_f32: unknown ggml type id " +
                                            std::to_string(static_cast<uint32_t>(t)) +
                                            "; the file is corrupt or newer than this wick");
  if (!info->dequant)
    throw Error(ErrorKind::Unsupported, std::string("dequantize_to_f32: ggml type ") + info->name +
                                            " is not a block type wick decodes; convert the tensor to Q8_0, a "
                                            "k-quant, IQ4_NL/IQ4_XS, MXFP4 or a float type");
  const size_t be = info->block_elems, bb = info->block_bytes;
  if (n_elems % be != 0)
    throw Error(ErrorKind::Shape, std::string("dequantize_to_f32: ") + info->name + " stores blocks of " +
                                      std::to_string(be) + " elements, but " + std::to_string(n_elems) +
                                      " elements were asked for; the row length must be a multiple of " +
                                      std::to_string(be));
  const size_t blocks = n_elems / be;
  if (n_bytes != blocks * bb)
    throw Error(ErrorKind::Io, std::string("dequantize_to_f32: ") + info->name + " needs " +
                                   std::to_string(blocks * bb) + " bytes for " + std::to_string(n_elems) +
                                   " elements (" + std::to_string(blocks) + " blocks of " + std::to_string(bb) +
                                   " bytes), got " + std::to_string(n_bytes) +
                                   "; the tensor data is truncated or its type/shape is wrong");
  if (blocks == 0) return;
  // ~64 KiB of output per chunk: big enough to amortise claiming a chunk, small enough to balance.
  const size_t per_chunk = std::max<size_t>(1, 16384 / be);
  struct Ctx {
    GGMLType t;
    const uint8_t* in;
    float* out;
    size_t be, bb, blocks, per_chunk;
  } ctx{t, bytes, out, be, bb, blocks, per_chunk};
  parallel_chunks((blocks + per_chunk - 1) / per_chunk,
                  [](void* p, size_t c) {
                    const Ctx& x = *static_cast<const Ctx*>(p);
                    const size_t s = c * x.per_chunk, e = std::min(x.blocks, s + x.per_chunk);
                    for (size_t i = s; i < e; ++i) quant::dequantize_block(x.t, x.in + i * x.bb, x.out + i * x.be);
                  },
                  &ctx);
}

namespace {

// n f32 values to f16/bf16 (round to nearest even), in place order; f32 is a copy.
void store_as(DType dtype, const float* src, void* dst, size_t n) {
  dispatch_float(dtype, "dequantize", [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = cast<T>(src[i]);
  });
}

}  // namespace

StoragePtr CpuStorage::dequantize(const QuantDims& q, DType dtype) const {
  const size_t n = q.rows * q.cols;
  auto out = new_storage(n, dtype);
  const auto* in = static_cast<const uint8_t*>(data());
  if (dtype == DType::F32) {
    dequantize_to_f32(q.type, in, numel(), out->ptr<float>(), n);
    return out;
  }
  // Row by row through a small f32 buffer: the half result never needs an f32 copy of the tensor.
  const size_t row_bytes = numel() / (q.rows ? q.rows : 1);
  struct Ctx {
    const QuantDims* q;
    const uint8_t* in;
    void* out;
    size_t row_bytes;
    DType dtype;
  } ctx{&q, in, out->data(), row_bytes, dtype};
  parallel_chunks(q.rows,
                  [](void* p, size_t r) {
                    const Ctx& c = *static_cast<const Ctx*>(p);
                    std::vector<float> buf(c.q->cols);
                    dequantize_to_f32(c.q->type, c.in + r * c.row_bytes, c.row_bytes, buf.data(), c.q->cols);
                    store_as(c.dtype, buf.data(), static_cast<char*>(c.out) + r * c.q->cols * dtype_size(c.dtype),
                             c.q->cols);
                  },
                  &ctx);
  return out;
}

StoragePtr CpuStorage::qembedding(const QuantDims& q, const Storage& ids, const Layout& ids_l, DType dtype) const {
  const size_t n = ids_l.numel();
  auto out = new_storage(n * q.cols, dtype);
  const size_t row_bytes = numel() / (q.rows ? q.rows : 1);
  const auto* in = static_cast<const uint8_t*>(data());
  std::vector<float> buf(q.cols);
  dispatch_index_dtype(ids.dtype(), "embedding", [&](auto tag) {
    using I = decltype(tag);
    const I* id = as_cpu(ids).ptr<I>();
    for (size_t i = 0; i < n; ++i) {
      const I v = id[ids_l.offset + i * size_t(ids_l.strides[0])];
      if (v < 0 || uint64_t(v) >= q.rows)
        throw Error(ErrorKind::Index, "embedding: id " + std::to_string(int64_t(v)) + " at position " +
                                          std::to_string(i) + " is out of range for a table of " +
                                          std::to_string(q.rows) + " rows");
      dequantize_to_f32(q.type, in + size_t(v) * row_bytes, row_bytes, buf.data(), q.cols);
      store_as(dtype, buf.data(), static_cast<char*>(out->data()) + i * q.cols * dtype_size(dtype), q.cols);
    }
  });
  return out;
}

}  // namespace wick::cpu

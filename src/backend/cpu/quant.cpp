// CPU dequantization of GGUF blocks: the shared per-block decoder of src/ops/quant_blocks.hpp,
// blocks split into chunks over the thread pool.
#include "backend/cpu/quant.hpp"

#include <algorithm>
#include <string>

#include "backend/cpu/thread_pool.hpp"
#include "wick/error.hpp"

namespace wick::cpu {

void dequantize_to_f32(quant::GgmlType t, const uint8_t* bytes, size_t n_bytes, float* out, size_t n_elems) {
  const quant::GgmlTypeInfo* info = quant::ggml_type_info(t);
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
    quant::GgmlType t;
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

}  // namespace wick::cpu

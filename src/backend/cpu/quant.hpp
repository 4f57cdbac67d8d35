#pragma once
// CPU dequantization of GGUF block formats (src/ops/quant_blocks.hpp) to f32.
#include <cstddef>
#include <cstdint>

#include "ops/quant_blocks.hpp"

namespace wick::cpu {

// Decodes n_elems values of type t from n_bytes at `bytes` into `out`, blocks in parallel on the
// CPU thread pool. Throws Error(Unsupported) for a type the table does not decode, Error(Shape)
// when n_elems is not a whole number of blocks, Error(Io) when n_bytes is not exactly the bytes
// of those blocks (a truncated or mis-sized tensor).
void dequantize_to_f32(GGMLType t, const uint8_t* bytes, size_t n_bytes, float* out, size_t n_elems);

}  // namespace wick::cpu

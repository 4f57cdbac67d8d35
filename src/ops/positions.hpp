#pragma once
// Positions read from memory by the ops whose position lives in a tensor (slice_set with a tensor
// start, attention_kv_len), written once for the CPU and the GPU kernels. A GPU reads them inside
// its kernels: checking one would need a host read, so out-of-range values are clamped instead
// (XLA's dynamic_update_slice rule).
#include <cstdint>

#include "wick/config.hpp"
#include "wick/dtype.hpp"

namespace wick::pos {

// Element i of an integer storage (u8 u32 i16 i32 i64; the core checked the dtype) as int64.
WICK_HD int64_t load(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::U8: return int64_t(static_cast<const uint8_t*>(p)[i]);
    case DType::U32: return int64_t(static_cast<const uint32_t*>(p)[i]);
    case DType::I16: return int64_t(static_cast<const int16_t*>(p)[i]);
    case DType::I32: return int64_t(static_cast<const int32_t*>(p)[i]);
    default: return static_cast<const int64_t*>(p)[i];
  }
}

// slice_set(src, dim, start tensor): the first row written, in [0, max_start] (max_start = the
// destination's size along dim - src's).
WICK_HD int64_t clamp_start(int64_t s, int64_t max_start) { return s < 0 ? 0 : s > max_start ? max_start : s; }

// attention_kv_len: the keys batch b sees, kv_len[b] in [causal ? t_q : 1, t_kv] (causal needs a
// key for the first query; the core has checked t_kv >= t_q then, and t_kv >= 1).
WICK_HD int64_t clamp_kv_len(int64_t n, int64_t t_q, int64_t t_kv, bool causal) {
  const int64_t lo = causal ? t_q : 1;
  return n < lo ? lo : n > t_kv ? t_kv : n;
}

// fast::paged_attention's indices (a token's slot, sequence and position; a block table entry), clamped into
// [0, n): a slot past the cache is its last row, a position past the table's max_blocks * block_size keys its
// last key.
WICK_HD int64_t paged_index(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

// The first key position a token at position p sees: p - window + 1, at least 0 (window 0: every earlier key).
WICK_HD int64_t paged_first_key(int64_t p, int64_t window) {
  return window <= 0 || p + 1 <= window ? 0 : p + 1 - window;
}

// The cache row of position p of a sequence whose block table row starts at `table` (I32), blocks clamped into
// the cache's rows / block_size.
WICK_HD int64_t paged_row(const int32_t* table, int64_t p, int64_t block_size, int64_t n_blocks) {
  return paged_index(table[p / block_size], n_blocks) * block_size + p % block_size;
}

}  // namespace wick::pos

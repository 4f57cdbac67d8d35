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

}  // namespace wick::pos

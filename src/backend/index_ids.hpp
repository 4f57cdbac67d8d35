#pragma once
// Id validation pieces and id-augmented layouts shared by the CPU and GPU indexing backends,
// so both check the same elements and report a bad id with the same message.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "wick/config.hpp"
#include "wick/layout.hpp"

namespace wick {

// Candle's padding / ignore id: an id equal to its dtype's maximum (u8 255, u32 0xffffffff,
// i16 32767, i32 2^31 - 1, i64 2^63 - 1) reads as zero in index_select/gather (a zero row of an
// embedding) and is skipped by scatter/scatter_add/index_add. It is never out of range.
template <class I> WICK_HD constexpr I sentinel_id() {
  using U = std::make_unsigned_t<I>;
  return std::is_signed_v<I> ? I(U(U(~U(0)) >> 1)) : I(~U(0));
}
template <class I> WICK_HD constexpr bool is_sentinel_id(I v) { return v == sentinel_id<I>(); }
static_assert(sentinel_id<uint8_t>() == 255 && sentinel_id<uint32_t>() == 0xffffffffu &&
              sentinel_id<int16_t>() == 32767 && sentinel_id<int32_t>() == INT32_MAX &&
              sentinel_id<int64_t>() == INT64_MAX);

// Outside [0, limit) and not the sentinel: the ids every backend rejects with Error(Index).
template <class I>
WICK_HD bool id_out_of_range(I v, uint64_t limit) {
  if (is_sentinel_id(v)) return false;
  if constexpr (std::is_signed_v<I>)
    if (v < 0) return true;
  return uint64_t(v) >= limit;
}

// What index_select/gather read for id v from s (stride dim_stride along the indexed dim).
template <class T, class I> WICK_HD T read_at_id(const T* s, I v, int64_t dim_stride) {
  return is_sentinel_id(v) ? T{} : s[int64_t(v) * dim_stride];
}

// "[i, j, ...]": the row-major position flat within shape s.
inline std::string multi_index_str(size_t flat, const Shape& s) {
  std::vector<size_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = s[d] ? flat % s[d] : 0;
    flat = s[d] ? flat / s[d] : 0;
  }
  std::string r = "[";
  for (size_t d = 0; d < idx.size(); ++d) r += (d ? ", " : "") + std::to_string(idx[d]);
  return r + "]";
}

// The ids layout to validate: broadcast dims are read once. The first bad element of this
// reduced layout, with index 0 in those dims, is also the first bad element of the full one.
inline Layout ids_to_validate(const Layout& ids_l) {
  Layout l = ids_l;
  for (size_t d = 0; d < l.rank(); ++d)
    if (l.strides[d] == 0) l.shape[d] = std::min<size_t>(l.shape[d], 1);
  return l;
}

// Storage offset of the element at row-major position pos of l.
inline int64_t offset_of_position(const Layout& l, size_t pos) {
  int64_t off = int64_t(l.offset);
  size_t rem = pos;
  for (size_t d = l.rank(); d-- > 0;) {
    off += int64_t(rem % l.shape[d]) * l.strides[d];
    rem /= l.shape[d];
  }
  return off;
}

// The Error(Index) message for the bad id `value` at position pos of the validated layout l.
inline std::string bad_id_message(const char* op, int64_t value, size_t pos, const Layout& l, const Layout& ids_l,
                                  size_t dim, size_t limit) {
  std::string range =
      limit ? "valid ids are 0.." + std::to_string(limit - 1) : "that dim has size 0, so no id is valid";
  return std::string(op) + ": id " + std::to_string(value) + " at position " + multi_index_str(pos, l.shape) +
         " of the ids " + shape_str(ids_l.shape) + " is out of range for dim " + std::to_string(dim) + " of size " +
         std::to_string(limit) + " (" + range + "); nothing was written";
}

// The data layout `l` reshaped to `shape` (same rank) with stride 0 along dim.
inline Layout without_dim(const Layout& l, const Shape& shape, size_t dim) {
  Layout r(shape, l.strides, l.offset);
  r.strides[dim] = 0;
  return r;
}

// 1-D ids broadcast over `shape`, varying along dim.
inline Layout ids_along(const Layout& ids_l, const Shape& shape, size_t dim) {
  Layout r(shape, std::vector<int64_t>(shape.size(), 0), ids_l.offset);
  r.strides[dim] = ids_l.strides.empty() ? 0 : ids_l.strides[0];
  return r;
}

}  // namespace wick

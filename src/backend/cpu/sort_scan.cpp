// cumsum along any dim, the stable last-dim arg_sort and the last-dim top_k, for any layout, on
// all cores.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/reduce.hpp"

namespace wick::cpu {
namespace {

constexpr size_t kScanTile = 1024;  // columns scanned together (one accumulator each)

// Storage offset of outer index o (row-major over shape) for a layout without its offset.
size_t offset_of(size_t o, const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += int64_t(o % shape[d]) * strides[d];
    o /= shape[d];
  }
  return size_t(off);
}

// Order-preserving unsigned keys: NaN above +inf (all NaNs equal), -0.0 equal to 0.0,
// signed integers with the sign bit flipped.
template <class T> using sort_key_t =
    std::conditional_t<sizeof(compute_t<T>) == 1, uint8_t,
                       std::conditional_t<sizeof(compute_t<T>) == 2, uint16_t,
                                          std::conditional_t<sizeof(compute_t<T>) == 4, uint32_t, uint64_t>>>;

template <class T> sort_key_t<T> sort_key(T v) {
  using K = sort_key_t<T>;
  using C = compute_t<T>;
  constexpr K kSign = K(K(1) << (sizeof(K) * 8 - 1));
  if constexpr (std::is_floating_point_v<C>) {
    C x = to_compute(v);
    if (x != x) return K(~K(0));
    if (x == C(0)) x = C(0);
    K bits;
    std::memcpy(&bits, &x, sizeof(K));
    return (bits & kSign) ? K(~bits) : K(bits | kSign);
  } else if constexpr (std::is_signed_v<C>) {
    return K(K(v) ^ kSign);
  } else {
    return K(v);
  }
}

// LSD radix sort of (key, index) pairs on 8-bit digits; digits equal in every key are skipped.
template <class K> void radix_sort(std::vector<std::pair<K, uint32_t>>& a, std::vector<std::pair<K, uint32_t>>& tmp) {
  const size_t n = a.size();
  for (size_t shift = 0; shift < sizeof(K) * 8; shift += 8) {
    size_t count[256] = {};
    for (size_t j = 0; j < n; ++j) ++count[(a[j].first >> shift) & 0xff];
    if (count[(a[0].first >> shift) & 0xff] == n) continue;
    size_t pos = 0;
    for (size_t d = 0; d < 256; ++d) {
      size_t c = count[d];
      count[d] = pos;
      pos += c;
    }
    for (size_t j = 0; j < n; ++j) tmp[count[(a[j].first >> shift) & 0xff]++] = a[j];
    a.swap(tmp);
  }
}

// The rows of a last-dim op on any layout: the last dim's length n and stride s, and a plan over
// the leading dims whose runs give each row's start.
struct LastDimRows {
  size_t n;
  int64_t s;
  StridedPlan<1> lead;
};

LastDimRows last_dim_rows(const Layout& l, const char* op) {
  const size_t n = l.rank() ? l.shape.back() : 1;
  if (n > size_t(UINT32_MAX))
    throw Error(ErrorKind::Unsupported, std::string(op) + ": a last dim of " + std::to_string(n) +
                                            " elements does not fit the u32 indices; split the rows");
  const size_t lead_rank = l.rank() ? l.rank() - 1 : 0;
  const Shape lead_shape(l.shape.begin(), l.shape.begin() + int64_t(lead_rank));
  const Layout ll(lead_shape, std::vector<int64_t>(l.strides.begin(), l.strides.begin() + int64_t(lead_rank)),
                  l.offset);
  return {n, l.rank() ? l.strides.back() : 1, plan_strided<1>(lead_shape, {&ll})};
}

}  // namespace

// out[o, k, i] = sum_{k' <= k} in[o, k', i]: the scan runs over k for a tile of columns i at
// once, so a scan along a non-last dim reads whole rows instead of striding down columns.
StoragePtr CpuStorage::cumsum(const Layout& l, size_t dim) const {
  const size_t n_el = l.numel();
  auto out = new_storage(n_el, dtype_);
  if (n_el == 0) return out;
  const Shape outer_shape(l.shape.begin(), l.shape.begin() + int64_t(dim));
  const std::vector<int64_t> outer_strides(l.strides.begin(), l.strides.begin() + int64_t(dim));
  const Shape inner_shape(l.shape.begin() + int64_t(dim) + 1, l.shape.end());
  const Layout il(inner_shape, std::vector<int64_t>(l.strides.begin() + int64_t(dim) + 1, l.strides.end()), 0);
  const size_t n = l.shape[dim], n_inner = shape_numel(inner_shape), n_cols = n_el / n;
  const int64_t sd = l.strides[dim];
  const auto ip = plan_strided<1>(inner_shape, {&il});
  const bool simple_inner = ip.dims.size() == 1;
  const int64_t is = ip.strides[0][0];

  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    using Acc = typename SumAcc<T>::Acc;
    const SumAcc<T> op;
    const T* in = ptr<T>();
    T* o_ptr = out->ptr<T>();
    parallel_for(n_cols, [&](size_t b, size_t e) {
      Acc acc[kScanTile];
      size_t c = b;
      while (c < e) {
        const size_t o = c / n_inner, i0 = c % n_inner;
        const size_t tl = std::min({kScanTile, n_inner - i0, e - c});
        const size_t obase = l.offset + offset_of(o, outer_shape, outer_strides);
        T* ob = o_ptr + o * n * n_inner + i0;
        if (n_inner == 1) {  // a scan along the innermost dim: one running sum
          Acc a = op.init();
          const T* p = in + obase;
          for (size_t k = 0; k < n; ++k) {
            op.add(a, p[int64_t(k) * sd]);
            ob[k] = op.finish(a);
          }
          c += 1;
          continue;
        }
        for (size_t j = 0; j < tl; ++j) acc[j] = op.init();
        for (size_t k = 0; k < n; ++k) {
          const T* row = in + obase + int64_t(k) * sd;
          T* orow = ob + k * n_inner;
          if (simple_inner) {
            const T* __restrict p = row + int64_t(i0) * is;
            Acc* __restrict ac = acc;
            T* __restrict op_row = orow;
            if (is == 1) {
              for (size_t j = 0; j < tl; ++j) {
                op.add(ac[j], p[j]);
                op_row[j] = op.finish(ac[j]);
              }
            } else {
              for (size_t j = 0; j < tl; ++j) {
                op.add(ac[j], p[int64_t(j) * is]);
                op_row[j] = op.finish(ac[j]);
              }
            }
          } else {
            for_each_run<1>(ip, i0, i0 + tl, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
              for (size_t j = 0; j < len; ++j) {
                Acc& a = acc[i - i0 + j];
                op.add(a, row[int64_t(offs[0]) + int64_t(j) * inner[0]]);
                orow[i - i0 + j] = op.finish(a);
              }
            });
          }
        }
        c += tl;
      }
    }, std::max<size_t>(n_inner == 1 ? 1 : std::min<size_t>(n_inner, 256), kParallelGrain / n));
  });
  return out;
}

// Stable last-dim sort: each key becomes an unsigned integer whose order is the sort order
// (NaN largest, -0.0 equal to 0.0, inverted for descending), then an LSD radix sort, which is
// stable by construction, orders (key, index) pairs; short rows use std::stable_sort.
StoragePtr CpuStorage::arg_sort(const Layout& l, bool ascending) const {
  const size_t n_el = l.numel();
  auto out = new_storage(n_el, DType::U32);
  if (n_el == 0) return out;
  const LastDimRows rows = last_dim_rows(l, "arg_sort");
  const size_t n = rows.n;
  const int64_t s = rows.s;
  const auto& lp = rows.lead;
  uint32_t* o_ptr = out->ptr<uint32_t>();

  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    using K = sort_key_t<T>;
    const T* in = ptr<T>();
    parallel_for(lp.numel, [&](size_t b, size_t e) {
      std::vector<std::pair<K, uint32_t>> buf(n), tmp(n);
      for_each_run<1>(lp, b, e, [&](size_t r0, size_t len, const auto& offs, const auto& inner) {
        for (size_t r = 0; r < len; ++r) {
          const T* row = in + offs[0] + int64_t(r) * inner[0];
          for (size_t j = 0; j < n; ++j) {
            K k = sort_key(row[int64_t(j) * s]);
            buf[j] = {ascending ? k : K(~k), uint32_t(j)};
          }
          if (n < 64)
            std::stable_sort(buf.begin(), buf.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
          else
            radix_sort(buf, tmp);
          uint32_t* orow = o_ptr + (r0 + r) * n;
          for (size_t j = 0; j < n; ++j) orow[j] = buf[j].second;
        }
      });
    }, std::max<size_t>(1, kParallelGrain / n));
  });
  return out;
}

// The first k of arg_sort descending: the same inverted keys, and (key, index) pairs compared
// whole, so that equal keys keep the lower index first as the stable sort does. A heap of k
// (partial_sort) when k is small, where most keys fail one compare against its top; otherwise
// nth_element then a sort of the k.
StoragePtr CpuStorage::top_k(const Layout& l, size_t k) const {
  const LastDimRows rows = last_dim_rows(l, "top_k");
  const size_t n = rows.n;
  const int64_t s = rows.s;
  const auto& lp = rows.lead;
  if (k > n)  // the core checks k; this guards direct backend calls
    throw Error(ErrorKind::Internal, "top_k: k = " + std::to_string(k) + " > the last dim " + std::to_string(n));
  auto out = new_storage(lp.numel * k, DType::U32);
  if (lp.numel * k == 0) return out;
  uint32_t* o_ptr = out->ptr<uint32_t>();

  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    using K = sort_key_t<T>;
    const T* in = ptr<T>();
    parallel_for(lp.numel, [&](size_t b, size_t e) {
      std::vector<std::pair<K, uint32_t>> buf(n);
      for_each_run<1>(lp, b, e, [&](size_t r0, size_t len, const auto& offs, const auto& inner) {
        for (size_t r = 0; r < len; ++r) {
          const T* row = in + offs[0] + int64_t(r) * inner[0];
          for (size_t j = 0; j < n; ++j) buf[j] = {K(~sort_key(row[int64_t(j) * s])), uint32_t(j)};
          const auto mid = buf.begin() + int64_t(k);
          if (k * 8 <= n) {
            std::partial_sort(buf.begin(), mid, buf.end());
          } else {
            if (k < n) std::nth_element(buf.begin(), mid - 1, buf.end());
            std::sort(buf.begin(), mid);
          }
          uint32_t* orow = o_ptr + (r0 + r) * k;
          for (size_t j = 0; j < k; ++j) orow[j] = buf[j].second;
        }
      });
    }, std::max<size_t>(1, kParallelGrain / n));
  });
  return out;
}

}  // namespace wick::cpu

// Indexing on the CPU: index_select, gather, scatter (set / add) and index_add for every dtype,
// ids of any index dtype, and any layouts. Every id is validated before anything is written, so
// a bad id never leaves a tensor half-modified.
//
// All five entries reduce to two kernels over "id-augmented" layouts: the data operand gets
// stride 0 along `dim` and the id, multiplied by the data's stride along `dim`, is added per
// element. index_select and index_add use the 1-D ids broadcast (stride 0) over the other dims.
// The sentinel id (the id dtype's maximum, index_ids.hpp) reads as zero and writes nothing.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "backend/index_ids.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"

namespace wick::cpu {
namespace {

// Throws Error(Index) for the first id (row-major) outside [0, limit) that is not the sentinel.
// Broadcast dims of the ids are read once (ids_to_validate).
template <class I>
void validate_ids(const I* ids, const Layout& ids_l, size_t limit, size_t dim, const char* op) {
  const Layout l = ids_to_validate(ids_l);
  auto plan = plan_strided<1>(l.shape, {&l});
  if (plan.numel == 0) return;
  std::atomic<size_t> first{SIZE_MAX};
  parallel_for(plan.numel, [&](size_t b, size_t e) {
    for_each_run<1>(plan, b, e, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
      if (i >= first.load(std::memory_order_relaxed)) return;
      for (size_t j = 0; j < len; ++j) {
        if (!id_out_of_range(ids[int64_t(offs[0]) + int64_t(j) * inner[0]], limit)) continue;
        size_t pos = i + j, cur = first.load(std::memory_order_relaxed);
        while (pos < cur && !first.compare_exchange_weak(cur, pos, std::memory_order_relaxed)) {
        }
        return;
      }
    });
  });
  size_t pos = first.load();
  if (pos == SIZE_MAX) return;
  // Read the offending value back for the message.
  const int64_t bad = int64_t(ids[offset_of_position(l, pos)]);
  throw Error(ErrorKind::Index, bad_id_message(op, bad, pos, l, ids_l, dim, limit));
}

// Wrapping for integers, one f32 (or f64) add and one rounding for floats.
template <class T> T add_one(T a, T b) {
  if constexpr (is_float_v<T>) {
    return cast<T>(to_compute(a) + to_compute(b));
  } else {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  }
}

// out (contiguous, `shape`) [k] = src[src_l(k) + ids[ids_l(k)] * dim_stride]; src_l has stride 0
// along the indexed dim. Ids must have been validated.
template <class T, class I>
void gather_kernel(T* out, const Shape& shape, const T* src, const Layout& src_l, const I* ids, const Layout& ids_l,
                   int64_t dim_stride) {
  auto plan = plan_strided<2>(shape, {&src_l, &ids_l});
  parallel_for(plan.numel, [&](size_t b, size_t e) {
    for_each_run<2>(plan, b, e, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
      T* o = out + i;
      const T* s = src + offs[0];
      const I* id = ids + offs[1];
      if (inner[1] == 0) {  // one id for the whole run: a row copy (index_select, embedding)
        if (is_sentinel_id(*id)) {  // a padding id: a zero row
          std::fill(o, o + len, T{});
          return;
        }
        const T* row = s + int64_t(*id) * dim_stride;
        if (inner[0] == 1)
          std::copy(row, row + len, o);
        else
          for (size_t j = 0; j < len; ++j) o[j] = row[int64_t(j) * inner[0]];
      } else {
        for (size_t j = 0; j < len; ++j)
          o[j] = read_at_id(s + int64_t(j) * inner[0], id[int64_t(j) * inner[1]], dim_stride);
      }
    });
  });
}

template <bool kAdd, class T> inline void put(T& o, T v) {
  if constexpr (kAdd)
    o = add_one(o, v);
  else
    o = v;
}

Layout drop_dim(const Layout& l, size_t dim) {
  Layout r = l;
  r.shape.erase(r.shape.begin() + int64_t(dim));
  r.strides.erase(r.strides.begin() + int64_t(dim));
  return r;
}

// dst[dst_l(k) + ids[ids_l(k)] * dim_stride] (+)= src[src_l(k)] over the ids' shape; dst_l has
// stride 0 along `dim`. Work is split by "lines" (positions outside `dim`), each owned by one
// thread that walks its line along `dim` in order: duplicate ids apply in row-major order
// (last write wins, adds in order), never racing.
template <bool kAdd, class T, class I>
void scatter_kernel(T* dst, const Layout& dst_l, const I* ids, const Layout& ids_l, const T* src, const Layout& src_l,
                    size_t dim, int64_t dim_stride) {
  if (dst_l.numel() == 0) return;
  const size_t len_dim = dst_l.shape[dim];
  const Layout a = drop_dim(dst_l, dim), b = drop_dim(ids_l, dim), c = drop_dim(src_l, dim);
  const auto outer = plan_strided<3>(a.shape, {&a, &b, &c});
  const size_t lines = outer.numel;
  const int64_t ids_ds = ids_l.strides[dim], src_ds = src_l.strides[dim];
  // A broadcast destination (stride 0 outside dim) maps several lines onto one element.
  bool shared_dst = false;
  for (size_t d = 0; d < a.rank(); ++d) shared_dst |= a.shape[d] > 1 && a.strides[d] == 0;

  std::function<void(size_t, size_t)> body;
  if (outer.dims.back() >= 16) {
    // Long runs of lines side by side (e.g. rows of an embedding gradient): step along `dim`
    // outside and sweep the lines of the chunk inside, so src rows are read in order.
    body = [&](size_t lb, size_t le) {
      for (size_t k = 0; k < len_dim; ++k)
        for_each_run<3>(outer, lb, le, [&](size_t, size_t len, const auto& offs, const auto& inner) {
          T* d0 = dst + offs[0];
          const I* id = ids + int64_t(offs[1]) + int64_t(k) * ids_ds;
          const T* s = src + int64_t(offs[2]) + int64_t(k) * src_ds;
          for (size_t j = 0; j < len; ++j) {
            const I v = id[int64_t(j) * inner[1]];
            if (!is_sentinel_id(v))
              put<kAdd>(d0[int64_t(j) * inner[0] + int64_t(v) * dim_stride], s[int64_t(j) * inner[2]]);
          }
        });
    };
  } else {
    // Few lines side by side: walk each line along `dim` innermost.
    body = [&](size_t lb, size_t le) {
      for_each_run<3>(outer, lb, le, [&](size_t, size_t len, const auto& offs, const auto& inner) {
        for (size_t j = 0; j < len; ++j) {
          T* d0 = dst + int64_t(offs[0]) + int64_t(j) * inner[0];
          const I* id = ids + int64_t(offs[1]) + int64_t(j) * inner[1];
          const T* s = src + int64_t(offs[2]) + int64_t(j) * inner[2];
          for (size_t k = 0; k < len_dim; ++k) {
            const I v = id[int64_t(k) * ids_ds];
            if (!is_sentinel_id(v)) put<kAdd>(d0[int64_t(v) * dim_stride], s[int64_t(k) * src_ds]);
          }
        }
      });
    };
  }
  if (shared_dst)
    body(0, lines);
  else
    parallel_for(lines, body, std::max<size_t>(1, kParallelGrain / std::max<size_t>(len_dim, 1)));
}

template <bool kAdd>
void scatter_entry(CpuStorage& self, const Layout& l, const Storage& ids_s, const Layout& ids_l, const Storage& src_s,
                   const Layout& src_l, size_t dim, const char* op) {
  const CpuStorage& ids = as_cpu(ids_s);
  const CpuStorage& src = as_cpu(src_s);
  dispatch_index_dtype(ids.dtype(), op, [&](auto itag) {
    using I = decltype(itag);
    validate_ids(ids.ptr<I>(), ids_l, l.shape[dim], dim, op);
    dispatch_dtype(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      scatter_kernel<kAdd>(self.ptr<T>(), without_dim(l, ids_l.shape, dim), ids.ptr<I>(), ids_l, src.ptr<T>(), src_l,
                           dim, l.strides[dim]);
    });
  });
}

}  // namespace

StoragePtr CpuStorage::index_select(const Storage& ids_s, const Layout& l, const Layout& ids_l, size_t dim) const {
  const CpuStorage& ids = as_cpu(ids_s);
  Shape shape = l.shape;
  shape[dim] = ids_l.numel();
  auto out = new_storage(shape_numel(shape), dtype_);
  dispatch_index_dtype(ids.dtype(), "index_select", [&](auto itag) {
    using I = decltype(itag);
    validate_ids(ids.ptr<I>(), ids_l, l.shape[dim], dim, "index_select");
    dispatch_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      gather_kernel(out->ptr<T>(), shape, ptr<T>(), without_dim(l, shape, dim), ids.ptr<I>(),
                    ids_along(ids_l, shape, dim), l.strides[dim]);
    });
  });
  return out;
}

StoragePtr CpuStorage::gather(const Layout& l, const Storage& ids_s, const Layout& ids_l, size_t dim) const {
  const CpuStorage& ids = as_cpu(ids_s);
  auto out = new_storage(ids_l.numel(), dtype_);
  dispatch_index_dtype(ids.dtype(), "gather", [&](auto itag) {
    using I = decltype(itag);
    validate_ids(ids.ptr<I>(), ids_l, l.shape[dim], dim, "gather");
    dispatch_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      gather_kernel(out->ptr<T>(), ids_l.shape, ptr<T>(), without_dim(l, ids_l.shape, dim), ids.ptr<I>(), ids_l,
                    l.strides[dim]);
    });
  });
  return out;
}

void CpuStorage::scatter_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                             const Layout& src_l, size_t dim) {
  scatter_entry<false>(*this, l, ids, ids_l, src, src_l, dim, "scatter_set");
}

// Half types: each add is done in f32 and rounded back, so long runs of duplicates round
// repeatedly (as PyTorch's CPU index_add_/scatter_add_ on half tensors).
void CpuStorage::scatter_add_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                                 const Layout& src_l, size_t dim) {
  scatter_entry<true>(*this, l, ids, ids_l, src, src_l, dim, "scatter_add_set");
}

StoragePtr CpuStorage::index_add(const Layout& l, const Storage& ids_s, const Layout& ids_l, const Storage& src_s,
                                 const Layout& src_l, size_t dim) const {
  const CpuStorage& ids = as_cpu(ids_s);
  const CpuStorage& src = as_cpu(src_s);
  std::shared_ptr<CpuStorage> out;
  dispatch_index_dtype(ids.dtype(), "index_add", [&](auto itag) {
    using I = decltype(itag);
    validate_ids(ids.ptr<I>(), ids_l, l.shape[dim], dim, "index_add");
    out = new_storage(l.numel(), dtype_);
    copy_strided_src(*out, 0, l);
    const Layout out_l = Layout::contiguous(l.shape);
    dispatch_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      scatter_kernel<true>(out->ptr<T>(), without_dim(out_l, src_l.shape, dim), ids.ptr<I>(),
                           ids_along(ids_l, src_l.shape, dim), src.ptr<T>(), src_l, dim, out_l.strides[dim]);
    });
  });
  return out;
}

}  // namespace wick::cpu

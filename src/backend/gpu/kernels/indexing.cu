// Indexing on the GPU: index_select, gather, scatter (set / add) and index_add for every dtype,
// ids of any index dtype, and any layouts. Mirrors src/backend/cpu/indexing.cpp: the data
// operand gets stride 0 along `dim` and id * (its stride along dim) is added per element.
//
// Every id is validated by a kernel (and the stream synchronised) before anything is written,
// so a bad id leaves every tensor unchanged. Scatters give one thread to each "line" (a
// position outside `dim`) which walks its ids along `dim` in order: duplicate ids then apply
// in the CPU's order (last write wins, adds in order) with no atomics, deterministically.
// The sentinel id (the id dtype's maximum, index_ids.hpp) reads as zero and writes nothing.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/index_ids.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"

namespace wick::gpu {
namespace {

// Flags the ids outside [0, limit) (the sentinel is not) and keeps the smallest row-major
// position among them.
template <class I>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    validate_kernel(const I* WICK_RESTRICT ids, int64_t n, StridedDesc<1> d, int64_t base, uint64_t limit, int* flag,
                    unsigned long long* first) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (id_out_of_range(ids[d.offset(0, i)], limit)) {
      atomicExch(flag, 1);
      atomicMin(first, static_cast<unsigned long long>(base + i));
    }
  }
}

// Throws Error(Index) for the first id (row-major) outside [0, limit), with the CPU's message.
// Broadcast dims of the ids are read once (index 0 there), as on the CPU. Synchronises.
template <class I>
void validate_ids(const GpuStorage& self, const I* ids, const Layout& ids_l, size_t limit, size_t dim, const char* op) {
  const Layout l = ids_to_validate(ids_l);
  if (l.numel() == 0) return;
  DeviceContext& ctx = self.ctx();
  gpuStream_t s = self.stream();
  Scratch first_buf(self.ordinal(), sizeof(unsigned long long));
  auto* first = static_cast<unsigned long long*>(first_buf.b.ptr);
  check(gpuMemsetAsync(first, 0xff, sizeof(unsigned long long), s), "MemsetAsync");
  for_each_desc<1>(l.shape, {&l}, 0, [&](const StridedDesc<1>& d, int64_t base, int64_t n) {
    launch_kernel(validate_kernel<I>, grid_for(n), kBlock, 0, s, ids, n, d, base, uint64_t(limit), ctx.error_flag,
                  first);
    check_launch("validate ids");
  });
  unsigned long long pos = ~0ull;
  check(gpuMemcpyAsync(&pos, first, sizeof(pos), gpuMemcpyDeviceToHost, s), "MemcpyAsync(D2H)");
  check(gpuStreamSynchronize(s), "StreamSynchronize");
  if (pos == ~0ull) return;
  // Read the offending value back for the message.
  const int64_t off = offset_of_position(l, size_t(pos));
  I bad{};
  check(gpuMemcpyAsync(&bad, ids + off, sizeof(I), gpuMemcpyDeviceToHost, s), "MemcpyAsync(D2H)");
  check(gpuStreamSynchronize(s), "StreamSynchronize");
  throw_if_index_error(ctx, bad_id_message(op, int64_t(bad), size_t(pos), l, ids_l, dim, limit));
  // The flag was set by the kernel that found pos, so the call above has thrown.
  throw Error(ErrorKind::Internal, std::string(op) + ": bad id found but the device error flag was clear");
}

// out[base + i] = src[src_l(i) + ids[ids_l(i)] * dim_stride]; src_l has stride 0 along dim.
template <class T, class I>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    gather_kernel(T* WICK_RESTRICT out, int64_t n, StridedDesc<2> d, const T* WICK_RESTRICT src,
                  const I* WICK_RESTRICT ids, int64_t dim_stride) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t o[2];
    d.offsets_of(i, o);
    out[i] = read_at_id(src + o[0], ids[o[1]], dim_stride);
  }
}

template <class T, class I>
void gather_launch(gpuStream_t s, T* out, const Shape& shape, const T* src, const Layout& src_l, const I* ids,
                   const Layout& ids_l, int64_t dim_stride) {
  for_each_desc<2>(shape, {&src_l, &ids_l}, 0, [&](const StridedDesc<2>& d, int64_t base, int64_t n) {
    launch_kernel(gather_kernel<T, I>, grid_for(n), kBlock, 0, s, out + base, n, d, src, ids, dim_stride);
    check_launch("gather");
  });
}

// Wrapping for integers, one f32 (or f64) add and one rounding for floats (as the CPU).
template <class T> __device__ __forceinline__ T add_one(T a, T b) {
  if constexpr (is_float_v<T>) {
    return cast<T>(to_compute(a) + to_compute(b));
  } else {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  }
}

template <bool kAdd, class T> __device__ __forceinline__ void put(T& o, T v) {
  if constexpr (kAdd)
    o = add_one(o, v);
  else
    o = v;
}

struct LineWalk {
  int64_t len_dim, ids_ds, src_ds, dim_stride;
};

// One thread per line: dst[dst_l(line) + ids[...k...] * dim_stride] (+)= src[...k...] for k in
// order along dim.
template <bool kAdd, class T, class I>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    scatter_lines_kernel(T* WICK_RESTRICT dst, int64_t lines, StridedDesc<3> d, const I* WICK_RESTRICT ids,
                         const T* WICK_RESTRICT src, LineWalk w) {
  kernel_entry();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < lines; t += step) {
    int64_t o[3];
    d.offsets_of(t, o);
    T* d0 = dst + o[0];
    const I* id = ids + o[1];
    const T* sv = src + o[2];
    for (int64_t k = 0; k < w.len_dim; ++k) {
      const I v = id[k * w.ids_ds];
      if (!is_sentinel_id(v)) put<kAdd>(d0[int64_t(v) * w.dim_stride], sv[k * w.src_ds]);
    }
  }
}

// A broadcast destination maps several lines onto one element: one thread applies every
// write in the CPU's order (k outside the lines when it sweeps rows, inside otherwise).
constexpr int kSerialBlock = 64;  // one wave64; lanes other than 0 return at once
template <bool kAdd, class T, class I>
__global__ void WICK_LAUNCH_BOUNDS(kSerialBlock)
    scatter_serial_kernel(T* dst, int64_t lines, StridedDesc<3> d, const I* ids, const T* src, LineWalk w,
                          bool k_outer) {
  kernel_entry();
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const int64_t n_outer = k_outer ? w.len_dim : lines, n_inner = k_outer ? lines : w.len_dim;
  for (int64_t a = 0; a < n_outer; ++a) {
    for (int64_t b = 0; b < n_inner; ++b) {
      const int64_t t = k_outer ? b : a, k = k_outer ? a : b;
      int64_t o[3];
      d.offsets_of(t, o);
      const I v = ids[o[1] + k * w.ids_ds];
      if (!is_sentinel_id(v)) put<kAdd>(dst[o[0] + int64_t(v) * w.dim_stride], src[o[2] + k * w.src_ds]);
    }
  }
}

Layout drop_dim(const Layout& l, size_t dim) {
  Layout r = l;
  r.shape.erase(r.shape.begin() + int64_t(dim));
  r.strides.erase(r.strides.begin() + int64_t(dim));
  return r;
}

// dst[dst_l(k) + ids[ids_l(k)] * dim_stride] (+)= src[src_l(k)] over the ids' shape; dst_l has
// stride 0 along `dim`. Ids must have been validated.
template <bool kAdd, class T, class I>
void scatter_launch(gpuStream_t s, T* dst, const Layout& dst_l, const I* ids, const Layout& ids_l, const T* src,
                    const Layout& src_l, size_t dim, int64_t dim_stride) {
  if (dst_l.numel() == 0) return;
  const Layout a = drop_dim(dst_l, dim), b = drop_dim(ids_l, dim), c = drop_dim(src_l, dim);
  const LineWalk w{int64_t(dst_l.shape[dim]), ids_l.strides[dim], src_l.strides[dim], dim_stride};
  bool shared_dst = false;
  for (size_t k = 0; k < a.rank(); ++k) shared_dst |= a.shape[k] > 1 && a.strides[k] == 0;
  for_each_desc<3>(a.shape, {&a, &b, &c}, 0, [&](const StridedDesc<3>& d, int64_t, int64_t lines) {
    if (shared_dst) {
      // the CPU sweeps rows (k outside) when the innermost merged run of lines is >= 16 long
      launch_kernel(scatter_serial_kernel<kAdd, T, I>, 1, kSerialBlock, 0, s, dst, lines, d, ids, src, w,
                    d.dims[d.rank - 1] >= 16);
    } else {
      launch_kernel(scatter_lines_kernel<kAdd, T, I>, grid_for(lines), kBlock, 0, s, dst, lines, d, ids, src, w);
    }
    check_launch(kAdd ? "scatter_add" : "scatter");
  });
}

// index_add with few lines and many ids (an embedding gradient): one thread per (sorted id
// position k, line) where k starts a run of equal ids; it adds the run's src rows in order.
// perm is a stable arg_sort of the ids, so each destination element receives its adds in the
// original order of k, exactly as on the CPU, with all runs in parallel. The sentinel (the
// largest id value, so the last run) adds nothing.
template <class T, class I>
__global__ void WICK_LAUNCH_BOUNDS(kBlock)
    index_add_sorted_kernel(T* WICK_RESTRICT dst, int64_t lines, StridedDesc<2> d, const I* WICK_RESTRICT ids,
                            int64_t ids_s, const uint32_t* WICK_RESTRICT perm, int64_t n_ids,
                            const T* WICK_RESTRICT src, int64_t src_ds, int64_t dim_stride) {
  kernel_entry();
  const int64_t n = n_ids * lines, step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += step) {
    const int64_t k = t / lines, line = t - k * lines;
    const I raw = ids[int64_t(perm[k]) * ids_s];
    if (is_sentinel_id(raw)) continue;
    const int64_t id = int64_t(raw);
    if (k > 0 && int64_t(ids[int64_t(perm[k - 1]) * ids_s]) == id) continue;
    int64_t o[2];
    d.offsets_of(line, o);
    T* out = dst + o[0] + id * dim_stride;
    T acc = *out;
    for (int64_t j = k; j < n_ids; ++j) {
      const int64_t p = int64_t(perm[j]);
      if (j > k && int64_t(ids[p * ids_s]) != id) break;
      acc = add_one(acc, src[o[1] + p * src_ds]);
    }
    *out = acc;
  }
}

template <bool kAdd>
void scatter_entry(GpuStorage& self, const Layout& l, const Storage& ids_s, const Layout& ids_l, const Storage& src_s,
                   const Layout& src_l, size_t dim, const char* op) {
  DeviceGuard g(self.ordinal());
  const GpuStorage& ids = as_gpu(ids_s);
  const GpuStorage& src = as_gpu(src_s);
  dispatch_index_dtype(ids.dtype(), op, [&](auto itag) {
    using I = decltype(itag);
    validate_ids(self, ids.ptr<I>(), ids_l, l.shape[dim], dim, op);
    dispatch_dtype(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      scatter_launch<kAdd>(self.stream(), self.ptr<T>(), without_dim(l, ids_l.shape, dim), ids.ptr<I>(), ids_l,
                           src.ptr<T>(), src_l, dim, l.strides[dim]);
    });
  });
}

}  // namespace

StoragePtr GpuStorage::index_select(const Storage& ids_s, const Layout& l, const Layout& ids_l, size_t dim) const {
  DeviceGuard g(ordinal());
  const GpuStorage& ids = as_gpu(ids_s);
  Shape shape = l.shape;
  shape[dim] = ids_l.numel();
  auto out = new_storage(ordinal(), shape_numel(shape), dtype_);
  dispatch_index_dtype(ids.dtype(), "index_select", [&](auto itag) {
    using I = decltype(itag);
    validate_ids(*this, ids.ptr<I>(), ids_l, l.shape[dim], dim, "index_select");
    dispatch_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      gather_launch(stream(), out->ptr<T>(), shape, ptr<T>(), without_dim(l, shape, dim), ids.ptr<I>(),
                    ids_along(ids_l, shape, dim), l.strides[dim]);
    });
  });
  return out;
}

StoragePtr GpuStorage::gather(const Layout& l, const Storage& ids_s, const Layout& ids_l, size_t dim) const {
  DeviceGuard g(ordinal());
  const GpuStorage& ids = as_gpu(ids_s);
  auto out = new_storage(ordinal(), ids_l.numel(), dtype_);
  dispatch_index_dtype(ids.dtype(), "gather", [&](auto itag) {
    using I = decltype(itag);
    validate_ids(*this, ids.ptr<I>(), ids_l, l.shape[dim], dim, "gather");
    dispatch_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      gather_launch(stream(), out->ptr<T>(), ids_l.shape, ptr<T>(), without_dim(l, ids_l.shape, dim), ids.ptr<I>(),
                    ids_l, l.strides[dim]);
    });
  });
  return out;
}

void GpuStorage::scatter_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                             const Layout& src_l, size_t dim) {
  scatter_entry<false>(*this, l, ids, ids_l, src, src_l, dim, "scatter_set");
}

// Half types: each add is done in f32 and rounded back, as on the CPU.
void GpuStorage::scatter_add_set(const Layout& l, const Storage& ids, const Layout& ids_l, const Storage& src,
                                 const Layout& src_l, size_t dim) {
  scatter_entry<true>(*this, l, ids, ids_l, src, src_l, dim, "scatter_add_set");
}

StoragePtr GpuStorage::index_add(const Layout& l, const Storage& ids_s, const Layout& ids_l, const Storage& src_s,
                                 const Layout& src_l, size_t dim) const {
  DeviceGuard g(ordinal());
  const GpuStorage& ids = as_gpu(ids_s);
  const GpuStorage& src = as_gpu(src_s);
  std::shared_ptr<GpuStorage> out;
  dispatch_index_dtype(ids.dtype(), "index_add", [&](auto itag) {
    using I = decltype(itag);
    validate_ids(*this, ids.ptr<I>(), ids_l, l.shape[dim], dim, "index_add");
    out = new_storage(ordinal(), l.numel(), dtype_);
    copy_strided_src(*out, 0, l);
    const Layout out_l = Layout::contiguous(l.shape);
    const int64_t n_ids = int64_t(ids_l.numel());
    const Layout a = drop_dim(without_dim(out_l, src_l.shape, dim), dim), c = drop_dim(src_l, dim);
    const int64_t lines = int64_t(shape_numel(a.shape));
    StridedDesc<2> d;
    // Few lines walking many ids leave the GPU idle: sort the ids and run every id in parallel.
    if (n_ids >= 64 && lines > 0 && lines < 65536 && uint64_t(n_ids) < uint64_t(UINT32_MAX) &&
        make_desc<2>(a.shape, {&a, &c}, &d)) {
      StoragePtr perm = ids.arg_sort(ids_l, true);
      const int64_t ids_s = ids_l.strides[0];
      dispatch_dtype(dtype_, [&](auto tag) {
        using T = decltype(tag);
        launch_kernel(index_add_sorted_kernel<T, I>, grid_for(n_ids * lines), kBlock, 0, stream(), out->ptr<T>(), lines,
                      d, ids.ptr<I>() + ids_l.offset, ids_s, as_gpu(*perm).ptr<uint32_t>(), n_ids, src.ptr<T>(),
                      src_l.strides[dim], out_l.strides[dim]);
        check_launch("index_add");
      });
      return;
    }
    dispatch_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      scatter_launch<true>(stream(), out->ptr<T>(), without_dim(out_l, src_l.shape, dim), ids.ptr<I>(),
                           ids_along(ids_l, src_l.shape, dim), src.ptr<T>(), src_l, dim, out_l.strides[dim]);
    });
  });
  return out;
}

}  // namespace wick::gpu

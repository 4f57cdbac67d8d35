// Reductions (sum, min, max, argmin, argmax) over any set of dims of any layout on the GPU.
//
// The layout is split on the host into kept dims (the outputs) and reduced dims (flattened
// row-major: the index argmin/argmax return), each merged where contiguous. Two kernels:
//  - rows: a power-of-two group of threads (1 to a block) per output, each thread folding a
//    strided share of the reduced range (16-byte vector loads, several in flight, when the range
//    is contiguous), the group combined by shuffles, then shared memory across warps. Last-dim
//    and full reductions.
//  - cols: threads across outputs (a 16-byte vector of neighbouring outputs each when they are
//    contiguous and aligned), a block's rows split over its thread rows and combined in shared
//    memory. Used when the reduced elements are farther apart than the outputs (a dim-0 sum).
// When that gives too few blocks to fill the GPU, the reduced range is also split into chunks
// (grid y), each writing a partial accumulator; a last kernel combines each output's partials.
// Deterministic: every fold order is fixed by the launch shape (no atomics). Argmin/argmax carry
// the index and partials combine by (value, lower index), which gives the CPU's sequential
// fold (first extreme, first NaN) however the work is split.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/reduce_plan.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/reduce.hpp"

namespace wick::gpu {
namespace {

template <class Op> struct IsIndexed : std::false_type {};
template <class T, bool M> struct IsIndexed<ArgAcc<T, M>> : std::true_type {};

// Folds partial b into a where the two cover interleaved index sets. merge() keeps its left
// side on ties, so for the indexed accumulators the one holding the lower index goes left.
// Copies an indexed accumulator member by member. A struct copy also moves its padding bytes
// (after a 1-2 byte value or the flag), which AMDGPU then kept in scratch for every accumulator
// of a column reduction (scripts/amd_resource_usage.sh); the members alone stay in registers.
template <class Acc> __device__ __forceinline__ void set_acc(Acc& d, const Acc& s) {
  if constexpr (requires { s.i; s.any; }) {
    d.v = s.v;
    d.i = s.i;
    d.any = s.any;
  } else {
    d = s;
  }
}

template <class Op> __device__ void combine(const Op& op, typename Op::Acc& a, const typename Op::Acc& b) {
  if constexpr (IsIndexed<Op>::value) {
    if (a.any && b.any && b.i < a.i) {
      typename Op::Acc t;
      set_acc(t, b);
      op.merge(t, a);
      set_acc(a, t);
      return;
    }
  }
  op.merge(a, b);
}

constexpr int kRB = tune::kReduceBlock;
constexpr int kSumCascade = 64;  // elements a thread folds into a partial before adding it to its total (as the CPU)
static_assert(kRB % 64 == 0 && kRB <= 1024, "reduce blocks hold whole wave64s");

template <class T> constexpr int vec_width() { return sizeof(T) >= 16 ? 1 : int(16 / sizeof(T)); }
// Column reductions keep V accumulators per thread in shared memory: V is capped so a block's
// fit kReduceSmemBytes.
template <class T, class Acc> constexpr int col_vec_width() {
  int v = vec_width<T>();
  while (v > 1 && int64_t(v) * kRB * int64_t(sizeof(Acc)) > tune::kReduceSmemBytes) v /= 2;
  return v;
}

__device__ __forceinline__ int64_t red_offset(const StridedDesc<1>& rd, int64_t j) {
  return rd.rank == 1 ? j * rd.strides[0][0] : rd.offset(0, j);
}

// Combines the partials of each group of g threads (g a power of two dividing blockDim.x, the
// same for the whole block); the group's first thread gets the result. Called by every thread.
template <class Op> __device__ typename Op::Acc group_combine(const Op& op, typename Op::Acc a, int g) {
  using Acc = typename Op::Acc;
  __shared__ uint64_t raw[(kMaxWarpsPerBlock * sizeof(Acc) + 7) / 8];
  Acc* sm = reinterpret_cast<Acc*>(raw);
  const int w = g < kWarpSize ? g : kWarpSize;
  for (int m = w / 2; m > 0; m >>= 1) combine(op, a, shfl_xor_any(a, m));
  if (g > kWarpSize) {  // g is uniform: every thread takes this branch or none does
    const int warp = int(threadIdx.x) / kWarpSize;
    if (int(threadIdx.x) % kWarpSize == 0) sm[warp] = a;
    __syncthreads();
    if (int(threadIdx.x) % g == 0)
      for (int k = 1; k < g / kWarpSize; ++k) combine(op, a, sm[warp + k]);
    __syncthreads();  // sm is rewritten by the next call
  }
  return a;
}

// Folds p[lo..hi) (contiguous) into a: this thread takes elements lane, lane + g, ... of the
// unaligned head and tail and 16-byte vectors lane, lane + g, ... of the aligned body, in
// increasing index order (ties keep the first index).
template <class Op, class T>
__device__ __forceinline__ void fold_contig(const Op& op, typename Op::Acc& a, const T* WICK_RESTRICT p, int64_t lo,
                                            int64_t hi, int lane, int g) {
  constexpr int V = vec_width<T>(), U = tune::kReduceUnroll;
  int64_t head = int64_t(((16u - (reinterpret_cast<uintptr_t>(p + lo) & 15u)) & 15u) / sizeof(T));
  if (head > hi - lo) head = hi - lo;
  for (int64_t j = lo + lane; j < lo + head; j += g) op.add(a, p[j], uint32_t(j));
  const int64_t b0 = lo + head, nv = (hi - b0) / V;
  const VecOf<T, V>* vp = reinterpret_cast<const VecOf<T, V>*>(p + b0);
  constexpr int kCascade = kSumCascade / (U * V) > 1 ? kSumCascade / (U * V) : 1;  // iterations per partial
  // Independent partials (per unrolled load, and per half of a vector of 8+ elements) instead
  // of one long dependency chain of adds/compares, which is latency-bound. combine() orders
  // indexed partials.
  constexpr int S = V >= 8 ? 2 : 1;
  typename Op::Acc t[U * S];
#pragma unroll
  for (int u = 0; u < U * S; ++u) t[u] = op.init();
  int since = 0;
  for (int64_t v = lane; v < nv; v += int64_t(g) * U) {
    VecOf<T, V> x[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (v + int64_t(u) * g < nv) x[u] = vp[v + int64_t(u) * g];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v + int64_t(u) * g;
      if (vi < nv) {
#pragma unroll
        for (int e = 0; e < V; ++e) op.add(t[u * S + e * S / V], x[u].v[e], uint32_t(b0 + vi * V + e));
      }
    }
    if (++since == kCascade) {
#pragma unroll
      for (int u = 0; u < U * S; ++u) {
        combine(op, a, t[u]);
        t[u] = op.init();
      }
      since = 0;
    }
  }
#pragma unroll
  for (int u = 0; u < U * S; ++u) combine(op, a, t[u]);
  for (int64_t j = b0 + nv * V + lane; j < hi; j += g) op.add(a, p[j], uint32_t(j));
}

// g threads per output (g a power of two <= kRB), kRB / g outputs per block and round; chunk
// blockIdx.y of the reduced range. part (when split): part[o * gridDim.y + chunk].
template <class Op, class T, bool kContig>
__global__ void WICK_LAUNCH_BOUNDS(kRB)
    reduce_rows_kernel(const T* WICK_RESTRICT in, typename Op::Out* WICK_RESTRICT out,
                       typename Op::Acc* WICK_RESTRICT part, int64_t n_out, int64_t n_red, int64_t chunk, int g,
                       StridedDesc<1> kd, StridedDesc<1> rd, Op op) {
  kernel_entry();
  using Acc = typename Op::Acc;
  const int lane = int(threadIdx.x) % g;
  const int64_t per_block = kRB / g;
  const int64_t lo = int64_t(blockIdx.y) * chunk, hi = lo + chunk < n_red ? lo + chunk : n_red;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < n_out; base += int64_t(gridDim.x) * per_block) {
    const int64_t o = base + int64_t(threadIdx.x) / g;
    Acc a = op.init();
    if (o < n_out) {
      const T* p = in + kd.offset(0, o);
      if constexpr (kContig) {
        fold_contig(op, a, p, lo, hi, lane, g);
      } else {
        for (int64_t j = lo + lane; j < hi; j += g) op.add(a, p[red_offset(rd, j)], uint32_t(j));
      }
    }
    a = group_combine(op, a, g);
    if (lane == 0 && o < n_out) {
      if (part) part[o * gridDim.y + blockIdx.y] = a;
      else out[o] = op.finish(a);
    }
  }
}

// Thread (x, y) = (threadIdx.x % cx, threadIdx.x / cx) folds outputs ov*V .. ov*V+V-1
// (ov = block base + x; contiguous, 16-byte aligned when V > 1) over rows lo + y, lo + y + ry,
// ... of its chunk; the block's ry thread rows are then combined in shared memory.
template <class Op, class T, int V>
__global__ void WICK_LAUNCH_BOUNDS(kRB)
    reduce_cols_kernel(const T* WICK_RESTRICT in, typename Op::Out* WICK_RESTRICT out,
                       typename Op::Acc* WICK_RESTRICT part, int64_t n_out, int64_t n_red, int64_t chunk, int cx,
                       StridedDesc<1> kd, StridedDesc<1> rd, Op op) {
  kernel_entry();
  using Acc = typename Op::Acc;
  constexpr int U = tune::kReduceUnroll;
  __shared__ uint64_t raw[(kRB * V * sizeof(Acc) + 7) / 8];
  Acc* sm = reinterpret_cast<Acc*>(raw);  // sm[thread * V + e]
  const int x = int(threadIdx.x) % cx, y = int(threadIdx.x) / cx, ry = kRB / cx;
  const int64_t nvo = n_out / V;
  const int64_t lo = int64_t(blockIdx.y) * chunk, hi = lo + chunk < n_red ? lo + chunk : n_red;
  for (int64_t base = int64_t(blockIdx.x) * cx; base < nvo; base += int64_t(gridDim.x) * cx) {
    const int64_t ov = base + x;
    Acc a[V], t[V];
#pragma unroll
    for (int e = 0; e < V; ++e) a[e] = t[e] = op.init();
    if (ov < nvo) {
      const T* p = in + kd.offset(0, ov * V);
      constexpr int kCascade = kSumCascade / U > 1 ? kSumCascade / U : 1;  // iterations per partial
      int since = 0;
      for (int64_t j = lo + y; j < hi; j += int64_t(ry) * U) {
        VecOf<T, V> v[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j + int64_t(u) * ry < hi) v[u] = *reinterpret_cast<const VecOf<T, V>*>(p + red_offset(rd, j + int64_t(u) * ry));
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t r = j + int64_t(u) * ry;
          if (r < hi) {
#pragma unroll
            for (int e = 0; e < V; ++e) op.add(t[e], v[u].v[e], uint32_t(r));
          }
        }
        if (++since == kCascade) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            op.merge(a[e], t[e]);  // later rows on the right: merge keeps the first of equals
            t[e] = op.init();
          }
          since = 0;
        }
      }
#pragma unroll
      for (int e = 0; e < V; ++e) op.merge(a[e], t[e]);
    }
#pragma unroll
    for (int e = 0; e < V; ++e) set_acc(sm[threadIdx.x * V + e], a[e]);
    __syncthreads();
    for (int s = ry / 2; s > 0; s >>= 1) {
      if (y < s) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          combine(op, a[e], sm[(threadIdx.x + s * cx) * V + e]);
          set_acc(sm[threadIdx.x * V + e], a[e]);
        }
      }
      __syncthreads();  // also orders this round's last reads before the next round's writes
    }
    if (y == 0 && ov < nvo) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int64_t o = ov * V + e;
        if (part) set_acc(part[o * gridDim.y + blockIdx.y], a[e]);
        else out[o] = op.finish(a[e]);
      }
    }
  }
}

// Combines each output's nsplit partials (part[o * nsplit + s]) with g threads per output.
template <class Op>
__global__ void WICK_LAUNCH_BOUNDS(kRB)
    reduce_finish_kernel(const typename Op::Acc* WICK_RESTRICT part, typename Op::Out* WICK_RESTRICT out, int64_t n_out,
                         int64_t nsplit, int g, Op op) {
  kernel_entry();
  using Acc = typename Op::Acc;
  const int lane = int(threadIdx.x) % g;
  const int64_t per_block = kRB / g;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < n_out; base += int64_t(gridDim.x) * per_block) {
    const int64_t o = base + int64_t(threadIdx.x) / g;
    Acc a = op.init();
    if (o < n_out)
      for (int64_t s = lane; s < nsplit; s += g) combine(op, a, part[o * nsplit + s]);
    a = group_combine(op, a, g);
    if (lane == 0 && o < n_out) out[o] = op.finish(a);
  }
}

constexpr int64_t kMaxSplit = 65535;  // grid y limit

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int pow2_at_least(int64_t x, int cap) {
  int p = 1;
  while (p < cap && p < x) p *= 2;
  return p;
}
unsigned grid_x(int64_t blocks) { return unsigned(std::clamp<int64_t>(blocks, 1, 65535 * 8)); }  // loops cover more

// How many chunks to cut the reduced range into when `blocks` blocks would not fill the GPU
// (one wave of kReduceBlocksPerSm per SM): enough for kReduceWaves waves, each chunk keeping at
// least min_chunk elements.
int64_t split_for(int64_t blocks, int64_t n_red, int64_t min_chunk, int sms) {
  const int64_t wave = int64_t(sms) * tune::kReduceBlocksPerSm;
  if (blocks >= wave) return 1;
  return std::clamp<int64_t>(std::min(ceil_div(wave * tune::kReduceWaves, blocks), n_red / min_chunk), 1, kMaxSplit);
}

template <class Op, class T>
void run_reduce(gpuStream_t s, int ordinal, const Op& op, const T* in, typename Op::Out* out, int64_t n_out,
                int64_t n_red, const StridedDesc<1>& kd, const StridedDesc<1>& rd) {
  using Acc = typename Op::Acc;
  const int sms = std::max(1, context(ordinal).prop.multiProcessorCount);
  const int64_t ks = kd.strides[0][kd.rank - 1], rs = rd.strides[0][rd.rank - 1];
  const bool cols = n_out > 1 && rs != 1 && std::llabs(ks) < std::llabs(rs);
  const bool contig = rd.rank == 1 && rs == 1;
  int64_t nsplit = 1, chunk = n_red;
  Acc* part = nullptr;
  std::unique_ptr<Scratch> scratch;
  auto alloc_part = [&](int64_t blocks, int64_t min_chunk, int64_t align) {
    nsplit = split_for(blocks, n_red, min_chunk, sms);
    chunk = ceil_div(ceil_div(n_red, nsplit), align) * align;
    nsplit = ceil_div(n_red, chunk);
    if (nsplit > 1) {
      scratch = std::make_unique<Scratch>(ordinal, size_t(nsplit * n_out) * sizeof(Acc));
      part = static_cast<Acc*>(scratch->b.ptr);
    }
  };
  if (cols) {
    constexpr int Vc = col_vec_width<T, Acc>();
    // V neighbouring outputs per thread when every output vector is contiguous and aligned
    bool vec = Vc > 1 && ks == 1 && kd.dims[kd.rank - 1] % Vc == 0 && aligned16(in + kd.offsets[0]);
    for (int d = 0; d < kd.rank - 1 && vec; ++d) vec = kd.strides[0][d] % Vc == 0;
    for (int d = 0; d < rd.rank && vec; ++d) vec = rd.strides[0][d] % Vc == 0;
    const int V = vec ? Vc : 1;
    const int64_t nvo = n_out / V;
    int ry = kRB / tune::kReduceColThreadsX;
    while (ry > 1 && int64_t(ry) * tune::kReduceColRows > n_red) ry /= 2;  // few rows: more threads across
    int cx = kRB / ry;
    while (cx > 1 && cx / 2 >= nvo) cx /= 2;  // few outputs: more thread rows
    ry = kRB / cx;
    const int64_t blocks = ceil_div(nvo, cx);
    alloc_part(blocks, int64_t(ry) * tune::kReduceColRows, 1);
    dim3 grid(grid_x(blocks), unsigned(nsplit));
    if (vec) {
      if constexpr (Vc > 1)
        launch_kernel(reduce_cols_kernel<Op, T, Vc>, grid, kRB, 0, s, in, out, part, n_out, n_red, chunk, cx, kd, rd,
                      op);
    } else {
      launch_kernel(reduce_cols_kernel<Op, T, 1>, grid, kRB, 0, s, in, out, part, n_out, n_red, chunk, cx, kd, rd, op);
    }
  } else {
    const int V = contig ? vec_width<T>() : 1;
    const int g = pow2_at_least(ceil_div(n_red, int64_t(V) * tune::kReduceRowVecs), kRB);
    const int64_t blocks = ceil_div(n_out, kRB / g);
    if (g == kRB) alloc_part(blocks, int64_t(kRB) * V * tune::kReduceRowVecs, V);
    dim3 grid(grid_x(blocks), unsigned(nsplit));
    if (contig)
      launch_kernel(reduce_rows_kernel<Op, T, true>, grid, kRB, 0, s, in, out, part, n_out, n_red, chunk, g, kd, rd,
                    op);
    else
      launch_kernel(reduce_rows_kernel<Op, T, false>, grid, kRB, 0, s, in, out, part, n_out, n_red, chunk, g, kd, rd,
                    op);
  }
  check_launch("reduce");
  if (part) {
    const int g = pow2_at_least(ceil_div(nsplit, 4), kRB);
    launch_kernel(reduce_finish_kernel<Op>, grid_x(ceil_div(n_out, kRB / g)), kRB, 0, s, part, out, n_out, nsplit, g,
                  op);
    check_launch("reduce_finish");
  }
}

}  // namespace

StoragePtr GpuStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const {
  DeviceGuard g(ordinal());
  const char* name = reduce_op_name(op);
  ReduceSplit split = split_reduce_dims(name, l, dims);
  const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  const DType out_dtype = is_arg ? DType::U32 : dtype_;
  const size_t n_out = split.n_out, n_red = split.n_red;
  auto out = new_storage(ordinal(), n_out, out_dtype);
  if (n_out == 0) return out;
  if (n_red == 0) {
    check_empty_reduce(op, name, l);
    check(gpuMemsetAsync(out->data(), 0, n_out * dtype_size(dtype_), stream()), "MemsetAsync");
    return out;
  }
  check_arg_reduce_size(is_arg, name, n_red);

  Layout &kl = split.kept, &rl = split.red;
  StridedDesc<1> kd, rd;
  const GpuStorage* src = this;
  std::shared_ptr<GpuStorage> tmp;
  if (!make_desc<1>(kl.shape, {&kl}, &kd) || !make_desc<1>(rl.shape, {&rl}, &rd)) {
    // Too many unmergeable dims for a by-value layout: copy kept-then-reduced order into a
    // contiguous buffer, which merges to one kept and one reduced dim.
    Shape ps = kl.shape;
    ps.insert(ps.end(), rl.shape.begin(), rl.shape.end());
    std::vector<int64_t> pst = kl.strides;
    pst.insert(pst.end(), rl.strides.begin(), rl.strides.end());
    tmp = new_storage(ordinal(), n_out * n_red, dtype_);
    copy_strided_src(*tmp, 0, Layout(ps, pst, l.offset));
    kl = Layout({n_out}, {int64_t(n_red)}, 0);
    rl = Layout({n_red}, {1}, 0);
    make_desc<1>(kl.shape, {&kl}, &kd);
    make_desc<1>(rl.shape, {&rl}, &rd);
    src = tmp.get();
  }

  const int64_t no = int64_t(n_out), nr = int64_t(n_red);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* in = src->ptr<T>();
    gpuStream_t s = stream();
    const int dev = ordinal();
    switch (op) {
      case ReduceOp::Sum: run_reduce(s, dev, SumAcc<T>{}, in, out->ptr<T>(), no, nr, kd, rd); break;
      // Min/max carry no index: the value is the same whatever the fold order (a NaN, if any,
      // wins; only its payload bits could differ from the CPU's first NaN).
      case ReduceOp::Max: run_reduce(s, dev, MinMaxValueAcc<T, true>{}, in, out->ptr<T>(), no, nr, kd, rd); break;
      case ReduceOp::Min: run_reduce(s, dev, MinMaxValueAcc<T, false>{}, in, out->ptr<T>(), no, nr, kd, rd); break;
      case ReduceOp::ArgMax: run_reduce(s, dev, ArgMaxAcc<T>{}, in, out->ptr<uint32_t>(), no, nr, kd, rd); break;
      case ReduceOp::ArgMin: run_reduce(s, dev, ArgMinAcc<T>{}, in, out->ptr<uint32_t>(), no, nr, kd, rd); break;
    }
  });
  return out;
}

}  // namespace wick::gpu

// Reductions (sum, min, max, argmin, argmax) over any set of dims of any layout on the GPU.
//
// The layout is split on the host into kept dims (the outputs) and reduced dims (flattened
// row-major, the index argmin/argmax return), each merged where contiguous. Two kernels:
//  - group: a power-of-two group of threads (1 to a block) per output, threads striding
//    over the reduced range, partials combined in shared memory. Used when the reduced
//    elements are the nearest in memory (a last-dim sum) or the outputs are few.
//  - columns: one thread per output looping over the reduced range, so neighbouring threads
//    read neighbouring kept elements (a dim-0 sum of a matrix). Sums fold 64 rows into a
//    partial before adding it to the total, as the CPU does.
// When there are too few outputs to fill the GPU, the reduced range is also split into chunks
// (grid y), each writing a partial accumulator; a last kernel merges them in chunk order.
// No warp shuffles: the in-block combine goes through shared memory, so any warp width works.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/reduce_plan.hpp"
#include "core/dispatch.hpp"
#include "ops/reduce.hpp"

namespace wick::gpu {
namespace {

// Min/max run as their arg counterparts and return the value: with the index carried, partials
// over interleaved index sets combine exactly like the CPU's sequential fold (first NaN wins).
template <class T, bool kMax> struct MinMaxByArg : ArgAcc<T, kMax> {
  using Acc = typename ArgAcc<T, kMax>::Acc;
  using Out = T;
  WICK_HD Out finish(const Acc& a) const { return cast<T>(a.v); }
};

template <class Op> struct IsIndexed : std::false_type {};
template <class T, bool M> struct IsIndexed<ArgAcc<T, M>> : std::true_type {};
template <class T, bool M> struct IsIndexed<MinMaxByArg<T, M>> : std::true_type {};
template <class Op> struct IsSum : std::false_type {};
template <class T> struct IsSum<SumAcc<T>> : std::true_type {};

// Folds partial b into a where the two cover interleaved index sets. merge() keeps its left
// side on ties, so for the indexed accumulators the one holding the lower index goes left.
template <class Op> __device__ void combine(const Op& op, typename Op::Acc& a, const typename Op::Acc& b) {
  if constexpr (IsIndexed<Op>::value) {
    if (a.any && b.any && b.i < a.i) {
      typename Op::Acc t = b;
      op.merge(t, a);
      a = t;
      return;
    }
  }
  op.merge(a, b);
}

constexpr int kSumCascade = 64;  // rows folded into a partial sum before it joins the total (as the CPU)

template <class T> __device__ __forceinline__ int64_t red_offset(const StridedDesc<1>& rd, int64_t j) {
  return rd.rank == 1 ? j * rd.strides[0][0] : rd.offset(0, j);
}

// blockDim.x == kBlock; `group` a power of two <= kBlock. Outputs base.. of a round go to
// consecutive groups; chunk blockIdx.y of the reduced range.
template <class Op, class T>
__global__ void reduce_group_kernel(const T* __restrict__ in, typename Op::Out* __restrict__ out,
                                    typename Op::Acc* __restrict__ part, int64_t n_out, int64_t n_red, int64_t chunk,
                                    int group, StridedDesc<1> kd, StridedDesc<1> rd, Op op) {
  using Acc = typename Op::Acc;
  __shared__ uint64_t raw[(kBlock * sizeof(Acc) + 7) / 8];
  Acc* sm = reinterpret_cast<Acc*>(raw);
  const int lane = int(threadIdx.x) % group;
  const int64_t per_block = kBlock / group;
  const int64_t lo = int64_t(blockIdx.y) * chunk, hi = lo + chunk < n_red ? lo + chunk : n_red;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < n_out; base += int64_t(gridDim.x) * per_block) {
    const int64_t o = base + int64_t(threadIdx.x) / group;
    Acc a = op.init();
    if (o < n_out) {
      const T* p = in + kd.offset(0, o);
      for (int64_t j = lo + lane; j < hi; j += group) op.add(a, p[red_offset<T>(rd, j)], uint32_t(j));
    }
    sm[threadIdx.x] = a;
    __syncthreads();
    for (int s = group / 2; s > 0; s >>= 1) {
      if (lane < s) {
        Acc c = sm[threadIdx.x];
        combine(op, c, sm[threadIdx.x + s]);
        sm[threadIdx.x] = c;
      }
      __syncthreads();
    }
    if (lane == 0 && o < n_out) {
      if (part) part[int64_t(blockIdx.y) * n_out + o] = sm[threadIdx.x];
      else out[o] = op.finish(sm[threadIdx.x]);
    }
    __syncthreads();  // sm is rewritten by the next round
  }
}

template <class Op, class T>
__global__ void reduce_cols_kernel(const T* __restrict__ in, typename Op::Out* __restrict__ out,
                                   typename Op::Acc* __restrict__ part, int64_t n_out, int64_t n_red, int64_t chunk,
                                   StridedDesc<1> kd, StridedDesc<1> rd, Op op) {
  using Acc = typename Op::Acc;
  const int64_t lo = int64_t(blockIdx.y) * chunk, hi = lo + chunk < n_red ? lo + chunk : n_red;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n_out; o += step) {
    const T* p = in + kd.offset(0, o);
    Acc a = op.init();
    if constexpr (IsSum<Op>::value) {
      Acc rows = op.init();
      int since = 0;
      for (int64_t j = lo; j < hi; ++j) {
        op.add(rows, p[red_offset<T>(rd, j)], uint32_t(j));
        if (++since == kSumCascade) {
          op.merge(a, rows);
          rows = op.init();
          since = 0;
        }
      }
      op.merge(a, rows);
    } else {
      for (int64_t j = lo; j < hi; ++j) op.add(a, p[red_offset<T>(rd, j)], uint32_t(j));
    }
    if (part) part[int64_t(blockIdx.y) * n_out + o] = a;
    else out[o] = op.finish(a);
  }
}

// Chunk partials cover consecutive index ranges: merging them in chunk order is the CPU's merge.
template <class Op>
__global__ void reduce_finish_kernel(const typename Op::Acc* __restrict__ part, typename Op::Out* __restrict__ out,
                                     int64_t n_out, int64_t nsplit, Op op) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n_out; o += step) {
    typename Op::Acc a = part[o];
    for (int64_t s = 1; s < nsplit; ++s) op.merge(a, part[s * n_out + o]);
    out[o] = op.finish(a);
  }
}

constexpr int64_t kTargetThreads = int64_t(1) << 17;  // enough resident threads to fill a big GPU
constexpr int64_t kMaxSplit = 65535;                 // grid y limit

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <class Op, class T>
void run_reduce(gpuStream_t s, int ordinal, const Op& op, const T* in, typename Op::Out* out, int64_t n_out,
                int64_t n_red, const StridedDesc<1>& kd, const StridedDesc<1>& rd) {
  using Acc = typename Op::Acc;
  const int64_t ks = kd.strides[0][kd.rank - 1], rs = rd.strides[0][rd.rank - 1];
  const bool cols = n_out > 1 && rs != 1 && std::llabs(ks) < std::llabs(rs);
  int group = 1;
  int64_t nsplit = 1;
  if (cols) {
    if (n_out < kTargetThreads && n_red >= 4 * kSumCascade)
      nsplit = std::min({ceil_div(kTargetThreads, n_out), ceil_div(n_red, 2 * kSumCascade), kMaxSplit});
  } else {
    while (group < kBlock && group < n_red) group *= 2;
    if (group == kBlock && n_red > 8192 && n_out * kBlock < kTargetThreads)
      nsplit = std::min({ceil_div(kTargetThreads, n_out * kBlock), ceil_div(n_red, 4096), kMaxSplit});
  }
  const int64_t chunk = ceil_div(n_red, nsplit);
  nsplit = ceil_div(n_red, chunk);
  Acc* part = nullptr;
  std::unique_ptr<Scratch> scratch;
  if (nsplit > 1) {
    scratch = std::make_unique<Scratch>(ordinal, size_t(nsplit * n_out) * sizeof(Acc));
    part = static_cast<Acc*>(scratch->b.ptr);
  }
  if (cols) {
    dim3 grid(grid_for(n_out), unsigned(nsplit));
    reduce_cols_kernel<Op, T><<<grid, kBlock, 0, s>>>(in, out, part, n_out, n_red, chunk, kd, rd, op);
  } else {
    dim3 grid(grid_for(ceil_div(n_out, kBlock / group), 1), unsigned(nsplit));
    reduce_group_kernel<Op, T><<<grid, kBlock, 0, s>>>(in, out, part, n_out, n_red, chunk, group, kd, rd, op);
  }
  check_launch("reduce");
  if (part) {
    reduce_finish_kernel<Op><<<grid_for(n_out), kBlock, 0, s>>>(part, out, n_out, nsplit, op);
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
      case ReduceOp::Max: run_reduce(s, dev, MinMaxByArg<T, true>{}, in, out->ptr<T>(), no, nr, kd, rd); break;
      case ReduceOp::Min: run_reduce(s, dev, MinMaxByArg<T, false>{}, in, out->ptr<T>(), no, nr, kd, rd); break;
      case ReduceOp::ArgMax: run_reduce(s, dev, ArgMaxAcc<T>{}, in, out->ptr<uint32_t>(), no, nr, kd, rd); break;
      case ReduceOp::ArgMin: run_reduce(s, dev, ArgMinAcc<T>{}, in, out->ptr<uint32_t>(), no, nr, kd, rd); break;
    }
  });
  return out;
}

}  // namespace wick::gpu

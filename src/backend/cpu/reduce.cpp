// Reductions (sum, min, max, argmin, argmax) over any set of dims of any layout.
//
// The kept dims and the reduced dims are planned separately (each merged where contiguous).
// Three strategies:
//  - few outputs, long reductions (a full sum): the reduced range is cut into fixed blocks
//    reduced in parallel, their partials merged as a tree. Blocks do not depend on the
//    thread count, so results are the same on every machine.
//  - reduced elements nearest in memory (a last-dim sum): one output per task, each folding
//    its reduced runs; contiguous runs use a pairwise (cascade) sum.
//  - kept elements nearest in memory (a dim-0 sum of a matrix): rows of the input are
//    accumulated into a tile of output accumulators, so memory is read row by row.
// f32 sums accumulate in f32 with pairwise summation (numpy's scheme: 8 lanes over blocks of
// 128, halves added recursively): error grows like log(n), at the speed of a plain loop.
#include <cstring>
#include <type_traits>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "backend/reduce_plan.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/reduce.hpp"

namespace wick::cpu {
namespace {

constexpr size_t kBlock = 65536;  // reduced elements per parallel block (split strategy)
constexpr size_t kTile = 2048;    // outputs per tile (row-accumulate): whole rows stream from memory
constexpr size_t kMinTile = 256;  // narrowest tile worth a task of its own
constexpr size_t kCascade = 64;   // rows folded into a tile before it joins the running sum

template <class T> constexpr bool kIsSum = false;
template <class T> constexpr bool kIsSum<SumAcc<T>> = true;
template <class T> constexpr bool kIsMinMax = false;
template <class T, bool M> constexpr bool kIsMinMax<MinMaxAcc<T, M>> = true;

// Pairwise sum of n elements p[0], p[s], ... in the accumulator type A.
template <class A, bool kUnit, class T> A pairwise_sum(const T* p, int64_t s, size_t n) {
  auto at = [&](size_t j) -> A { return A(to_compute(kUnit ? p[j] : p[int64_t(j) * s])); };
  if (n < 8) {
    A r = A(0);
    for (size_t j = 0; j < n; ++j) r += at(j);
    return r;
  }
  if (n <= 128) {
    A r[8];
    for (int k = 0; k < 8; ++k) r[k] = at(size_t(k));
    size_t j = 8;
    for (; j + 8 <= n; j += 8)
      for (int k = 0; k < 8; ++k) r[k] += at(j + size_t(k));
    A res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; j < n; ++j) res += at(j);
    return res;
  }
  size_t h = n / 2;
  h -= h % 8;
  return pairwise_sum<A, kUnit>(p, s, h) + pairwise_sum<A, kUnit>(kUnit ? p + h : p + int64_t(h) * s, s, n - h);
}

// One lane step of max/min, branch-free so that it vectorises: a NaN lane stays NaN
// ((x > nan) is false) and a NaN x always enters.
template <bool kMax, class C> inline C lane_step(C r, C x) {
  bool take = kMax ? (x > r) : (x < r);
  if constexpr (std::is_floating_point_v<C>) take = take | (x != x);
  return take ? x : r;
}

// Max/min (NaN-propagating) of p[0..len), len >= 8, in eight independent lanes. f32/f64
// use GCC/Clang vector types: the compare-and-select then compiles to packed instructions.
template <bool kMax, class T> compute_t<T> lane_extreme(const T* p, size_t len) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    constexpr size_t W = 16 / sizeof(T);  // one SSE register; two of them in flight
    typedef T V __attribute__((vector_size(16)));
    if (len >= 4 * W) {
      V r0, r1, x0, x1;
      std::memcpy(&r0, p, sizeof(V));
      std::memcpy(&r1, p + W, sizeof(V));
      size_t j = 2 * W;
      for (; j + 2 * W <= len; j += 2 * W) {
        std::memcpy(&x0, p + j, sizeof(V));
        std::memcpy(&x1, p + j + W, sizeof(V));
        auto t0 = (kMax ? (x0 > r0) : (x0 < r0)) | (x0 != x0);
        auto t1 = (kMax ? (x1 > r1) : (x1 < r1)) | (x1 != x1);
        r0 = t0 ? x0 : r0;
        r1 = t1 ? x1 : r1;
      }
      C m = r0[0];
      for (size_t k = 1; k < W; ++k) m = lane_step<kMax>(m, C(r0[k]));
      for (size_t k = 0; k < W; ++k) m = lane_step<kMax>(m, C(r1[k]));
      for (; j < len; ++j) m = lane_step<kMax>(m, C(p[j]));
      return m;
    }
  }
  C r[8];
  for (int k = 0; k < 8; ++k) r[k] = to_compute(p[k]);
  size_t j = 8;
  for (; j + 8 <= len; j += 8)
    for (int k = 0; k < 8; ++k) r[k] = lane_step<kMax>(r[k], C(to_compute(p[j + size_t(k)])));
  for (; j < len; ++j) r[0] = lane_step<kMax>(r[0], C(to_compute(p[j])));
  for (int k = 1; k < 8; ++k) r[0] = lane_step<kMax>(r[0], r[k]);
  return r[0];
}

// Folds len elements p[0], p[s], ... (flattened reduced indices idx0, idx0+1, ...) into a.
template <class Op, class T>
void fold_run(const Op& op, typename Op::Acc& a, const T* p, int64_t s, size_t len, size_t idx0) {
  using Acc = typename Op::Acc;
  if constexpr (kIsSum<Op>) {
    if constexpr (std::is_integral_v<Acc>) {
      using U = std::make_unsigned_t<Acc>;
      U r = U(a);
      if (s == 1)
        for (size_t j = 0; j < len; ++j) r = U(r + U(p[j]));
      else
        for (size_t j = 0; j < len; ++j) r = U(r + U(p[int64_t(j) * s]));
      a = Acc(r);
    } else {
      a += s == 1 ? pairwise_sum<Acc, true>(p, s, len) : pairwise_sum<Acc, false>(p, s, len);
    }
  } else if constexpr (kIsMinMax<Op>) {
    if (len >= 16 && s == 1) {
      op.add(a, cast<T>(lane_extreme<Op::kIsMax>(p, len)));
    } else {
      for (size_t j = 0; j < len; ++j) op.add(a, p[int64_t(j) * s]);
    }
  } else {
    if (len >= 16 && s == 1) {
      // Two vectorisable passes: the extreme value, then its first position (or first NaN).
      using C = typename Op::C;
      const C m = lane_extreme<Op::kIsMax>(p, len);
      size_t j = 0;
      if (is_nan_val(m))
        while (!is_nan_val(to_compute(p[j]))) ++j;
      else
        while (to_compute(p[j]) != m) ++j;
      op.add(a, p[j], uint32_t(idx0 + j));
    } else {
      for (size_t j = 0; j < len; ++j) op.add(a, p[int64_t(j) * s], uint32_t(idx0 + j));
    }
  }
}

template <class Op, class T>
typename Op::Acc fold_range(const Op& op, const T* in, size_t base, const StridedPlan<1>& rp, size_t b, size_t e) {
  typename Op::Acc a = op.init();
  for_each_run<1>(rp, b, e, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
    fold_run(op, a, in + base + offs[0], inner[0], len, i);
  });
  return a;
}

template <class Op, class Acc> Acc merge_tree(const Op& op, const std::vector<Acc>& v, size_t lo, size_t hi) {
  if (hi - lo == 1) return v[lo];
  size_t mid = lo + (hi - lo) / 2;
  Acc a = merge_tree(op, v, lo, mid);
  op.merge(a, merge_tree(op, v, mid, hi));
  return a;
}

template <class Op, class T>
void reduce_typed(const Op& op, const T* in, typename Op::Out* out, const StridedPlan<1>& kp,
                  const StridedPlan<1>& rp) {
  using Acc = typename Op::Acc;
  const size_t n_out = kp.numel, n_red = rp.numel;
  const size_t grain = std::max<size_t>(1, kParallelGrain / n_red);

  if (n_out < 64 && n_red >= 2 * kBlock) {  // split each reduction into blocks
    const size_t nb = (n_red + kBlock - 1) / kBlock;
    std::vector<Acc> parts(nb);
    for_each_run<1>(kp, 0, n_out, [&](size_t i0, size_t len, const auto& offs, const auto& inner) {
      for (size_t j = 0; j < len; ++j) {
        const size_t base = offs[0] + size_t(int64_t(j) * inner[0]);
        parallel_for(nb, [&](size_t b, size_t e) {
          for (size_t k = b; k < e; ++k) parts[k] = fold_range(op, in, base, rp, k * kBlock, std::min(n_red, (k + 1) * kBlock));
        }, 1);
        out[i0 + j] = op.finish(merge_tree(op, parts, 0, nb));
      }
    });
    return;
  }

  const int64_t rs = rp.strides[0].back(), ks = kp.strides[0].back();
  const bool rows = n_out > 1 && rs != 1 && std::abs(ks) < std::abs(rs);
  if (!rows) {  // one output per iteration
    parallel_for(n_out, [&](size_t b, size_t e) {
      for_each_run<1>(kp, b, e, [&](size_t i0, size_t len, const auto& offs, const auto& inner) {
        for (size_t j = 0; j < len; ++j)
          out[i0 + j] = op.finish(fold_range(op, in, offs[0] + size_t(int64_t(j) * inner[0]), rp, 0, n_red));
      });
    }, grain);
    return;
  }

  // Row-accumulate: a tile of outputs adjacent in memory, all reduced rows folded into it.
  parallel_for(n_out, [&](size_t b, size_t e) {
    std::vector<Acc> acc(kTile), part(kTile);
    for_each_run<1>(kp, b, e, [&](size_t i0, size_t len, const auto& offs, const auto& inner) {
      const int64_t ki = inner[0];
      for (size_t t0 = 0; t0 < len; t0 += kTile) {
        const size_t tl = std::min(kTile, len - t0);
        const T* tb = in + offs[0] + int64_t(t0) * ki;
        for (size_t j = 0; j < tl; ++j) acc[j] = op.init();
        if constexpr (kIsSum<Op>) {
          for (size_t j = 0; j < tl; ++j) part[j] = op.init();
          size_t since = 0;
          for_each_run<1>(rp, 0, n_red, [&](size_t, size_t rlen, const auto& roffs, const auto& rinner) {
            for (size_t r = 0; r < rlen; ++r) {
              const T* row = tb + roffs[0] + int64_t(r) * rinner[0];
              Acc* __restrict pp = part.data();
              if (ki == 1)
                for (size_t j = 0; j < tl; ++j) op.add(pp[j], row[j]);
              else
                for (size_t j = 0; j < tl; ++j) op.add(pp[j], row[int64_t(j) * ki]);
              if (++since == kCascade) {
                for (size_t j = 0; j < tl; ++j) {
                  op.merge(acc[j], part[j]);
                  part[j] = op.init();
                }
                since = 0;
              }
            }
          });
          for (size_t j = 0; j < tl; ++j) op.merge(acc[j], part[j]);
          for (size_t j = 0; j < tl; ++j) out[i0 + t0 + j] = op.finish(acc[j]);
        } else {
          // Values and indices in separate arrays, branch-free updates: vectorisable.
          using C = typename Op::C;
          std::vector<C> valv(kTile);
          std::vector<uint32_t> idxv(kTile);
          C* val = valv.data();
          uint32_t* idx = idxv.data();
          for (size_t j = 0; j < tl; ++j) val[j] = to_compute(tb[int64_t(j) * ki]), idx[j] = 0;
          for_each_run<1>(rp, 0, n_red, [&](size_t ri, size_t rlen, const auto& roffs, const auto& rinner) {
            for (size_t r = (ri == 0 ? 1 : 0); r < rlen; ++r) {
              const T* row = tb + roffs[0] + int64_t(r) * rinner[0];
              const uint32_t ix = uint32_t(ri + r);
              for (size_t j = 0; j < tl; ++j) {
                const C x = to_compute(row[int64_t(j) * ki]);
                const C v = lane_step<Op::kIsMax>(val[j], x);
                if constexpr (!kIsMinMax<Op>) idx[j] = (v != val[j] && !is_nan_val(val[j])) ? ix : idx[j];
                val[j] = v;
              }
            }
          });
          for (size_t j = 0; j < tl; ++j) {
            if constexpr (kIsMinMax<Op>) out[i0 + t0 + j] = cast<T>(val[j]);
            else out[i0 + t0 + j] = idx[j];
          }
        }
      }
    });
  }, std::max(grain, kMinTile));
}

}  // namespace

StoragePtr CpuStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const {
  const char* name = reduce_op_name(op);
  ReduceSplit split = split_reduce_dims(name, l, dims);
  const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  const DType out_dtype = is_arg ? DType::U32 : dtype_;
  const size_t n_out = split.n_out, n_red = split.n_red;
  auto out = new_storage(n_out, out_dtype);
  if (n_out == 0) return out;
  if (n_red == 0) {
    check_empty_reduce(op, name, l);
    std::memset(out->data(), 0, n_out * dtype_size(dtype_));
    return out;
  }
  check_arg_reduce_size(is_arg, name, n_red);
  const Layout &kl = split.kept, &rl = split.red;
  auto kp = plan_strided<1>(kl.shape, {&kl});
  auto rp = plan_strided<1>(rl.shape, {&rl});
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* in = ptr<T>();
    switch (op) {
      case ReduceOp::Sum: reduce_typed(SumAcc<T>{}, in, out->ptr<T>(), kp, rp); break;
      case ReduceOp::Max: reduce_typed(MaxAcc<T>{}, in, out->ptr<T>(), kp, rp); break;
      case ReduceOp::Min: reduce_typed(MinAcc<T>{}, in, out->ptr<T>(), kp, rp); break;
      case ReduceOp::ArgMax: reduce_typed(ArgMaxAcc<T>{}, in, out->ptr<uint32_t>(), kp, rp); break;
      case ReduceOp::ArgMin: reduce_typed(ArgMinAcc<T>{}, in, out->ptr<uint32_t>(), kp, rp); break;
    }
  });
  return out;
}

}  // namespace wick::cpu

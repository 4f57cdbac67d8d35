// CPU element-wise ops: the functors of src/ops/{unary,binary}.hpp applied through strided
// walks. The dtype and op are dispatched once per call, so every inner loop is a plain
// loop over one functor that the compiler can inline and vectorise.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "backend/cpu/vec_math.hpp"
#include "ops/binary.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/op_dispatch.hpp"
#include "ops/unary.hpp"

namespace wick::cpu {
namespace {

// out = f(x) in the compute type, rounded once to T.
template <class T, class F> StoragePtr map_unary(const CpuStorage& s, const Layout& l, F f) {
  auto out = new_storage(l.numel(), dtype_of_v<T>);
  map_strided(out->template ptr<T>(), l.shape, [f](T x) { return cast<T>(f(to_compute(x))); }, {&l}, s.ptr<T>());
  return out;
}

// exp of f32 (and of the 1- and 2-byte floats, which compute in f32) through the vectorised
// kernel of vec_math.hpp: contiguous f32 runs directly, any other run through a small f32
// buffer, so that the result does not depend on the layout.
template <class T> StoragePtr map_exp(const CpuStorage& s, const Layout& l) {
  auto out = new_storage(l.numel(), dtype_of_v<T>);
  T* o = out->template ptr<T>();
  const T* in = s.ptr<T>();
  auto plan = plan_strided<1>(l.shape, {&l});
  parallel_for(plan.numel, [&](size_t b, size_t e) {
    for_each_run<1>(plan, b, e, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
      if constexpr (std::is_same_v<T, float>) {
        if (inner[0] == 1) return exp_f32(in + offs[0], o + i, len);
      }
      constexpr size_t kBuf = 512;
      float buf[kBuf];
      for (size_t j0 = 0; j0 < len; j0 += kBuf) {
        const size_t m = std::min(kBuf, len - j0);
        for (size_t j = 0; j < m; ++j) buf[j] = to_compute(in[int64_t(offs[0]) + int64_t(j0 + j) * inner[0]]);
        exp_f32(buf, buf, m);
        for (size_t j = 0; j < m; ++j) o[i + j0 + j] = cast<T>(buf[j]);
      }
    });
  });
  return out;
}

// out[i] = f(a[..], b[..]). Besides the all-contiguous run, a run where one operand is
// broadcast (inner stride 0, e.g. a bias or a scalar) gets its own tight loop.
template <class Out, class A, class B, class F>
void map_binary(Out* out, const Shape& shape, F f, const Layout& la, const A* a, const Layout& lb, const B* b) {
  auto plan = plan_strided<2>(shape, {&la, &lb});
  parallel_for(plan.numel, [&](size_t begin, size_t end) {
    for_each_run<2>(plan, begin, end, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
      Out* o = out + i;
      const A* pa = a + offs[0];
      const B* pb = b + offs[1];
      if (inner[0] == 1 && inner[1] == 1) {
        for (size_t j = 0; j < len; ++j) o[j] = f(pa[j], pb[j]);
      } else if (inner[0] == 1 && inner[1] == 0) {
        const B y = *pb;
        for (size_t j = 0; j < len; ++j) o[j] = f(pa[j], y);
      } else if (inner[0] == 0 && inner[1] == 1) {
        const A x = *pa;
        for (size_t j = 0; j < len; ++j) o[j] = f(x, pb[j]);
      } else {
        for (size_t j = 0; j < len; ++j) o[j] = f(pa[int64_t(j) * inner[0]], pb[int64_t(j) * inner[1]]);
      }
    });
  });
}

}  // namespace

StoragePtr CpuStorage::affine(const Layout& l, double mul, double add) const {
  return dispatch_dtype(dtype_, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    // Floats: mul/add in the compute type, one rounding at the end. Integers: Candle
    // converts mul/add to the dtype, then the arithmetic wraps.
    uop::Affine<C> f{cast<C>(mul), cast<C>(add)};
    return map_unary<T>(*this, l, f);
  });
}

StoragePtr CpuStorage::powf(const Layout& l, double e) const {
  return dispatch_float(dtype_, "powf", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    return map_unary<T>(*this, l, uop::Powf<C>{C(e)});
  });
}

StoragePtr CpuStorage::elu(const Layout& l, double alpha) const {
  return dispatch_float(dtype_, "elu", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    return map_unary<T>(*this, l, uop::Elu<C>{C(alpha)});
  });
}

StoragePtr CpuStorage::unary(UnaryOp op, const Layout& l) const {
  return dispatch_dtype(dtype_, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    if constexpr (std::is_same_v<compute_t<T>, float>)
      if (op == UnaryOp::Exp) return map_exp<T>(*this, l);
    return with_unary_op(op, [&](auto f) -> StoragePtr {
      using F = decltype(f);
      if constexpr (is_float_v<T> || F::kInt) return map_unary<T>(*this, l, f);
      else float_only(unary_op_name(op), dtype_);
    });
  });
}

StoragePtr CpuStorage::binary(BinaryOp op, const Storage& rhs_s, const Layout& lhs_l, const Layout& rhs_l) const {
  const CpuStorage& rhs = as_cpu(rhs_s);
  auto out = new_storage(lhs_l.numel(), dtype_);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    with_binary_op(op, [&](auto f) {
      map_binary(out->ptr<T>(), lhs_l.shape, [f](T a, T b) { return cast<T>(f(to_compute(a), to_compute(b))); },
                 lhs_l, ptr<T>(), rhs_l, rhs.ptr<T>());
    });
  });
  return out;
}

StoragePtr CpuStorage::cmp(CmpOp op, const Storage& rhs_s, const Layout& lhs_l, const Layout& rhs_l) const {
  const CpuStorage& rhs = as_cpu(rhs_s);
  auto out = new_storage(lhs_l.numel(), DType::U8);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    with_cmp_op(op, [&](auto f) {
      map_binary(out->ptr<uint8_t>(), lhs_l.shape,
                 [f](T a, T b) { return uint8_t(f(to_compute(a), to_compute(b)) ? 1 : 0); }, lhs_l, ptr<T>(), rhs_l,
                 rhs.ptr<T>());
    });
  });
  return out;
}

StoragePtr CpuStorage::where_cond(const Layout& l, const Storage& t_s, const Layout& t_l, const Storage& f_s,
                                  const Layout& f_l) const {
  const CpuStorage& ts = as_cpu(t_s);
  const CpuStorage& fs = as_cpu(f_s);
  auto out = new_storage(l.numel(), ts.dtype());
  dispatch_index_dtype(dtype_, "where_cond", [&](auto ctag) {
    using C = decltype(ctag);
    dispatch_dtype(ts.dtype(), [&](auto vtag) {
      using T = decltype(vtag);
      map_strided(out->ptr<T>(), l.shape, [](C c, T a, T b) { return bop::WhereCond{}(c, a, b); }, {&l, &t_l, &f_l},
                  ptr<C>(), ts.ptr<T>(), fs.ptr<T>());
    });
  });
  return out;
}

}  // namespace wick::cpu

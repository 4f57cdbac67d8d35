// GPU element-wise ops: the functors of src/ops/{unary,binary}.hpp applied by launch_map
// (vectorised when contiguous, by-value strided layouts otherwise). Mirrors
// src/backend/cpu/elementwise.cpp: dtype and op are dispatched once per call on the host,
// half types compute in f32 and round once, float-only ops throw on integers.
#include <string>

#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "ops/binary.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "ops/op_dispatch.hpp"
#include "ops/unary.hpp"

namespace wick::gpu {
namespace {

// out = f(x) in the compute type, rounded once to T.
template <class T, class F> struct UnaryMap {
  F f;
  __device__ T operator()(T x) const { return cast<T>(f(to_compute(x))); }
};
template <class T, class F> struct BinaryMap {
  F f;
  __device__ T operator()(T a, T b) const { return cast<T>(f(to_compute(a), to_compute(b))); }
};
template <class T, class F> struct CmpMap {
  F f;
  __device__ uint8_t operator()(T a, T b) const { return uint8_t(f(to_compute(a), to_compute(b)) ? 1 : 0); }
};
template <class C, class T> struct WhereMap {
  __device__ T operator()(C c, T a, T b) const { return bop::WhereCond{}(c, a, b); }
};

template <class T, class F> StoragePtr map_unary(const GpuStorage& s, const Layout& l, F f) {
  auto out = new_storage(s.ordinal(), l.numel(), dtype_of_v<T>);
  launch_map(s.stream(), out->template ptr<T>(), l.shape, UnaryMap<T, F>{f}, {&l}, s.template ptr<T>());
  return out;
}

}  // namespace

StoragePtr GpuStorage::affine(const Layout& l, double mul, double add) const {
  DeviceGuard g(ordinal());
  return dispatch_dtype(dtype_, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    // Floats: mul/add in the compute type, one rounding at the end. Integers: Candle
    // converts mul/add to the dtype, then the arithmetic wraps.
    return map_unary<T>(*this, l, uop::Affine<C>{cast<C>(mul), cast<C>(add)});
  });
}

StoragePtr GpuStorage::powf(const Layout& l, double e) const {
  DeviceGuard g(ordinal());
  return dispatch_float(dtype_, "powf", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    return map_unary<T>(*this, l, uop::Powf<C>{C(e)});
  });
}

StoragePtr GpuStorage::elu(const Layout& l, double alpha) const {
  DeviceGuard g(ordinal());
  return dispatch_float(dtype_, "elu", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    return map_unary<T>(*this, l, uop::Elu<C>{C(alpha)});
  });
}

StoragePtr GpuStorage::unary(UnaryOp op, const Layout& l) const {
  DeviceGuard g(ordinal());
  return dispatch_dtype(dtype_, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    return with_unary_op(op, [&](auto f) -> StoragePtr {
      using F = decltype(f);
      // Float-only ops are never instantiated for integer types.
      if constexpr (is_float_v<T> || F::kInt) return map_unary<T>(*this, l, f);
      else float_only(unary_op_name(op), dtype_);
    });
  });
}

StoragePtr GpuStorage::binary(BinaryOp op, const Storage& rhs_s, const Layout& lhs_l, const Layout& rhs_l) const {
  const GpuStorage& rhs = as_gpu(rhs_s);
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), lhs_l.numel(), dtype_);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    with_binary_op(op, [&](auto f) {
      // one operand transposed relative to the other (a + b.t()): staged through a tile
      launch_map<true>(stream(), out->ptr<T>(), lhs_l.shape, BinaryMap<T, decltype(f)>{f}, {&lhs_l, &rhs_l}, ptr<T>(),
                 rhs.ptr<T>());
    });
  });
  return out;
}

StoragePtr GpuStorage::cmp(CmpOp op, const Storage& rhs_s, const Layout& lhs_l, const Layout& rhs_l) const {
  const GpuStorage& rhs = as_gpu(rhs_s);
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), lhs_l.numel(), DType::U8);
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    with_cmp_op(op, [&](auto f) {
      launch_map(stream(), out->ptr<uint8_t>(), lhs_l.shape, CmpMap<T, decltype(f)>{f}, {&lhs_l, &rhs_l}, ptr<T>(),
                 rhs.ptr<T>());
    });
  });
  return out;
}

StoragePtr GpuStorage::where_cond(const Layout& l, const Storage& t_s, const Layout& t_l, const Storage& f_s,
                                  const Layout& f_l) const {
  const GpuStorage& ts = as_gpu(t_s);
  const GpuStorage& fs = as_gpu(f_s);
  DeviceGuard g(ordinal());
  auto out = new_storage(ordinal(), l.numel(), ts.dtype());
  dispatch_index_dtype(dtype_, "where_cond", [&](auto ctag) {
    using C = decltype(ctag);
    dispatch_dtype(ts.dtype(), [&](auto vtag) {
      using T = decltype(vtag);
      launch_map(stream(), out->ptr<T>(), l.shape, WhereMap<C, T>{}, {&l, &t_l, &f_l}, ptr<C>(), ts.ptr<T>(),
                 fs.ptr<T>());
    });
  });
  return out;
}

}  // namespace wick::gpu

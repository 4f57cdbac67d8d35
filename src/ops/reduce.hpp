#pragma once
// Accumulators of the reductions, shared by the CPU loops and the GPU kernels. Each has
//   Acc init()                     the identity (sum) or a "nothing seen yet" state,
//   void add(Acc&, T x, idx)       folds element x (at flattened reduced index idx) in,
//   void merge(Acc& a, const Acc& b)  folds a partial b of LATER indices into a,
//   Out finish(const Acc&)         the stored result.
// Merging only ever puts later indices on the right, so "first occurrence wins" is kept
// however the work is split.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/numeric.hpp"

namespace wick {

template <class C> WICK_HD bool is_nan_val(C x) {
  if constexpr (std::is_floating_point_v<C>) return x != x;
  else return false;
}

// Integers add in the matching unsigned type: wraps like the type without signed overflow UB.
template <class A> WICK_HD A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return A(U(U(a) + U(b)));
  } else {
    return a + b;
  }
}

// Sums accumulate in acc_t: f32 for the 1- and 2-byte floats, f64 for f64, the type itself
// for integers (wrapping).
template <class T> struct SumAcc {
  using Acc = acc_t<T>;
  using Out = T;
  WICK_HD Acc init() const { return Acc(0); }
  WICK_HD void add(Acc& a, T x, uint32_t = 0) const { a = wrap_add(a, Acc(to_compute(x))); }
  WICK_HD void merge(Acc& a, const Acc& b) const { a = wrap_add(a, b); }
  WICK_HD Out finish(const Acc& a) const { return cast<T>(a); }
};

// Max and min propagate NaN (PyTorch): once a NaN is in, it stays. The "nothing seen" state
// is carried by a flag so that no sentinel value is needed for any type.
template <class T, bool kMax> struct MinMaxAcc {
  static constexpr bool kIsMax = kMax;
  using C = compute_t<T>;
  struct Acc {
    C v;
    bool any;
  };
  using Out = T;
  WICK_HD Acc init() const { return Acc{C(0), false}; }
  WICK_HD static bool better(C x, C cur) {
    if (is_nan_val(cur)) return false;
    if (is_nan_val(x)) return true;
    return kMax ? x > cur : x < cur;
  }
  WICK_HD void add(Acc& a, T xs, uint32_t = 0) const {
    C x = to_compute(xs);
    if (!a.any || better(x, a.v)) a = Acc{x, true};
  }
  WICK_HD void merge(Acc& a, const Acc& b) const {
    if (b.any && (!a.any || better(b.v, a.v))) a = b;
  }
  WICK_HD Out finish(const Acc& a) const { return cast<T>(a.v); }
};

// Argmax/argmin: the first index of the extreme value; the first NaN wins over everything.
template <class T, bool kMax> struct ArgAcc {
  static constexpr bool kIsMax = kMax;
  using C = compute_t<T>;
  struct Acc {
    C v;
    uint32_t i;
    bool any;
  };
  using Out = uint32_t;
  WICK_HD Acc init() const { return Acc{C(0), 0u, false}; }
  WICK_HD void add(Acc& a, T xs, uint32_t idx) const {
    C x = to_compute(xs);
    if (!a.any || MinMaxAcc<T, kMax>::better(x, a.v)) a = Acc{x, idx, true};
  }
  WICK_HD void merge(Acc& a, const Acc& b) const {
    if (b.any && (!a.any || MinMaxAcc<T, kMax>::better(b.v, a.v))) a = b;
  }
  WICK_HD Out finish(const Acc& a) const { return a.i; }
};

// Max/min as a bare value, starting from the identity (-inf/+inf, an integer type's bounds): no
// "seen" flag and one compare per element, for the GPU's split folds. Any fold order gives the
// same value as MinMaxAcc over a non-empty set (only a NaN's payload could differ).
template <class T, bool kMax> struct MinMaxValueAcc {
  using C = compute_t<T>;
  using Acc = C;
  using Out = T;
  WICK_HD Acc init() const {
    if constexpr (std::is_floating_point_v<C>) return kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  WICK_HD void merge(Acc& a, const Acc& b) const {
    if (is_nan_val(b) || (kMax ? b > a : b < a)) a = b;  // a NaN in a stays: no b compares above it
  }
  WICK_HD void add(Acc& a, T x, uint32_t = 0) const { merge(a, to_compute(x)); }
  WICK_HD Out finish(const Acc& a) const { return cast<T>(a); }
};

template <class T> using MaxAcc = MinMaxAcc<T, true>;
template <class T> using MinAcc = MinMaxAcc<T, false>;
template <class T> using ArgMaxAcc = ArgAcc<T, true>;
template <class T> using ArgMinAcc = ArgAcc<T, false>;

// Sort order of the last-dim arg_sort: NaN after everything ascending, before everything
// descending (PyTorch's descending sort). Equal keys compare false both ways (stable sorts
// keep their order).
template <class C, bool kAscending> struct SortLess {
  WICK_HD bool operator()(C a, C b) const {
    if constexpr (kAscending) {
      if (is_nan_val(a)) return false;
      if (is_nan_val(b)) return true;
      return a < b;
    } else {
      if (is_nan_val(a)) return !is_nan_val(b);
      if (is_nan_val(b)) return false;
      return a > b;
    }
  }
};

}  // namespace wick

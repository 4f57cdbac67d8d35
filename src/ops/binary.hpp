#pragma once
// The math of the binary, comparison and select ops, written once for CPU loops and GPU
// kernels. Operands arrive in the compute type (f32 for the 1- and 2-byte floats).
#include <type_traits>

#include "ops/unary.hpp"

namespace wick::bop {

struct Add {
  template <class T> WICK_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return a + b;
    else return wrap_add(a, b);
  }
};
struct Sub {
  template <class T> WICK_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return a - b;
    else return wrap_sub(a, b);
  }
};
struct Mul {
  template <class T> WICK_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return a * b;
    else return wrap_mul(a, b);
  }
};
// Integers truncate toward zero; x / 0 is 0 (numpy's answer, never a trap) and
// INT_MIN / -1 wraps to INT_MIN.
struct Div {
  template <class T> WICK_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return wrap_neg(a);
      return T(a / b);
    }
  }
};
// NaN in either operand gives NaN (PyTorch maximum/minimum).
struct Maximum {
  template <class T> WICK_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a > b || a != a) ? a : b;
    else return a > b ? a : b;
  }
};
struct Minimum {
  template <class T> WICK_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a < b || a != a) ? a : b;
    else return a < b ? a : b;
  }
};

// Comparisons: IEEE semantics, so NaN compares false except for ne.
struct Eq {
  template <class T> WICK_HD bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  template <class T> WICK_HD bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  template <class T> WICK_HD bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  template <class T> WICK_HD bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  template <class T> WICK_HD bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  template <class T> WICK_HD bool operator()(T a, T b) const { return a >= b; }
};

// where_cond: any nonzero condition value selects on_true. Values are passed through
// untouched (storage type), so no rounding happens.
struct WhereCond {
  template <class C, class T> WICK_HD T operator()(C c, T on_true, T on_false) const {
    return c != C(0) ? on_true : on_false;
  }
};

}  // namespace wick::bop

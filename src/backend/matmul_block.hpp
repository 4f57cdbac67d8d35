#pragma once
// How a matmul operand's inner (rows x cols) block maps to BLAS, shared by the CPU and GPU
// backends so both accept exactly the same layouts. Host-only.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "wick/error.hpp"
#include "wick/layout.hpp"

namespace wick {

// One operand's inner (rows x cols) block as BLAS sees it: row-major with leading dim ld,
// or (trans) the row-major storage of its transpose. The core only sends such blocks.
struct MatmulBlock {
  bool trans = false;
  int64_t ld = 1;
  int64_t rs = 0, cs = 0;  // element strides of the logical block
};

inline MatmulBlock inner_block(const Layout& l, size_t rows, size_t cols, const char* which) {
  const size_t r = l.rank();
  MatmulBlock b;
  b.rs = l.strides[r - 2];
  b.cs = l.strides[r - 1];
  const size_t one = 1;
  if ((cols <= 1 || b.cs == 1) && (rows <= 1 || b.rs >= int64_t(std::max(cols, one)))) {
    b.ld = rows <= 1 ? int64_t(std::max(cols, one)) : b.rs;
  } else if ((rows <= 1 || b.rs == 1) && (cols <= 1 || b.cs >= int64_t(std::max(rows, one)))) {
    b.trans = true;
    b.ld = cols <= 1 ? int64_t(std::max(rows, one)) : b.cs;
  } else {
    throw Error(ErrorKind::Internal, std::string("matmul: the ") + which + " layout " + l.str() +
                                         " is neither row- nor column-major in its last two dims");
  }
  return b;
}

// BLAS takes 32-bit sizes and leading dims.
inline void check_blas_int(int64_t v, const char* what) {
  if (v > int64_t(INT_MAX))
    throw Error(ErrorKind::Unsupported, std::string("matmul: ") + what + " = " + std::to_string(v) +
                                            " exceeds the 32-bit BLAS index range; split the matrix");
}

}  // namespace wick

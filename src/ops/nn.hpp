#pragma once
// The per-element math of the fused nn ops, written once for the CPU loops and the GPU
// kernels. Row statistics (max, sums, mean, variance) are accumulated by each backend in
// compute_t (f32 for half types, f64 for f64); these functions turn them into outputs.
#include "ops/numeric.hpp"
#include "ops/unary.hpp"
#include "wick/config.hpp"

namespace wick::nn {

// softmax: exp(x - max) / sum; log_softmax: x - max - log(sum), where sum = sum(exp(x - max)).
template <class C> WICK_HD C softmax_out(C x, C max, C sum, bool log) {
  return log ? (x - max) - fmath::log(sum) : fmath::exp(x - max) / sum;
}

// 1 / sqrt(ms + eps), with ms = mean(x^2) (rms_norm) or the biased variance (layer_norm).
template <class C> WICK_HD C norm_rstd(C ms, double eps) { return C(1) / fmath::sqrt(ms + C(eps)); }
// The normalised element; mean is 0 for rms_norm. w and b are 1 and 0 when absent.
template <class C> WICK_HD C norm_out(C x, C mean, C rstd, C w, C b) { return (x - mean) * rstd * w + b; }

// silu(a) * b in compute_t.
struct SiluMul {
  template <class C> WICK_HD C operator()(C a, C b) const { return uop::Silu{}(a) * b; }
};

// Rotary embedding of one pair (x0, x1) by the angle whose cos and sin are c and s:
// (x0 c - x1 s, x0 s + x1 c).
template <class C> WICK_HD C rope_first(C x0, C x1, C c, C s) { return x0 * c - x1 * s; }
template <class C> WICK_HD C rope_second(C x0, C x1, C c, C s) { return x0 * s + x1 * c; }

// Where the pair of element (row, j) of a rope input lives. A row is one (b, h, t) or
// (b, t, h) vector of d elements; i is the pair number, which indexes the cos/sin row.
// Interleaved: pair i is (2i, 2i+1); half-split: (i, i + d/2).
struct RopePair {
  size_t first, second;  // positions within the row
  size_t i;              // pair number, 0 <= i < d/2
  bool is_first;         // whether j is the pair's first element
};
WICK_HD RopePair rope_pair(bool interleaved, size_t j, size_t d) {
  const size_t half = d / 2;
  if (interleaved) return {j & ~size_t(1), j | 1, j / 2, (j & 1) == 0};
  const size_t i = j < half ? j : j - half;
  return {i, i + half, i, j < half};
}

}  // namespace wick::nn

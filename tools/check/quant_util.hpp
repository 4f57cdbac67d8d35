#pragma once
// Quantized weights for the parity cases and the benchmarks: random but valid GGUF blocks made
// on the host without the library's quantizers (so a case does not depend on the code it checks),
// and the facts about the activation formats (Q8_0, Q8_1, Q8_K) the parity bounds need.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wick/quant.hpp"
#include "wick/tensor.hpp"

namespace wick::check {

// Block types a QTensor computes with, in the ggml table's order (Q4_0 ... MXFP4).
std::vector<GGMLType> supported_qtypes();

// `rows` rows of `cols` (a multiple of the block size) elements of type t: every quant byte
// random, every scale set to a finite value chosen so that the weights are of order 0.1 to 1
// (f16 d/dmin, Q8_K's f32 d, MXFP4's e8m0 byte 120..124), and the fields ggml keeps for dot
// products only made consistent (Q8_1's s = d * sum(q), Q8_K's bsums). Deterministic in seed.
std::vector<uint8_t> random_qblocks(GGMLType t, size_t rows, size_t cols, uint64_t seed);

// With specials: block 0 of row 0 gets an Inf scale, block 0 of row 1 a NaN scale (MXFP4: the
// e8m0 bytes 255 and 0, its extremes; it has no NaN), so devices can be compared on them.
void set_special_scales(GGMLType t, std::vector<uint8_t>& blocks, size_t rows, size_t cols);

// The types whose dot product with a Q8_1 activation uses the activation's f16 s = d * sum(q)
// for the weight's offset m (w = d * q + m): Q4_1 and Q5_1. Their |m| per block, row-major
// (rows x cols/32), read from the f16 at byte 2 of each block.
bool qtype_uses_q8_1_sum(GGMLType t);
std::vector<double> block_offsets(GGMLType t, const std::vector<uint8_t>& blocks, size_t rows, size_t cols);

// The checks of the quantized parity cases (cases_quant.cpp, where the bounds are derived); each
// throws ReferenceFailure (check/cases.hpp) naming the first element outside its bound.
// y = x @ W^T against the f64 product of x and the CPU's dequantize of w_bytes ((n, k) blocks of t):
// decode or prefill bound.
void check_qmatmul(GGMLType t, const std::vector<uint8_t>& w_bytes, size_t n, size_t k, const Tensor& x,
                   const Tensor& y, bool prefill, const std::string& what);
// Blocks of an activation format t (Q8_0, Q8_1, Q8_K) quantized from the (rows, k) values x.
void check_activation_blocks(GGMLType t, const std::vector<double>& x, const std::vector<uint8_t>& bytes, size_t rows,
                             size_t k, const std::string& what);

}  // namespace wick::check

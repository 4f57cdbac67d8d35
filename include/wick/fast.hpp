#pragma once
// Fused ops for an LLM decode step: each returns what a composition of general ops
// (wick/tensor.hpp, wick/quant.hpp) returns, in fewer kernels on a GPU. They live apart from
// Tensor and QTensor, as mlx/fast.h does beside mlx/ops.h, because their shapes follow one
// workload's kernels rather than the tensor algebra. The CPU runs the composed ops.
// Implemented beside their general ops: src/core/tensor_nn.cpp (norms, silu_mul, rope),
// src/core/tensor_linalg.cpp (matmul_swiglu), src/core/quant.cpp (the quantized products).
#include <cstddef>
#include <optional>
#include <tuple>
#include <utility>

#include "wick/quant.hpp"
#include "wick/tensor.hpp"

namespace wick::fast {

// The Q8_1 outputs below are the bytes QTensor::quantize(y, GGMLType::Q8_1) gives: a GPU writes
// them in the producing kernel, so matmul_t_q8_1 runs no quantization kernel of its own. They need
// an f32, f16 or bf16 result whose last dim is a multiple of 32.

// {x.rms_norm(weight, eps), its rows in Q8_1}.
std::pair<Tensor, QTensor> rms_norm_q8_1(const Tensor& x, const Tensor& weight, double eps);
// {sum, normed} = x.add_rms_norm(residual, weight, eps), and normed's rows in Q8_1.
std::tuple<Tensor, Tensor, QTensor> add_rms_norm_q8_1(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                      double eps);
// {gate.silu_mul(up), its rows in Q8_1}.
std::pair<Tensor, QTensor> silu_mul_q8_1(const Tensor& gate, const Tensor& up);

// w.matmul_t(x), given x's rows already in Q8_1 (x_q8_1 of x's shape and device, from one of the
// three above or QTensor::quantize): a matrix-vector path on Q8_1 activations (the GPU's, for 1, 2,
// 4 or 8 rows) reads those bytes instead of quantizing x; the result is w.matmul_t(x)'s. An
// undefined x_q8_1 is w.matmul_t(x).
Tensor matmul_t_q8_1(const QTensor& w, const Tensor& x, const QTensor& x_q8_1);

// {x + residual, (x + residual).rms_norm(weight, eps) @ w^T} (residual undefined: {x,
// x.rms_norm(weight, eps) @ w^T}). One contiguous row on a GPU, where the matrix-vector kernel
// takes the product (Q4_0 / Q8_0, k a multiple of 256 and >= 4096, n >= 8192), is one kernel whose
// blocks each normalise x: the sum bit for bit, the product within the rounding of the norm's sum
// of squares (reduced in another order). Anything else runs the composed ops, with their checks.
std::pair<Tensor, Tensor> add_rms_norm_matmul_t(const QTensor& w, const Tensor& x, const Tensor& residual,
                                                const Tensor& weight, double eps);

// x.matmul(rhs).swiglu() (the product's last dim even: its first half is the gate). A GPU runs one
// f16 row against a row-major weight's transpose (a stacked gate/up product) as one kernel where
// its matrix-vector tuning allows: each product rounded to f16 before silu, as matmul's, summed in
// its own order (within matmul's rounding). Float dtypes.
Tensor matmul_swiglu(const Tensor& x, const Tensor& rhs);

// Rotary embedding and KV-cache append in one pass (one kernel on a GPU, where rope and two
// slice_set copies are three). qk (b, h_q + h_kv, t, d) holds q_heads q heads, then the k heads;
// v is (b, h_kv, t, d_v); k_cache (b, h_kv, capacity, d) and v_cache (b, h_kv, capacity, d_v) are
// views (any strides) of qk's dtype and device. Returns the rotated q heads (b, h_q, t, d) and
// writes the rotated k heads and v at rows [start, start + t) of dim 2 of the caches; start is one
// integer read by the device (a captured graph replays at a new position), clamped as slice_set's.
// The same numbers as rope (rope_i when interleaved) then two slice_set calls.
Tensor rope_kv_append(const Tensor& qk, const Tensor& cos, const Tensor& sin, bool interleaved, size_t q_heads,
                      const Tensor& v, Tensor& k_cache, Tensor& v_cache, const Tensor& start);

// Attention of a batch of sequences over a paged KV cache, after writing the batch's own keys and values
// into it: what, for each token, writing every token's k and v row and then attention over the rows of its
// sequence's keys gives, without a gather of each sequence's keys.
// - q (t, h_q, d), k (t, h_kv, d), v (t, h_kv, d_v): the batch's tokens, any mix of sequences, f16, bf16 or
//   f32 (one dtype); h_q a multiple of h_kv.
// - k_cache (rows, h_kv * d), v_cache (rows, h_kv * d_v): contiguous, f16, bf16, f32 or f8e4m3 (one dtype;
//   rows are converted on write and widened to f32 on read); row r = block * block_size + i.
// - slot (t): the cache row token i's k and v are written to; seq (t): its sequence, a row of block_table
//   (n_seqs, max_blocks); pos (t): its position. All i32 on q's device, read by the device.
// Token i attends over its sequence's keys at positions max(0, pos - window + 1) .. pos (window 0: from 0):
// position p's key and value are at row block_table[seq, p / block_size] * block_size + p % block_size. scale
// defaults to 1/sqrt(d). Returns (t, h_q, d_v) in q's dtype. Indices are clamped into range as slice_set's
// start is (a slot or block past the cache, a sequence or position past the table), not errors: checking them
// would need a host read. Two tokens with one slot: one of their rows is written.
Tensor paged_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                       const Tensor& slot, const Tensor& block_table, const Tensor& seq, const Tensor& pos,
                       size_t block_size, size_t window = 0, std::optional<double> scale = std::nullopt);

}  // namespace wick::fast

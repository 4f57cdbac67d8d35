#pragma once
// Vectorised f32 math for the CPU loops where libm's scalar call is the bottleneck.
// glibc's expf costs about 3 ns per element (2.9 ms per 1M floats on one core here) and the
// compiler cannot vectorise a call to it without -ffast-math, so `exp` of 1M floats took 3.3x
// NumPy's time on 2 cores (NumPy has an AVX-512 exp); this kernel: 0.37 ns (AVX-512), 0.6 (AVX2).
// The kernels are compiled for several x86 ISAs and the widest one the CPU has is chosen once.
#include <cstddef>
#include <cstdint>

namespace wick::cpu {

enum class VecIsa { Generic, Avx2, Avx512 };  // Generic: 16-byte vectors (SSE2, NEON)

VecIsa best_vec_isa();                 // the widest this CPU and OS support (checked once)
const char* vec_isa_name(VecIsa isa);  // "generic", "avx2", "avx512f"

// out[i] = exp(in[i]) for n contiguous floats (in == out allowed). Error < 1 ulp against the
// exact result on every ISA (all 2^32 inputs: 0.99 ulp with FMA, 0.96 without; glibc: 0.5), overflow to
// inf and underflow to 0 at the same inputs as glibc, NaN stays NaN. AVX2 and AVX-512 (FMA) give
// the same bits; the generic variant (no FMA on SSE2) may differ from them in the last bit.
void exp_f32(const float* in, float* out, size_t n);
void exp_f32(const float* in, float* out, size_t n, VecIsa isa);  // isa must be <= best_vec_isa()

// out[i] = silu(a[i]) * b[i]: uop::Sigmoid's formula (z = exp(-|a|), s = 1 / (1 + z), a >= 0 ? s :
// z s) with the exp above, all in vector registers (in == out allowed). libm's scalar expf was the
// largest serial cost of a CPU decode step after the matvecs (silu_mul of a 5632-wide FFN row per layer).
void silu_mul_f32(const float* a, const float* b, float* out, size_t n);

// Attention's inner loop (nn.cpp): m <= kAttnSetRows query rows q (d floats each, ldq apart, already
// times the scale) sharing one KV head, row r seeing keys [0, n_keys[r]), in an online softmax over
// steps of kAttnKeyLanes keys: the scores of a step as one vector per row (q's elements broadcast
// against kt), exp, the rescale and P V in vector registers. kt holds the head's keys transposed in
// blocks of 16 ([block][d][16] floats, anything past the last key: its lanes are masked); value row
// j is at v + j * ldv (dv floats). out: m rows of dv floats. A row with no keys gives NaN (0 / 0).
constexpr size_t kAttnSetRows = 8, kAttnKeyLanes = 16;
void attention_set_f32(const float* q, size_t ldq, const size_t* n_keys, size_t m, const float* kt, const float* v,
                       size_t ldv, size_t d, size_t dv, float* out);

// out[i] = the f32 value of the IEEE half in[i] (bits, as wick::f16 stores them): exact, the bits of
// f16_bits_to_f32 (dtype.hpp). F16C where the CPU has it (8 at a time; a group holding an inf or NaN
// goes through f16_bits_to_f32, since F16C sets a signalling NaN's quiet bit). Attention converts
// an f16 KV cache with it once per step; the bit-by-bit conversion was a tenth of its time.
void f16_to_f32(const uint16_t* in, float* out, size_t n);

}  // namespace wick::cpu

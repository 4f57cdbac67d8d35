#pragma once
// Integer dot products of quantized weight rows with quantized activation rows, for the CPU
// quantized matmul (qmatmul.cpp). Three kernel sets: portable scalar (qdot_scalar.cpp), AVX2 + FMA
// (qdot_avx2.cpp) and AVX-512 BW/VL + VNNI (qdot_avx512.cpp), the SIMD ones compiled with their
// own flags (CMakeLists.txt) and chosen at run time.
//
// Activations are quantized as llama.cpp does (x rows once per call): Q8_0 blocks of 32 for the
// 32-element weight types, Q8_K blocks of 256 for the k-quants and IQ4_XS. The blocks are then
// repacked into XRow below (the same numbers, laid out for vector loads) with the integer sums
// the weight offsets need (exact, where llama.cpp's Q8_1 keeps an f16 d * sum).
#include <cstddef>
#include <cstdint>

#include "backend/cpu/qdot_kernels.hpp"
#include "wick/quant.hpp"

namespace wick::cpu::qdot {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };
const char* isa_name(Isa isa);

// The kernel level in use: WICK_CPU_ISA (scalar, avx2, avx512; read once) capped at what the CPU
// supports, else the best the CPU supports. set_isa changes it (tests force each level); asking
// for more than the CPU has is Error(Unsupported).
Isa active_isa();
Isa best_isa();  // what the CPU supports
void set_isa(Isa isa);

// The activation format of weight type t: Q8_0 (32-element types) or Q8_K (256).
GGMLType act_type(GGMLType t);

// The kernel for weight type t at level isa; a level without its own kernel for t gives the next
// lower level's (every type has a scalar one).
RowDot kernel(GGMLType t, Isa isa);

RowDot scalar_kernel(GGMLType t);  // every supported type

// The prefill panel kernel of weight type t at level isa (qdot_kernels.hpp); pack is nullptr where
// there is none (below AVX-512, or a type without one): such products take kernel(t, isa).
PanelKernel panel_kernel(GGMLType t, Isa isa);

// One row of nb * 32 floats as Q8_0 activations (XRow's q, d, s, sd; qn for whole groups of 4
// blocks when it is not null): the bytes quant::quantize_block_q8_0 writes, at every level (the
// AVX-512 level vectorises it; the encoder's scalar roundf was most of a decode step's serial time).
void quantize_row_q8_0(const float* x, size_t nb, int8_t* q, float* d, int32_t* s, float* sd, int8_t* qn, Isa isa);

// One row of nb * 256 floats as Q8_K activations (XRow's q, d, bs): the bytes
// quant::quantize_block_q8_K writes, at every level (the AVX-512 level vectorised; prefill spent
// 7% of a step in the scalar encoder).
void quantize_row_q8_K(const float* x, size_t nb, int8_t* q, float* d, int16_t* bs, Isa isa);

}  // namespace wick::cpu::qdot

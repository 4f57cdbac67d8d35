#pragma once
// The fused attention kernel of attention_flash.cu, as kernels/attention.cu calls it.
#include <cstdint>

#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

// A q, k or v operand: p points at element (0, 0, 0, 0) (storage offset applied), the last dim
// is unit-stride and sb, sh, st are the element strides of the b, h and t dims.
struct FlashOperand {
  const void* p = nullptr;
  int64_t sb = 0, sh = 0, st = 0;
};

// Whether flash_attention takes this call: f16/bf16, head dims d == d_v in {64, 128}, 16-byte
// aligned rows, an NVIDIA device of sm_80 or newer running the kernel's sm_80+ code. False on
// HIP builds: AMD keeps the chunked GEMM path (a rocWMMA/MFMA kernel is future work).
bool flash_attention_supported(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k,
                               const FlashOperand& v, const AttentionDims& a);
// out: (b, h_q, t_q, d_v) contiguous. Only after flash_attention_supported said true.
void flash_attention(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                     void* out, const AttentionDims& a);

}  // namespace wick::gpu

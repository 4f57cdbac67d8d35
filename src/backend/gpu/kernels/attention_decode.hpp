#pragma once
// Decode attention (attention_decode.cu), as kernels/attention.cu calls it.
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/attention_flash.hpp"  // FlashOperand: pointer at (0,0,0,0) + b, h, t strides

namespace wick::gpu {

// Whether attention_decode takes this call: f16/bf16, at most 8 query rows per KV head
// (h_q / h_kv * t_q: one token of a grouped-query model, or a few tokens without groups), head dims
// up to 256, k rows 16-byte aligned. Any GPU (the portable path; AMD included). Long enough caches
// only, unless a.kv_len is set: the kernels read those lengths on the device, so they take it anyway.
bool attention_decode_supported(DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                                const AttentionDims& a);
// out: (b, h_q, t_q, d_v) contiguous. Only after attention_decode_supported said true.
void attention_decode(DeviceContext& ctx, int ordinal, DType dt, const FlashOperand& q, const FlashOperand& k,
                      const FlashOperand& v, void* out, const AttentionDims& a);

}  // namespace wick::gpu

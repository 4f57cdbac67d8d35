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

// The kernels' arguments (attention_flash.cu, attention_flash_wgmma.cu): T's operands, element strides.
template <class T> struct FlashParams {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  int64_t q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st;
  int64_t t_q, t_kv, shift;  // causal: query i sees keys j <= i + shift
  int h_q, group;
  float scale_log2;  // scale * log2(e): the softmax runs on exp2
  bool causal;
};
template <class T>
FlashParams<T> flash_params(const FlashOperand& q, const FlashOperand& k, const FlashOperand& v, void* out,
                            const AttentionDims& a) {
  FlashParams<T> p;
  p.q = static_cast<const T*>(q.p);
  p.k = static_cast<const T*>(k.p);
  p.v = static_cast<const T*>(v.p);
  p.o = static_cast<T*>(out);
  p.q_sb = q.sb, p.q_sh = q.sh, p.q_st = q.st;
  p.k_sb = k.sb, p.k_sh = k.sh, p.k_st = k.st;
  p.v_sb = v.sb, p.v_sh = v.sh, p.v_st = v.st;
  p.t_q = int64_t(a.t_q);
  p.t_kv = int64_t(a.t_kv);
  p.shift = int64_t(a.t_kv) - int64_t(a.t_q);
  p.h_q = int(a.h_q);
  p.group = int(a.h_q / a.h_kv);
  p.scale_log2 = float(a.scale * 1.4426950408889634);
  p.causal = a.causal;
  return p;
}
// Key tiles of bn keys that query rows [first, first + rows) see: none when first >= t_q; else all of
// t_kv, or (causal) up to the last valid row's last key (<= t_kv: shift = t_kv - t_q).
template <class T>
__host__ __device__ inline int flash_tiles_seen(const FlashParams<T>& p, int64_t first, int64_t rows, int bn) {
  if (first >= p.t_q) return 0;
  const int64_t last = (first + rows < p.t_q ? first + rows : p.t_q) - 1;
  const int64_t end = p.causal ? last + p.shift + 1 : p.t_kv;
  return int((end + bn - 1) / bn);
}

// The Hopper kernel (attention_flash_wgmma.cu, built for sm_90a where the CUDA targets include 90):
// whether it takes a call flash_attention_supported accepted (d 128 on a compute capability 9.0
// device; WICK_FLASH_WGMMA=0 keeps the mma.sync kernel, to compare), and the launch.
bool flash_wgmma_supported(DeviceContext& ctx, const AttentionDims& a);
void flash_wgmma(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                 void* out, const AttentionDims& a);

// Whether flash_attention takes this call: f16/bf16, head dims d == d_v in {64, 128}, 16-byte
// aligned rows, an NVIDIA device of sm_80 or newer running the kernel's sm_80+ code. False on
// HIP builds: AMD keeps the chunked GEMM path (a rocWMMA/MFMA kernel is future work).
bool flash_attention_supported(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k,
                               const FlashOperand& v, const AttentionDims& a);
// out: (b, h_q, t_q, d_v) contiguous. Only after flash_attention_supported said true.
void flash_attention(DeviceContext& ctx, DType dt, const FlashOperand& q, const FlashOperand& k, const FlashOperand& v,
                     void* out, const AttentionDims& a);

}  // namespace wick::gpu

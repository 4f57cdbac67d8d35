// Scaled dot-product attention on the GPU without the full t_q x t_kv score matrix: the
// queries go in chunks of rows. Per chunk (all batches and heads at once) a strided-batched
// GEMM writes the scores S = scale * Q K^T in f32 (f64 for f64), a row kernel turns each row
// into probabilities P (softmax in f32, masked keys 0, stored in the input dtype) and a second
// GEMM writes O = P V straight into the output. A causal chunk only uses the keys its last
// row can see, which halves the work of a square causal attention.
#include <algorithm>
#include <climits>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/gpu/blas.hpp"
#include "backend/gpu/device_utils.cuh"
#include "backend/gpu/gpu_storage.hpp"
#include "backend/gpu/kernels/attention_decode.hpp"
#include "backend/gpu/kernels/attention_flash.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/nn.hpp"
#include "ops/numeric.hpp"
#include "ops/positions.hpp"
#include "ops/unary.hpp"

namespace wick::gpu {

namespace {

constexpr int kRowBlock = tune::kAttnRowBlock;

// Online softmax statistics of a set of scores: their max m and l = sum exp(x - m). An empty
// set is (-inf, 0).
template <class A> __device__ __forceinline__ void stats_add(A& m, A& l, A x) {
  if (x > m) {
    l = l * fmath::exp(m - x) + A(1);  // exp(-inf) = 0 for the first score
    m = x;
  } else {
    l += fmath::exp(x - m);  // NaN scores propagate through l
  }
}
template <class A> __device__ __forceinline__ void stats_merge(A& m, A& l, A m2, A l2) {
  const A ninf = -std::numeric_limits<A>::infinity();
  const A mx = m2 > m ? m2 : m;
  l = (m == ninf ? A(0) : l * fmath::exp(m - mx)) + (m2 == ninf ? A(0) : l2 * fmath::exp(m2 - mx));
  m = mx;
}

// Every thread of the block gets the block's (m, l): warp shuffles, then each thread merges
// the per-warp results from shared memory in the same order (works for 32- and 64-lane warps).
template <class A> __device__ void block_stats(A& m, A& l) {
  __shared__ A sm[kMaxWarpsPerBlock], sl[kMaxWarpsPerBlock];
  for (int o = kWarpSize / 2; o > 0; o >>= 1) {
    const A m2 = shfl_xor(m, o), l2 = shfl_xor(l, o);
    stats_merge(m, l, m2, l2);
  }
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int nwarps = int(blockDim.x) / kWarpSize;
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
  __syncthreads();
  m = sm[0];
  l = sl[0];
  for (int w = 1; w < nwarps; ++w) stats_merge(m, l, sm[w], sl[w]);
}

// One block per score row (row = batch * rows + r, query r0 + r). Reads the row's visible
// scores s (V at a time), writes p = exp(s - max) / sum for them and 0 for masked keys. p may
// alias s (same element size): each element is read and written by the same thread, and the
// barrier in block_stats orders every first-pass read before any write.
template <class A, class P, int V>
__global__ void WICK_LAUNCH_BOUNDS(kRowBlock)
    softmax_rows_kernel(const A* s, P* p, int64_t rows, int64_t keys, int64_t r0, int64_t shift, bool causal) {
  kernel_entry();
  const int64_t row = blockIdx.x;
  const int64_t qi = r0 + row % rows;
  const int64_t vis = causal ? (qi + shift + 1 < keys ? qi + shift + 1 : keys) : keys;
  const A* sr = s + row * keys;
  P* pr = p + row * keys;
  A m = -std::numeric_limits<A>::infinity(), l = A(0);
  const int64_t nv = vis / V;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    const VecOf<A, V> x = reinterpret_cast<const VecOf<A, V>*>(sr)[i];
#pragma unroll
    for (int j = 0; j < V; ++j) stats_add(m, l, x.v[j]);
  }
  for (int64_t j = nv * V + threadIdx.x; j < vis; j += blockDim.x) stats_add(m, l, sr[j]);
  block_stats(m, l);

  const int64_t nk = keys / V;
  for (int64_t i = threadIdx.x; i < nk; i += blockDim.x) {
    VecOf<P, V> o;
    if ((i + 1) * V <= vis) {
      const VecOf<A, V> x = reinterpret_cast<const VecOf<A, V>*>(sr)[i];
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = cast<P>(nn::softmax_out(x.v[j], m, l, false));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t e = i * V + j;
        o.v[j] = cast<P>(e < vis ? nn::softmax_out(sr[e], m, l, false) : A(0));
      }
    }
    reinterpret_cast<VecOf<P, V>*>(pr)[i] = o;
  }
  for (int64_t e = nk * V + threadIdx.x; e < keys; e += blockDim.x)
    pr[e] = cast<P>(e < vis ? nn::softmax_out(sr[e], m, l, false) : A(0));
}

// A q/k/v operand as BLAS reads it: data pointer, element offset and the b, h, t strides (the
// t stride is the leading dim). A layout BLAS cannot take (a t stride below the row length,
// negative strides) is replaced by a contiguous copy, kept alive in `hold`.
struct Operand {
  StoragePtr hold;
  const char* base = nullptr;
  int64_t off = 0, sb = 0, sh = 0, st = 0;
};

Operand make_operand(const GpuStorage& s, const Layout& l) {
  const int64_t t = int64_t(l.shape[2]), d = int64_t(l.shape[3]), ld_min = std::max<int64_t>(d, 1);
  int64_t str[3];
  bool ok = true;
  for (int i = 0; i < 3; ++i) {
    str[i] = l.shape[i] <= 1 ? 0 : l.strides[i];  // a size-1 dim's stride never moves
    ok = ok && str[i] >= 0;
  }
  if (t > 1) ok = ok && str[2] >= ld_min && str[2] <= int64_t(INT_MAX);
  if (d > 1) ok = ok && l.strides[3] == 1;
  Operand o;
  if (ok) {
    o.base = static_cast<const char*>(s.data());
    o.off = int64_t(l.offset);
    o.sb = str[0];
    o.sh = str[1];
    o.st = t > 1 ? str[2] : ld_min;
    return o;
  }
  o.hold = s.try_clone(l);
  o.base = static_cast<const char*>(as_gpu(*o.hold).data());
  o.sh = t * d;
  o.sb = int64_t(l.shape[1]) * o.sh;
  o.st = ld_min;
  return o;
}

void check_int(int64_t v, const char* what) {
  if (v > int64_t(INT_MAX))
    throw Error(ErrorKind::Unsupported, std::string("attention: ") + what + " = " + std::to_string(v) +
                                            " exceeds the 32-bit BLAS range; split the batch or the sequence");
}

template <class T>
void run_attention(const GpuStorage& self, const Operand& q, const Operand& k, const Operand& v, T* out,
                   const AttentionDims& a) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;  // scores and softmax
  constexpr bool kInPlace = sizeof(A) == sizeof(T);                          // f32/f64: P overwrites S
  constexpr int V = int(16 / sizeof(A));
  DeviceContext& ctx = self.ctx();
  const DType dt = dtype_of_v<T>, st = dtype_of_v<A>;
  const int64_t b = int64_t(a.b), hkv = int64_t(a.h_kv), group = int64_t(a.h_q / a.h_kv);
  const int64_t tq = int64_t(a.t_q), tkv = int64_t(a.t_kv), d = int64_t(a.d), dv = int64_t(a.d_v);
  const int64_t es = int64_t(sizeof(T));

  // q head j * group + g reads kv head j: for a fixed g, one batched call runs over the
  // (b, h_kv) pairs when each operand's batch stride continues its (grouped) head stride;
  // otherwise the host loops over b.
  const bool merged = b == 1 || hkv == 1 ||
                      (q.sb == hkv * group * q.sh && k.sb == hkv * k.sh && v.sb == hkv * v.sh);
  const int64_t nb = merged ? b * hkv : hkv, nloop = merged ? 1 : b;
  const int64_t q_bs = merged && hkv == 1 ? q.sb : group * q.sh;
  const int64_t k_bs = merged && hkv == 1 ? k.sb : k.sh;
  const int64_t v_bs = merged && hkv == 1 ? v.sb : v.sh;
  const int64_t o_sh = tq * dv, o_bs = group * o_sh;  // output (b, h_q, t_q, d_v) contiguous
  check_int(nb, "batch * kv heads");
  check_int(tkv, "t_kv");
  check_int(d, "head_dim");
  check_int(dv, "v head_dim");

  int64_t rows = std::min<int64_t>(tq, tune::kAttnRows);
  while (rows > 1 && double(nb) * double(rows) * double(tkv) * sizeof(A) > double(tune::kAttnScoreBytes))
    rows = (rows + 1) / 2;
  check_int(nb * rows, "batch * kv heads * query rows");
  const size_t elems = size_t(nb * rows * tkv);
  Scratch s_buf(self.ordinal(), elems * sizeof(A));
  std::unique_ptr<Scratch> p_buf;
  if (!kInPlace) p_buf = std::make_unique<Scratch>(self.ordinal(), elems * sizeof(T));
  A* S = static_cast<A*>(s_buf.b.ptr);
  T* P = kInPlace ? reinterpret_cast<T*>(S) : static_cast<T*>(p_buf->b.ptr);

  const int64_t shift = tkv - tq;  // causal: query i sees keys j <= i + shift (tkv >= tq then)
  for (int64_t r0 = 0; r0 < tq; r0 += rows) {
    const int64_t rc = std::min(rows, tq - r0);
    const int64_t keys = a.causal ? std::min(tkv, r0 + rc + shift) : tkv;
    const bool vec = keys % V == 0 && aligned16(S) && aligned16(P);
    for (int64_t bi = 0; bi < nloop; ++bi) {
      for (int64_t g = 0; g < group; ++g) {
        const int64_t bq = merged ? 0 : bi * q.sb, bk = merged ? 0 : bi * k.sb, bv = merged ? 0 : bi * v.sb;
        const char* qp = q.base + (q.off + bq + g * q.sh + r0 * q.st) * es;
        const char* kp = k.base + (k.off + bk) * es;
        const char* vp = v.base + (v.off + bv) * es;
        T* op = out + (merged ? 0 : bi * int64_t(a.h_q) * o_sh) + g * o_sh + r0 * dv;
        if (d == 0) {
          check(gpuMemsetAsync(S, 0, size_t(nb * rc * keys) * sizeof(A), self.stream()), "MemsetAsync");
        } else {
          blas_gemm_rm(ctx, dt, st, false, true, int(rc), int(keys), int(d), a.scale, qp, int(q.st), q_bs, kp,
                       int(k.st), k_bs, S, int(keys), rc * keys, int(nb));
        }
        const unsigned grid = unsigned(nb * rc);
        if (vec)
          launch_kernel(softmax_rows_kernel<A, T, V>, grid, kRowBlock, 0, self.stream(), S, P, rc, keys, r0, shift,
                        a.causal);
        else
          launch_kernel(softmax_rows_kernel<A, T, 1>, grid, kRowBlock, 0, self.stream(), S, P, rc, keys, r0, shift,
                        a.causal);
        check_launch("attention(softmax)");
        blas_gemm_rm(ctx, dt, dt, false, false, int(rc), int(dv), int(keys), 1.0, P, int(keys), rc * keys, vp,
                     int(v.st), v_bs, op, int(dv), o_bs, int(nb));
      }
    }
  }
}

// Runs attention into out ((b, h_q, t_q, d_v) contiguous) on the path that fits. With a.kv_len
// only the decode kernel reads the lengths (on the device); false if it cannot take the call.
bool attention_paths(const GpuStorage& self, const Layout& q_l, const GpuStorage& ks, const Layout& k_l,
                     const GpuStorage& vs, const Layout& v_l, const AttentionDims& a, void* out) {
  const DType dt = self.dtype();
  const Operand q = make_operand(self, q_l), k = make_operand(ks, k_l), v = make_operand(vs, v_l);
  // f16/bf16 with head dim 64/128 on NVIDIA sm_80+: the fused kernel (attention_flash.cu).
  const auto flash_op = [](const Operand& o, int64_t es) {
    return FlashOperand{o.base + o.off * es, o.sb, o.sh, o.st};
  };
  const int64_t es = int64_t(dtype_size(dt));
  const FlashOperand fq = flash_op(q, es), fk = flash_op(k, es), fv = flash_op(v, es);
  // A few query rows per KV head (decode): the keys split over blocks (attention_decode.cu).
  if (attention_decode_supported(dt, fq, fk, fv, a)) {
    attention_decode(self.ctx(), self.ordinal(), dt, fq, fk, fv, out, a);
    return true;
  }
  if (a.kv_len) return false;
  if (flash_attention_supported(self.ctx(), dt, fq, fk, fv, a)) {
    flash_attention(self.ctx(), dt, fq, fk, fv, out, a);
    return true;
  }
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, float> ||
                  std::is_same_v<T, double>) {
      run_attention<T>(self, q, k, v, static_cast<T*>(out), a);
    } else {
      throw Error(ErrorKind::DType, std::string("attention: needs f16, bf16, f32 or f64, got ") + dtype_name(dt) +
                                        "; convert q, k and v with to_dtype(DType::F16)");
    }
  });
  return true;
}

// The clamped kv_len of every batch, read to the host: this synchronises the stream (so a call
// that needs it cannot be captured into a graph).
std::vector<size_t> kv_lens_on_host(const GpuStorage& self, const AttentionDims& a) {
  const GpuStorage& s = as_gpu(*a.kv_len);
  const size_t es = dtype_size(s.dtype());
  const int64_t span = int64_t(a.b - 1) * a.kv_len_stride;
  const int64_t first = int64_t(a.kv_len_offset) + std::min<int64_t>(span, 0);
  const size_t count = size_t(span < 0 ? -span : span) + 1;
  std::vector<char> buf(count * es);
  check(gpuMemcpyAsync(buf.data(), static_cast<const char*>(s.data()) + first * int64_t(es), count * es,
                       gpuMemcpyDeviceToHost, self.stream()),
        "MemcpyAsync(D2H)");
  check(gpuStreamSynchronize(self.stream()), "StreamSynchronize");
  std::vector<size_t> lens(a.b);
  for (size_t bi = 0; bi < a.b; ++bi) {
    const int64_t i = int64_t(a.kv_len_offset) + int64_t(bi) * a.kv_len_stride - first;
    lens[bi] =
        size_t(pos::clamp_kv_len(pos::load(buf.data(), s.dtype(), i), int64_t(a.t_q), int64_t(a.t_kv), a.causal));
  }
  return lens;
}

}  // namespace

StoragePtr GpuStorage::attention(const Layout& q_l, const Storage& k_s, const Layout& k_l, const Storage& v_s,
                                 const Layout& v_l, const AttentionDims& a) const {
  DeviceGuard g(ordinal());
  const size_t n = a.b * a.h_q * a.t_q * a.d_v;
  auto out = new_storage(ordinal(), n, dtype_);
  if (n == 0) return out;  // also covers t_kv == 0 (the core refuses it otherwise)
  const GpuStorage &ks = as_gpu(k_s), &vs = as_gpu(v_s);
  if (attention_paths(*this, q_l, ks, k_l, vs, v_l, a, out->data())) return out;
  // kv_len on a shape the decode kernel does not run (f32/f64, many query rows, ...): each batch
  // on its first L_bi keys through the usual paths, with the lengths read to the host.
  const std::vector<size_t> lens = kv_lens_on_host(*this, a);
  const size_t per_batch = a.h_q * a.t_q * a.d_v * dtype_size(dtype_);
  for (size_t bi = 0; bi < a.b; ++bi) {
    const auto batch = [bi](const Layout& l, size_t t) {
      Shape s = l.shape;
      s[0] = 1;
      s[2] = t;
      return Layout(s, l.strides, size_t(int64_t(l.offset) + int64_t(bi) * l.strides[0]));
    };
    AttentionDims ab = a;
    ab.b = 1;
    ab.t_kv = lens[bi];
    ab.kv_len = nullptr;
    attention_paths(*this, batch(q_l, a.t_q), ks, batch(k_l, lens[bi]), vs, batch(v_l, lens[bi]), ab,
                    static_cast<char*>(out->data()) + bi * per_batch);
  }
  return out;
}

}  // namespace wick::gpu

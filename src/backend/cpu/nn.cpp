// CPU fused nn ops: row-wise softmax / norms, rotary embeddings, silu_mul and attention. The
// per-element math is src/ops/nn.hpp's; here are the loops. Half types (and f8) are read into
// compute_t (f32) rows once, accumulated in compute_t and rounded once at the output.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_storage.hpp"
#include "backend/cpu/strided.hpp"
#include "backend/cpu/vec_math.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/nn.hpp"
#include "ops/numeric.hpp"
#include "ops/op_dispatch.hpp"
#include "ops/positions.hpp"

namespace wick::cpu {
namespace {

// Rows per parallel chunk so that one chunk holds about kParallelGrain units of work.
size_t row_grain(size_t work_per_row) { return std::max<size_t>(1, kParallelGrain / std::max<size_t>(1, work_per_row)); }

// Row r of a contiguous (rows, cols) view as compute_t: the storage itself when T is already
// the compute type, else converted into buf.
template <class T> const compute_t<T>* row_in(const T* x, size_t cols, std::vector<compute_t<T>>& buf) {
  if constexpr (std::is_same_v<T, compute_t<T>>) {
    return x;
  } else {
    buf.resize(cols);
    for (size_t j = 0; j < cols; ++j) buf[j] = to_compute(x[j]);
    return buf.data();
  }
}

}  // namespace

StoragePtr CpuStorage::softmax_last_dim(const Layout& l, bool log) const {
  const size_t n = l.numel();
  auto out = new_storage(n, dtype_);
  if (n == 0) return out;
  const size_t cols = l.shape.back(), rows = n / cols;
  return dispatch_float(dtype_, log ? "log_softmax_last_dim" : "softmax_last_dim", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = ptr<T>() + l.offset;
    T* o = out->template ptr<T>();
    parallel_for(rows, [&](size_t r0, size_t r1) {
      std::vector<C> buf;
      for (size_t r = r0; r < r1; ++r) {
        const C* xr = row_in(x + r * cols, cols, buf);
        // A NaN never wins the comparison, but it makes the sum NaN, so every output is NaN.
        C mx = -std::numeric_limits<C>::infinity();
        for (size_t j = 0; j < cols; ++j) mx = xr[j] > mx ? xr[j] : mx;
        C sum = 0;
        for (size_t j = 0; j < cols; ++j) sum += fmath::exp(xr[j] - mx);
        T* orow = o + r * cols;
        for (size_t j = 0; j < cols; ++j) orow[j] = cast<T>(nn::softmax_out(xr[j], mx, sum, log));
      }
    }, row_grain(cols));
    return out;
  });
}

StoragePtr CpuStorage::norm_last_dim(const Layout& l, const NormArgs& a) const {
  const size_t n = l.numel();
  auto out = new_storage(n, dtype_);
  if (a.residual) *a.sum = new_storage(n, dtype_);
  if (n == 0) return out;
  const size_t cols = l.shape.back(), rows = n / cols;
  return dispatch_float(dtype_, a.rms ? "rms_norm" : "layer_norm", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = ptr<T>() + l.offset;
    T* o = out->template ptr<T>();
    // weight and bias as compute_t once (1 and 0 when absent).
    std::vector<C> w(cols, C(1)), b(cols, C(0));
    if (a.weight) {
      const T* p = as_cpu(*a.weight).template ptr<T>() + a.weight_offset;
      for (size_t j = 0; j < cols; ++j) w[j] = to_compute(p[j]);
    }
    if (a.bias) {
      const T* p = as_cpu(*a.bias).template ptr<T>() + a.bias_offset;
      for (size_t j = 0; j < cols; ++j) b[j] = to_compute(p[j]);
    }
    const C inv_n = C(1) / C(cols);
    // add_rms_norm: the row is x + residual rounded to T (add()'s result), also written to *a.sum.
    const T* res = a.residual ? as_cpu(*a.residual).template ptr<T>() + a.residual_offset : nullptr;
    T* sum = res ? static_cast<T*>(as_cpu(**a.sum).data()) : nullptr;
    parallel_for(rows, [&](size_t r0, size_t r1) {
      std::vector<C> buf;
      for (size_t r = r0; r < r1; ++r) {
        const C* xr;
        if (res) {
          buf.resize(cols);
          for (size_t j = 0; j < cols; ++j) {
            const T s = cast<T>(to_compute(x[r * cols + j]) + to_compute(res[r * cols + j]));
            sum[r * cols + j] = s;
            buf[j] = to_compute(s);
          }
          xr = buf.data();
        } else {
          xr = row_in(x + r * cols, cols, buf);
        }
        C mean = 0;
        if (!a.rms) {
          for (size_t j = 0; j < cols; ++j) mean += xr[j];
          mean *= inv_n;
        }
        // Second pass around the mean (not E[x^2] - mean^2): no cancellation for large means.
        C ms = 0;
        for (size_t j = 0; j < cols; ++j) {
          const C dx = xr[j] - mean;
          ms += dx * dx;
        }
        const C rstd = nn::norm_rstd(ms * inv_n, a.eps);
        T* orow = o + r * cols;
        for (size_t j = 0; j < cols; ++j) orow[j] = cast<T>(nn::norm_out(xr[j], mean, rstd, w[j], b[j]));
      }
    }, row_grain(3 * cols));
    return out;
  });
}

StoragePtr CpuStorage::rope(RopeKind k, const Layout& l, const Storage& cos_s, const Layout& cos_l,
                            const Storage& sin_s, const Layout& sin_l, const RopeDims& dm) const {
  const size_t n = l.numel();
  auto out = new_storage(n, dtype_);
  if (n == 0) return out;
  const char* op = k == RopeKind::Interleaved ? "rope_i" : k == RopeKind::HalfSplit ? "rope" : "rope_thd";
  return dispatch_float(dtype_, op, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    const bool inter = k == RopeKind::Interleaved;
    const size_t d = dm.d, half = d / 2, rows = n / d;
    const T* x = ptr<T>() + l.offset;
    const T* cs = as_cpu(cos_s).template ptr<T>() + cos_l.offset;
    const T* sn = as_cpu(sin_s).template ptr<T>() + sin_l.offset;
    T* o = out->template ptr<T>();
    parallel_for(rows, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        // Row r is (b, h, t) or, for rope_thd, (b, t, h) in row-major order.
        size_t bi, ti;
        if (k == RopeKind::HalfSplitThd) {
          ti = (r / dm.h) % dm.t;
          bi = r / (dm.h * dm.t);
        } else {
          ti = r % dm.t;
          bi = r / (dm.t * dm.h);
        }
        const size_t table = ((dm.per_batch ? bi * dm.t : 0) + ti) * half;
        const T* xr = x + r * d;
        T* orow = o + r * d;
        for (size_t i = 0; i < half; ++i) {
          const nn::RopePair p = nn::rope_pair(inter, inter ? 2 * i : i, d);
          const C x0 = to_compute(xr[p.first]), x1 = to_compute(xr[p.second]);
          const C c = to_compute(cs[table + p.i]), s = to_compute(sn[table + p.i]);
          orow[p.first] = cast<T>(nn::rope_first(x0, x1, c, s));
          orow[p.second] = cast<T>(nn::rope_second(x0, x1, c, s));
        }
      }
    }, row_grain(2 * d));
    return out;
  });
}

// The CPU has no launches to save: rope, then the two cache writes.
StoragePtr CpuStorage::rope_kv_append(RopeKind k, const Layout& l, const Storage& cos_s, const Layout& cos_l,
                                      const Storage& sin_s, const Layout& sin_l, const RopeDims& dm,
                                      const KvAppend& a) const {
  StoragePtr out = rope(k, l, cos_s, cos_l, sin_s, sin_l, dm);
  const Layout k_src = Layout::contiguous({dm.b, dm.h, dm.t, dm.d}).narrow(1, a.q_heads, dm.h - a.q_heads);
  out->copy_strided_at(k_src, *a.k_cache, a.k_l, *a.start, a.start_offset, a.k_l.strides[2], a.max_start);
  a.v->copy_strided_at(a.v_l, *a.v_cache, a.vc_l, *a.start, a.start_offset, a.vc_l.strides[2], a.max_start);
  return out;
}

namespace {

// silu(a) * b for the types that compute in f32, by vec_math's silu_mul_f32 (its exp is the exp
// op's): contiguous f32 runs directly, any other run through f32 buffers (the result does not
// depend on the layout). Chunks of 4096 elements: the exp makes an element worth splitting across
// threads much sooner than the element-wise grain.
template <class T>
void silu_mul_runs(T* out, const Shape& shape, const Layout& la, const T* a, const Layout& lb, const T* b) {
  auto plan = plan_strided<2>(shape, {&la, &lb});
  parallel_for(
      plan.numel,
      [&](size_t begin, size_t end) {
        for_each_run<2>(plan, begin, end, [&](size_t i, size_t len, const auto& offs, const auto& inner) {
          if constexpr (std::is_same_v<T, float>) {
            if (inner[0] == 1 && inner[1] == 1) return silu_mul_f32(a + offs[0], b + offs[1], out + i, len);
          }
          constexpr size_t kBuf = 256;
          float x[kBuf], y[kBuf];
          for (size_t j0 = 0; j0 < len; j0 += kBuf) {
            const size_t m = std::min(kBuf, len - j0);
            for (size_t j = 0; j < m; ++j) {
              x[j] = to_compute(a[int64_t(offs[0]) + int64_t(j0 + j) * inner[0]]);
              y[j] = to_compute(b[int64_t(offs[1]) + int64_t(j0 + j) * inner[1]]);
            }
            silu_mul_f32(x, y, x, m);
            for (size_t j = 0; j < m; ++j) out[i + j0 + j] = cast<T>(x[j]);
          }
        });
      },
      4096);
}

}  // namespace

StoragePtr CpuStorage::silu_mul(const Layout& l, const Storage& up_s, const Layout& up_l, StoragePtr*) const {
  auto out = new_storage(l.numel(), dtype_);
  const CpuStorage& up = as_cpu(up_s);
  return dispatch_float(dtype_, "silu_mul", [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    if constexpr (std::is_same_v<compute_t<T>, float>) {
      silu_mul_runs(out->template ptr<T>(), l.shape, l, ptr<T>(), up_l, up.ptr<T>());
    } else {
      map_strided(out->template ptr<T>(), l.shape,
                  [](T a, T b) { return cast<T>(nn::SiluMul{}(to_compute(a), to_compute(b))); }, {&l, &up_l},
                  ptr<T>(), up.ptr<T>());
    }
    return out;
  });
}

namespace {

// A rank-4 operand of attention: base pointer (offset applied) and the strides of its b, h, t
// dims; the last dim is unit-stride.
template <class T> struct Operand4 {
  const T* p;
  int64_t sb, sh, st;
  const T* row(size_t b, size_t h, size_t t) const {
    return p + int64_t(b) * sb + int64_t(h) * sh + int64_t(t) * st;
  }
};

template <class T> Operand4<T> operand(const T* base, const Layout& l) {
  return {base + l.offset, l.strides[0], l.strides[1], l.strides[2]};
}

// d elements of a k or v row as compute_t (f16 through F16C: the same values).
template <class T> void row_to_compute(const T* src, compute_t<T>* dst, size_t d) {
  if constexpr (std::is_same_v<T, f16>) {
    f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, d);
  } else {
    for (size_t j = 0; j < d; ++j) dst[j] = to_compute(src[j]);
  }
}

// k or v converted to a contiguous compute_t copy (for half types, so that each key is
// converted once rather than once per query row).
template <class T> std::vector<compute_t<T>> to_compute_copy(Operand4<T> s, size_t b, size_t h, size_t t, size_t d) {
  std::vector<compute_t<T>> v(b * h * t * d);
  parallel_for(b * h * t, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) row_to_compute(s.row(r / (h * t), (r / t) % h, r % t), v.data() + r * d, d);
  }, row_grain(d));
  return v;
}

// q . k in 8 interleaved partial sums, added pairwise: the compiler keeps them in vector
// registers (one running sum is a chain of dependent adds that it may not reorder), and the
// result is the same on every ISA.
template <class C> C dot_row(const C* a, const C* b, size_t d) {
  C p[8] = {};
  size_t e = 0;
  for (; e + 8 <= d; e += 8)
    for (size_t i = 0; i < 8; ++i) p[i] += a[e + i] * b[e + i];
  C s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  for (; e < d; ++e) s += a[e] * b[e];
  return s;
}

// Keys handled per step of the online softmax: scores of a block are computed, then the
// running max / sum / accumulator are rescaled once per block.
constexpr size_t kKeyBlock = 64;

// out[b, hq, i, :] = softmax(scale * q_i . k_j over visible j) @ v, one query row at a time;
// batch b has lens[b] keys.
template <class T, class C>
void attention_rows(Operand4<T> q, Operand4<C> k, Operand4<C> v, T* out, const AttentionDims& a,
                    const std::vector<size_t>& lens) {
  const size_t group = a.h_q / a.h_kv, rows = a.b * a.h_q * a.t_q;
  const C scale = C(a.scale);
  parallel_for(rows, [&](size_t r0, size_t r1) {
    std::vector<C> qv(a.d), acc(a.d_v), sc(kKeyBlock);
    for (size_t r = r0; r < r1; ++r) {
      const size_t qi = r % a.t_q, hq = (r / a.t_q) % a.h_q, bi = r / (a.t_q * a.h_q), hk = hq / group;
      const size_t shift = lens[bi] - (a.causal ? a.t_q : 0);  // causal: query i sees keys j <= i + shift
      const T* qr = q.row(bi, hq, qi);
      for (size_t j = 0; j < a.d; ++j) qv[j] = to_compute(qr[j]);
      std::fill(acc.begin(), acc.end(), C(0));
      C mx = -std::numeric_limits<C>::infinity(), sum = 0;
      const size_t n_keys = a.causal ? qi + shift + 1 : lens[bi];
      for (size_t j0 = 0; j0 < n_keys; j0 += kKeyBlock) {
        const size_t nb = std::min(kKeyBlock, n_keys - j0);
        C bmx = mx;
        for (size_t j = 0; j < nb; ++j) {
          sc[j] = dot_row(qv.data(), k.row(bi, hk, j0 + j), a.d) * scale;
          bmx = sc[j] > bmx ? sc[j] : bmx;
        }
        // Rescale what was accumulated under the old max (exp(-inf) = 0 on the first block).
        const C corr = mx == bmx ? C(1) : fmath::exp(mx - bmx);
        sum *= corr;
        for (size_t e = 0; e < a.d_v; ++e) acc[e] *= corr;
        mx = bmx;
        for (size_t j = 0; j < nb; ++j) {
          const C pj = fmath::exp(sc[j] - mx);
          sum += pj;
          const C* vr = v.row(bi, hk, j0 + j);
          for (size_t e = 0; e < a.d_v; ++e) acc[e] += pj * vr[e];
        }
      }
      T* orow = out + r * a.d_v;
      for (size_t e = 0; e < a.d_v; ++e) orow[e] = cast<T>(acc[e] / sum);
    }
  }, row_grain(a.t_kv * (a.d + a.d_v)));
}

// The f32 compute path (f32, f16 and bf16 inputs): the query rows of one KV head in sets of up to
// kAttnSetRows (the heads of a query position, then the next positions: a set of a GQA model's
// heads sees the same keys), each set through attention_set_f32 (vec_math.hpp), which scores 16
// keys a step in vector registers. The keys are transposed into its blocks once per call (the f16
// cache's conversion to f32 was such a pass already); the values are read in place when f32.
// Against the row-at-a-time loop (a scalar exp and a reduction per key) a 1.1B prefill of 512
// tokens spent a third of its time in attention on the 2-core machine.
template <class T>
void attention_sets(Operand4<T> q, Operand4<T> k, Operand4<T> v, T* out, const AttentionDims& a,
                    const std::vector<size_t>& lens) {
  constexpr size_t L = kAttnKeyLanes, R = kAttnSetRows;
  const size_t group = a.h_q / a.h_kv;
  const size_t tc = *std::max_element(lens.begin(), lens.end());  // keys past every length: unread
  const size_t nblk = (tc + L - 1) / L, head_kt = nblk * a.d * L;
  std::vector<float> kt(a.b * a.h_kv * head_kt);
  parallel_for(a.b * a.h_kv * nblk, [&](size_t c0, size_t c1) {
    std::vector<float> row(a.d);
    for (size_t c = c0; c < c1; ++c) {
      const size_t blk = c % nblk, hk = (c / nblk) % a.h_kv, bi = c / (nblk * a.h_kv);
      float* dst = kt.data() + c * a.d * L;
      for (size_t j = 0; j < L; ++j) {
        const size_t key = blk * L + j;
        if (key >= tc) {
          for (size_t e = 0; e < a.d; ++e) dst[e * L + j] = 0.0f;
          continue;
        }
        row_to_compute(k.row(bi, hk, key), row.data(), a.d);
        for (size_t e = 0; e < a.d; ++e) dst[e * L + j] = row[e];
      }
    }
  }, row_grain(L * a.d));
  std::vector<float> vc;
  Operand4<float> vf;
  if constexpr (std::is_same_v<T, float>) {
    vf = v;
  } else {
    vc = to_compute_copy(v, a.b, a.h_kv, tc, a.d_v);
    const int64_t vd = int64_t(a.d_v), t = int64_t(tc);
    vf = Operand4<float>{vc.data(), int64_t(a.h_kv) * t * vd, t * vd, vd};
  }
  const size_t per_head = a.t_q * group, sets = (per_head + R - 1) / R;
  const float scale = float(a.scale);
  parallel_for(a.b * a.h_kv * sets, [&](size_t s0, size_t s1) {
    std::vector<float> qb(R * a.d), ob(R * a.d_v);
    size_t nk[R], orow[R];
    for (size_t s = s0; s < s1; ++s) {
      const size_t si = s % sets, hk = (s / sets) % a.h_kv, bi = s / (sets * a.h_kv);
      const size_t u0 = si * R, m = std::min(R, per_head - u0);
      const size_t shift = lens[bi] - (a.causal ? a.t_q : 0);  // causal: query i sees keys j <= i + shift
      for (size_t i = 0; i < m; ++i) {
        const size_t qi = (u0 + i) / group, hq = hk * group + (u0 + i) % group;
        nk[i] = a.causal ? qi + shift + 1 : lens[bi];
        orow[i] = (bi * a.h_q + hq) * a.t_q + qi;
        const T* qr = q.row(bi, hq, qi);
        for (size_t e = 0; e < a.d; ++e) qb[i * a.d + e] = to_compute(qr[e]) * scale;
      }
      attention_set_f32(qb.data(), a.d, nk, m, kt.data() + (bi * a.h_kv + hk) * head_kt, vf.row(bi, hk, 0),
                        size_t(vf.st), a.d, a.d_v, ob.data());
      for (size_t i = 0; i < m; ++i)
        for (size_t e = 0; e < a.d_v; ++e) out[orow[i] * a.d_v + e] = cast<T>(ob[i * a.d_v + e]);
    }
  }, row_grain(tc * (a.d + a.d_v) * R));
}

}  // namespace

StoragePtr CpuStorage::attention(const Layout& q_l, const Storage& k_s, const Layout& k_l, const Storage& v_s,
                                 const Layout& v_l, const AttentionDims& a) const {
  const size_t n = a.b * a.h_q * a.t_q * a.d_v;
  auto out = new_storage(n, dtype_);
  if (n == 0) return out;
  const CpuStorage& ks = as_cpu(k_s);
  const CpuStorage& vs = as_cpu(v_s);
  std::vector<size_t> lens(a.b, a.t_kv);
  if (a.kv_len) {
    const CpuStorage& ls = as_cpu(*a.kv_len);
    for (size_t bi = 0; bi < a.b; ++bi)
      lens[bi] = size_t(
          pos::clamp_kv_len(pos::load(ls.data(), ls.dtype(), int64_t(a.kv_len_offset) + int64_t(bi) * a.kv_len_stride),
                            int64_t(a.t_q), int64_t(a.t_kv), a.causal));
  }
  return dispatch_dtype(dtype_, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_floating_point_v<T>) {
      auto q = operand(ptr<T>(), q_l);
      auto k = operand(ks.ptr<T>(), k_l);
      auto v = operand(vs.ptr<T>(), v_l);
      T* o = out->template ptr<T>();
      if constexpr (std::is_same_v<C, float>) {
        attention_sets<T>(q, k, v, o, a, lens);
      } else {  // f64: the row-at-a-time loop in f64
        attention_rows<T, C>(q, k, v, o, a, lens);
      }
      return out;
    } else {
      throw Error(ErrorKind::DType, std::string("attention: needs f16, bf16, f32 or f64, got ") + dtype_name(dtype_) +
                                        "; convert q, k and v with to_dtype(DType::F16)");
    }
  });
}

// fast::paged_attention: the batch's k and v rows into the caches, then each (token, q head) row over its
// sequence's keys read through the block table, in f32 (attention_set_f32, as the dense op's sets).
StoragePtr CpuStorage::paged_attention(const PagedAttention& a) const {
  auto out = new_storage(a.t * a.h_q * a.d_v, dtype_);
  if (a.t == 0) return out;
  const int32_t* slot = as_cpu(*a.slot).ptr<int32_t>() + a.slot_offset;
  const int32_t* seq = as_cpu(*a.seq).ptr<int32_t>() + a.seq_offset;
  const int32_t* pos = as_cpu(*a.pos).ptr<int32_t>() + a.pos_offset;
  const int32_t* table = as_cpu(*a.table).ptr<int32_t>() + a.table_offset;
  const size_t kcols = a.h_kv * a.d, vcols = a.h_kv * a.d_v, group = a.h_q / a.h_kv;
  const int64_t rows = int64_t(a.rows), n_blocks = int64_t(a.rows / a.block_size),
                max_keys = int64_t(a.max_blocks * a.block_size);
  return dispatch_dtype(dtype_, [&](auto tag) -> StoragePtr {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, float>) {
      return dispatch_dtype(a.cache_dtype, [&](auto ctag) -> StoragePtr {
        using CT = decltype(ctag);
        if constexpr (std::is_same_v<CT, f16> || std::is_same_v<CT, bf16> || std::is_same_v<CT, float> ||
                      std::is_same_v<CT, f8e4m3>) {
          CT* kc = as_cpu(*a.k_cache).ptr<CT>() + a.k_cache_offset;
          CT* vc = as_cpu(*a.v_cache).ptr<CT>() + a.v_cache_offset;
          const T* kn = as_cpu(*a.k).ptr<T>();
          const T* vn = as_cpu(*a.v).ptr<T>();
          for (size_t i = 0; i < a.t; ++i) {
            const int64_t r = pos::paged_index(slot[i], rows);
            for (size_t c = 0; c < kcols; ++c)
              kc[size_t(r) * kcols + c] = cast<CT>(float(to_compute(kn[i * kcols + c])));
            for (size_t c = 0; c < vcols; ++c)
              vc[size_t(r) * vcols + c] = cast<CT>(float(to_compute(vn[i * vcols + c])));
          }
          const T* q = ptr<T>();
          T* o = out->template ptr<T>();
          const float scale = float(a.scale);
          // Runs of tokens of one sequence at consecutive positions (a prompt chunk; a decode token alone),
          // each seeing keys [k0, its position]: k0 is 0, or under a window each token is its own run. A
          // (run, KV head) task widens the run's keys into attention_set_f32's transposed blocks once and its
          // values into rows, then scores the run's query rows (its tokens x the group's heads) in sets of
          // kAttnSetRows in vector registers, as attention_sets does for the dense op.
          std::vector<int64_t> tpos(a.t), tseq(a.t);
          for (size_t i = 0; i < a.t; ++i) {
            tpos[i] = pos::paged_index(pos[i], max_keys);
            tseq[i] = pos::paged_index(seq[i], int64_t(a.n_seqs));
          }
          std::vector<size_t> run_start{0};
          for (size_t i = 1; i < a.t; ++i)
            if (a.window != 0 || tseq[i] != tseq[i - 1] || tpos[i] != tpos[i - 1] + 1) run_start.push_back(i);
          run_start.push_back(a.t);
          const size_t n_runs = run_start.size() - 1;
          constexpr size_t L = kAttnKeyLanes, R = kAttnSetRows;
          parallel_for(n_runs * a.h_kv, [&](size_t c0, size_t c1) {
            std::vector<float> kt, vf, row(a.d), qb(R * a.d), ob(R * a.d_v);
            size_t nk[R], orow[R];
            for (size_t c = c0; c < c1; ++c) {
              const size_t run = c / a.h_kv, hk = c % a.h_kv, i0 = run_start[run], i1 = run_start[run + 1];
              const int32_t* trow = table + tseq[i0] * int64_t(a.max_blocks);
              const int64_t k0 = pos::paged_first_key(tpos[i0], int64_t(a.window)), k1 = tpos[i1 - 1] + 1;
              const size_t tc = size_t(k1 - k0), nblk = (tc + L - 1) / L;
              kt.assign(nblk * a.d * L, 0.0f);
              vf.resize(tc * a.d_v);
              for (size_t j = 0; j < tc; ++j) {
                const size_t r = size_t(pos::paged_row(trow, k0 + int64_t(j), int64_t(a.block_size), n_blocks));
                const CT* kr = kc + r * kcols + hk * a.d;
                const CT* vr = vc + r * vcols + hk * a.d_v;
                row_to_compute(kr, row.data(), a.d);
                float* dst = kt.data() + (j / L) * a.d * L + j % L;
                for (size_t e = 0; e < a.d; ++e) dst[e * L] = row[e];
                row_to_compute(vr, vf.data() + j * a.d_v, a.d_v);
              }
              const size_t rows_of_run = (i1 - i0) * group;
              for (size_t u0 = 0; u0 < rows_of_run; u0 += R) {
                const size_t m = std::min(R, rows_of_run - u0);
                for (size_t x = 0; x < m; ++x) {
                  const size_t i = i0 + (u0 + x) / group, hq = hk * group + (u0 + x) % group;
                  nk[x] = size_t(tpos[i] - k0 + 1);
                  orow[x] = i * a.h_q + hq;
                  for (size_t e = 0; e < a.d; ++e) qb[x * a.d + e] = float(to_compute(q[orow[x] * a.d + e])) * scale;
                }
                attention_set_f32(qb.data(), a.d, nk, m, kt.data(), vf.data(), a.d_v, a.d, a.d_v, ob.data());
                for (size_t x = 0; x < m; ++x)
                  for (size_t e = 0; e < a.d_v; ++e) o[orow[x] * a.d_v + e] = cast<T>(ob[x * a.d_v + e]);
              }
            }
          }, 1);
          return out;
        } else {
          throw Error(ErrorKind::DType, std::string("paged_attention: caches of ") + dtype_name(a.cache_dtype));
        }
      });
    } else {
      throw Error(ErrorKind::DType, std::string("paged_attention: q of ") + dtype_name(dtype_));
    }
  });
}

}  // namespace wick::cpu

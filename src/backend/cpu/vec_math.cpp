// Vectorised f32 exp: GCC/Clang vector extensions, so that one body compiles to SSE2/NEON,
// AVX2 or AVX-512 code inside functions that carry the target attribute.
//
// The AVX2 and AVX-512 variants let the compiler fuse a*b+c into FMAs (the default
// -ffp-contract=fast): about a third fewer instructions in the polynomial. Both see the same
// expressions, so they fuse alike and give the same bits (tested); SSE2 has no FMA, so the
// generic variant rounds each step and may differ from them in the last bit (both < 1 ulp).
#include "backend/cpu/vec_math.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "wick/dtype.hpp"
#include "wick/error.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define WICK_VEC_X86 1
#include <immintrin.h>
#endif

namespace wick::cpu {
namespace {

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef uint32_t U4 __attribute__((vector_size(16)));
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef uint32_t U8 __attribute__((vector_size(32)));
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef uint32_t U16 __attribute__((vector_size(64)));

// exp(x) = 2^n * e^s with n = round(x / ln2) and |s| <= ln2/2 (Cody-Waite split of ln2, so that
// n times ln2's high part is exact), e^s by SLEEF's degree-7 minimax polynomial (expf_u10), 2^n by building
// two powers of two from n's bits (one alone cannot reach the subnormal results near n = -150).
template <class V, class I, class U>
[[gnu::always_inline]] inline void exp_vec(const V& xin, V& out) {
  V x = xin;
  x = x > 89.0f ? V{} + 89.0f : x;       // exp(89) is already inf in f32; NaN compares false and stays NaN
  x = x < -104.0f ? V{} - 104.0f : x;    // exp(-104) rounds to 0
  constexpr float kShift = 12582912.0f;  // 0x1.8p23: adding it rounds to an integer in the low bits
  const V t = x * 1.44269504088896341f + kShift;
  const V n = t - kShift;
  // (I) of a vector reinterprets its bits; unsigned arithmetic, as NaN lanes hold any bits
  const I ni = (I)((U)t - (U)(V{} + kShift));
  V s = x - n * 0.693145751953125f;
  s = s - n * 1.428606765330187045e-06f;
  V u = V{} + 0.000198527617612853646278381f;
  u = u * s + 0.00139304355252534151077271f;
  u = u * s + 0.00833336077630519866943359f;
  u = u * s + 0.0416664853692054748535156f;
  u = u * s + 0.166666671633720397949219f;
  u = u * s + 0.5f;
  u = 1.0f + ((s * s) * u + s);
  const I n1 = ni >> 1, n2 = (I)((U)ni - (U)n1);  // n in [-150, 128]: both halves are normal exponents
  out = u * (V)((n1 + 127) << 23) * (V)((n2 + 127) << 23);
}

template <class V, class I, class U>
[[gnu::always_inline]] inline void exp_loop(const float* in, float* out, size_t n) {
  constexpr size_t W = sizeof(V) / sizeof(float);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    V x, y;
    std::memcpy(&x, in + i, sizeof x);  // unaligned load
    exp_vec<V, I, U>(x, y);
    std::memcpy(out + i, &y, sizeof y);
  }
  if (i < n) {  // the tail through one zero-padded vector
    V x{}, y;
    std::memcpy(&x, in + i, (n - i) * sizeof(float));
    exp_vec<V, I, U>(x, y);
    std::memcpy(out + i, &y, (n - i) * sizeof(float));
  }
}

template <class V, class I, class U>
[[gnu::always_inline]] inline void silu_mul_vec(const V& x, const V& b, V& out) {
  V z = (V)((U)x | (U{} + 0x80000000u));  // -|x|: the sign bit set
  exp_vec<V, I, U>(z, z);
  const V s = 1.0f / (1.0f + z);
  out = x * (x >= 0.0f ? s : z * s) * b;
}

template <class V, class I, class U>
[[gnu::always_inline]] inline void silu_mul_loop(const float* a, const float* b, float* out, size_t n) {
  constexpr size_t W = sizeof(V) / sizeof(float);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    V x, y, r;
    std::memcpy(&x, a + i, sizeof x);
    std::memcpy(&y, b + i, sizeof y);
    silu_mul_vec<V, I, U>(x, y, r);
    std::memcpy(out + i, &r, sizeof r);
  }
  if (i < n) {
    V x{}, y{}, r;
    std::memcpy(&x, a + i, (n - i) * sizeof(float));
    std::memcpy(&y, b + i, (n - i) * sizeof(float));
    silu_mul_vec<V, I, U>(x, y, r);
    std::memcpy(out + i, &r, (n - i) * sizeof(float));
  }
}

void exp_generic(const float* in, float* out, size_t n) { exp_loop<F4, I4, U4>(in, out, n); }
void silu_mul_generic(const float* a, const float* b, float* out, size_t n) {
  silu_mul_loop<F4, I4, U4>(a, b, out, n);
}
#ifdef WICK_VEC_X86
[[gnu::target("avx2,fma")]] void silu_mul_avx2(const float* a, const float* b, float* out, size_t n) {
  silu_mul_loop<F8, I8, U8>(a, b, out, n);
}
[[gnu::target("avx512f")]] void silu_mul_avx512(const float* a, const float* b, float* out, size_t n) {
  silu_mul_loop<F16, I16, U16>(a, b, out, n);
}
#endif
#ifdef WICK_VEC_X86
[[gnu::target("avx2,fma")]] void exp_avx2(const float* in, float* out, size_t n) { exp_loop<F8, I8, U8>(in, out, n); }
[[gnu::target("avx512f")]] void exp_avx512(const float* in, float* out, size_t n) {
  exp_loop<F16, I16, U16>(in, out, n);
}
#endif

// Lane-wise max of a 16-float vector folded to one float (4 shuffle steps).
[[gnu::always_inline]] inline void max_into(F16& v, const F16& b) { v = v > b ? v : b; }  // by reference: no vector ABI
[[gnu::always_inline]] inline float hmax16(F16 v) {
  max_into(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  max_into(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  max_into(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  return v[0] > v[1] ? v[0] : v[1];
}

// 16-lane vectors whatever the ISA (the compiler splits them for AVX2 and SSE2), so the key blocks
// have one layout. Per step: scores S[r] = sum_e q[r][e] kt[e] (16 keys), masked lanes -inf; the
// row's max moves only when a score passes it (then acc and the lane sums are rescaled); P = exp(S
// - max) summed lane-wise (folded once at the end); acc[r] += P[r][j] v[j] over the step's keys.
[[gnu::always_inline]] inline void attention_set(const float* q, size_t ldq, const size_t* nk, size_t m,
                                                 const float* kt, const float* v, size_t ldv, size_t d, size_t dv,
                                                 float* out) {
  constexpr size_t R = kAttnSetRows, L = kAttnKeyLanes;
  float mx[R];
  F16 lsum[R];
  size_t kmax = 0;
  for (size_t r = 0; r < m; ++r) {
    mx[r] = -__builtin_inff();
    lsum[r] = F16{};
    kmax = nk[r] > kmax ? nk[r] : kmax;
    for (size_t e = 0; e < dv; ++e) out[r * dv + e] = 0.0f;
  }
  const F16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  alignas(64) float p[R][L];
  for (size_t j0 = 0; j0 < kmax; j0 += L, kt += d * L) {
    F16 s[R];
    for (size_t r = 0; r < m; ++r) s[r] = F16{};
    for (size_t e = 0; e < d; ++e) {
      F16 kv;
      std::memcpy(&kv, kt + e * L, sizeof kv);
      for (size_t r = 0; r < m; ++r) s[r] += q[r * ldq + e] * kv;
    }
    bool live[R];
    for (size_t r = 0; r < m; ++r) {
      live[r] = nk[r] > j0;
      if (!live[r]) continue;
      const float vis = float(nk[r] - j0);  // lanes at or past it are masked (exact: < 2^24 keys a step)
      s[r] = lane < vis ? s[r] : F16{} - __builtin_inff();
      const float sm = hmax16(s[r]), bm = sm > mx[r] ? sm : mx[r];
      if (bm != mx[r]) {  // exp(-inf) = 0 on the first step
        F16 c = F16{} + (mx[r] - bm);
        exp_vec<F16, I16, U16>(c, c);
        lsum[r] *= c[0];
        for (size_t e = 0; e < dv; ++e) out[r * dv + e] *= c[0];
        mx[r] = bm;
      }
      F16 pr = s[r] - bm;
      exp_vec<F16, I16, U16>(pr, pr);
      lsum[r] += pr;
      std::memcpy(p[r], &pr, sizeof pr);
    }
    const size_t nj = kmax - j0 < L ? kmax - j0 : L;
    size_t c = 0;
    for (; c + L <= dv; c += L)
      for (size_t r = 0; r < m; ++r) {
        if (!live[r]) continue;
        F16 a;
        std::memcpy(&a, out + r * dv + c, sizeof a);
        for (size_t j = 0; j < nj; ++j) {
          F16 vv;
          std::memcpy(&vv, v + (j0 + j) * ldv + c, sizeof vv);
          a += p[r][j] * vv;
        }
        std::memcpy(out + r * dv + c, &a, sizeof a);
      }
    for (size_t r = 0; r < m; ++r)  // the last dv % 16 columns
      if (live[r])
        for (size_t j = 0; j < nj; ++j)
          for (size_t e = c; e < dv; ++e) out[r * dv + e] += p[r][j] * v[(j0 + j) * ldv + e];
  }
  for (size_t r = 0; r < m; ++r) {
    float t = 0;
    for (size_t l = 0; l < L; ++l) t += lsum[r][l];
    for (size_t e = 0; e < dv; ++e) out[r * dv + e] /= t;
  }
}

void attention_set_generic(const float* q, size_t ldq, const size_t* nk, size_t m, const float* kt, const float* v,
                           size_t ldv, size_t d, size_t dv, float* out) {
  attention_set(q, ldq, nk, m, kt, v, ldv, d, dv, out);
}
#ifdef WICK_VEC_X86
[[gnu::target("avx2,fma")]] void attention_set_avx2(const float* q, size_t ldq, const size_t* nk, size_t m,
                                                    const float* kt, const float* v, size_t ldv, size_t d, size_t dv,
                                                    float* out) {
  attention_set(q, ldq, nk, m, kt, v, ldv, d, dv, out);
}
[[gnu::target("avx512f")]] void attention_set_avx512(const float* q, size_t ldq, const size_t* nk, size_t m,
                                                     const float* kt, const float* v, size_t ldv, size_t d, size_t dv,
                                                     float* out) {
  attention_set(q, ldq, nk, m, kt, v, ldv, d, dv, out);
}
#endif

void f16_to_f32_scalar(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f16_bits_to_f32(in[i]);
}
#ifdef WICK_VEC_X86
[[gnu::target("avx,f16c")]] void f16_to_f32_f16c(const uint16_t* in, float* out, size_t n) {
  const __m128i exp_mask = _mm_set1_epi16(0x7c00);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, exp_mask), exp_mask)))
      f16_to_f32_scalar(in + i, out + i, 8);  // an inf or NaN
    else
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  f16_to_f32_scalar(in + i, out + i, n - i);
}
#endif

VecIsa detect_isa() {
#ifdef WICK_VEC_X86
  __builtin_cpu_init();
  // libgcc's check includes the OS enabling the wide register state (XGETBV), not only CPUID.
  if (__builtin_cpu_supports("avx512f")) return VecIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VecIsa::Avx2;
#endif
  return VecIsa::Generic;
}

}  // namespace

VecIsa best_vec_isa() {
  static const VecIsa isa = detect_isa();
  return isa;
}

const char* vec_isa_name(VecIsa isa) {
  switch (isa) {
    case VecIsa::Avx2:
      return "avx2";
    case VecIsa::Avx512:
      return "avx512f";
    default:
      return "generic";
  }
}

void exp_f32(const float* in, float* out, size_t n, VecIsa isa) {
  if (int(isa) > int(best_vec_isa()))
    throw Error(ErrorKind::Unsupported, std::string("exp_f32: this CPU has no ") + vec_isa_name(isa) +
                                            "; use best_vec_isa() (" + vec_isa_name(best_vec_isa()) + ")");
  switch (isa) {
#ifdef WICK_VEC_X86
    case VecIsa::Avx512:
      return exp_avx512(in, out, n);
    case VecIsa::Avx2:
      return exp_avx2(in, out, n);
#endif
    default:
      return exp_generic(in, out, n);
  }
}

void exp_f32(const float* in, float* out, size_t n) { exp_f32(in, out, n, best_vec_isa()); }

void silu_mul_f32(const float* a, const float* b, float* out, size_t n) {
  switch (best_vec_isa()) {
#ifdef WICK_VEC_X86
    case VecIsa::Avx512:
      return silu_mul_avx512(a, b, out, n);
    case VecIsa::Avx2:
      return silu_mul_avx2(a, b, out, n);
#endif
    default:
      return silu_mul_generic(a, b, out, n);
  }
}

void f16_to_f32(const uint16_t* in, float* out, size_t n) {
#ifdef WICK_VEC_X86
  static const bool f16c = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }();
  if (f16c) return f16_to_f32_f16c(in, out, n);
#endif
  f16_to_f32_scalar(in, out, n);
}

void attention_set_f32(const float* q, size_t ldq, const size_t* n_keys, size_t m, const float* kt, const float* v,
                       size_t ldv, size_t d, size_t dv, float* out) {
  switch (best_vec_isa()) {
#ifdef WICK_VEC_X86
    case VecIsa::Avx512:
      return attention_set_avx512(q, ldq, n_keys, m, kt, v, ldv, d, dv, out);
    case VecIsa::Avx2:
      return attention_set_avx2(q, ldq, n_keys, m, kt, v, ldv, d, dv, out);
#endif
    default:
      return attention_set_generic(q, ldq, n_keys, m, kt, v, ldv, d, dv, out);
  }
}

}  // namespace wick::cpu

// Cases: the fused nn ops. softmax / log_softmax (last dim and any dim), the losses (composites),
// rms_norm and layer_norm (with and without weight/bias), rope_i / rope / rope_thd (shared and
// per-batch cos/sin), silu_mul (same shape and broadcast row), swiglu, attention (plain, causal,
// grouped-query, t_q < t_kv, explicit scale, (b, t, h, d) storage), attention_kv_len (per-batch
// and shared lengths, clamped ones), paged_attention (three sequences over shuffled blocks, a window).
// The Empty layout empties a row dim (rows, or t for rope/attention).
#include <array>
#include <optional>
#include <string>
#include <utility>

#include "check/cases.hpp"
#include "wick/fast.hpp"
#include "wick/nn.hpp"

namespace wick::check {

namespace {

const std::vector<DType> kAttnFloats = {DType::BF16, DType::F16, DType::F32, DType::F64};
const std::vector<DType> kAttnNoF32 = {DType::BF16, DType::F16, DType::F64};

// Attention shapes of one case: q (b, hq, tq, d), k/v (b, hkv, tkv, d / dv).
struct AttnShape {
  const char* name;
  size_t b, hq, hkv, tq, tkv, d, dv;
  bool causal;
  double scale;         // 0: the default 1/sqrt(d)
  bool no_f32 = false;  // see the long decode shapes
};

const AttnShape kAttn[] = {
    {"self", 2, 4, 4, 9, 9, 16, 16, false, 0},        {"self,causal", 2, 4, 4, 9, 9, 16, 16, true, 0},
    {"gqa,causal", 2, 4, 2, 7, 7, 8, 8, true, 0},     {"gqa,kv_cache,causal", 2, 6, 2, 5, 70, 8, 16, true, 0},
    {"mqa,decode", 1, 4, 1, 1, 33, 16, 8, true, 0},   {"gqa,scale=0.3", 2, 4, 2, 6, 11, 8, 12, false, 0.3},
    // Head dims 64/128 take the fused flash kernel on NVIDIA sm_80+ (f16/bf16): partial query and
    // key tiles, diagonal tiles, decode, grouped heads.
    {"d64,causal", 1, 2, 2, 70, 70, 64, 64, true, 0},  {"d128,decode", 2, 2, 1, 1, 130, 128, 128, true, 0},
    {"d128,gqa", 1, 4, 2, 100, 100, 128, 128, false, 0}, {"d64,kv_cache,causal", 2, 2, 1, 70, 150, 64, 64, true, 0.2},
    // Several query blocks and key tiles: warps whose rows end before a causal tile (skipped), a
    // last block with rows past t_q, a partial last key tile, a negative scale. f32 skipped on the
    // first: its GEMM path measured NMSE 1.36e-12 there on an H200, as the long decode shapes below.
    {"d128,causal,tiles", 1, 2, 1, 200, 200, 128, 128, true, 0, true},
    {"d128,kv_cache,causal,tiles", 2, 2, 2, 77, 300, 128, 128, true, 0},
    {"d64,tiles,scale=-0.2", 1, 2, 2, 130, 257, 64, 64, false, -0.2},
    // Up to 8 query rows per KV head with at least as many runs of 256 keys as heads per KV head
    // take the split-key decode kernel on the GPU (f16/bf16): a partial last run, causal rows that
    // see different keys, d != dv, d = 256.
    // The two long ones skip f32 (f16/bf16 are what the kernel is for, f64 is exact): f32 takes the GEMM path there, whose rounding over 1100-2100
    // keys measured NMSE 1.0-1.4e-12 on an H100, past f32's 1e-12 bound (shorter f32 rows are above).
    {"decode,gqa8,long", 1, 8, 1, 1, 2100, 64, 64, true, 0, true},
    {"decode,2tok,gqa4", 2, 8, 2, 2, 1100, 32, 48, true, 0, true},
    {"decode,d256,3tok", 1, 2, 2, 3, 513, 256, 256, false, 0},
};

}  // namespace

void add_nn_cases(std::vector<Case>& out) {
  add(out, "softmax_last_dim", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 65}, 401).softmax_last_dim(), in.x({in.n(3), 1}, 402).softmax_last_dim()};
  });
  add(out, "log_softmax_last_dim", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 65}, 403).log_softmax_last_dim(), in.x({in.n(3), 1}, 404).log_softmax_last_dim()};
  });
  // Large values: max subtraction keeps exp finite.
  add(out, "softmax_last_dim", "x*1000", {DType::F32, DType::F64}, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({in.n(4), 33}, 405).affine(1000.0, 0.0);
    return {x.softmax_last_dim(), x.log_softmax_last_dim()};
  });

  // Any dim: a dim other than the last moves last, runs the fused kernel and moves back.
  add(out, "softmax", "dim=0,1", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({in.n(5), 9, 17}, 406);
    return {x.softmax(0), x.softmax(1), x.softmax(-1)};
  });
  add(out, "log_softmax", "dim=0,-2", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({9, in.n(5), 17}, 407);
    return {x.log_softmax(0), x.log_softmax(-2)};
  });
  // Losses (composites): class ids against (N, C) rows, and element-wise pairs.
  add(out, "loss", "", {DType::BF16, DType::F16, DType::F32, DType::F64}, [](Inputs& in) -> std::vector<Tensor> {
    Tensor logits = in.x({in.n(7), 11}, 408), ids = in.ids({in.n(7)}, 409, 11, DType::U32);
    Tensor a = in.x({in.n(6), 13}, 410), b = in.x({in.n(6), 13}, 420, Values::Unit);
    return {loss::cross_entropy(logits, ids), loss::nll(logits, ids), loss::mse(a, b), loss::huber(a, b, 0.75),
            loss::binary_cross_entropy_with_logit(a, b.affine(0.5, 0.5))};
  });

  add(out, "rms_norm", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 64}, 411).rms_norm(Tensor(), 1e-5)};
  });
  add(out, "rms_norm", "weight", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 64}, 412).rms_norm(in.x_nb({64}, 413), 1e-6)};
  });
  // add_rms_norm: both outputs; a row held in registers and one too long for them (the long kernel).
  add(out, "add_rms_norm", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    auto [s, y] = in.x({in.n(5), 9, 64}, 430).add_rms_norm(in.x({in.n(5), 9, 64}, 431), in.x_nb({64}, 432), 1e-6);
    return {s, y};
  });
  // The long one skips f32: a 40,000-term f32 sum of squares in another order than the CPU's measured
  // NMSE 4.3e-12 on an H100, past f32's 1e-12 bound; tests/gpu/test_gpu_launch.cpp holds f32 to add
  // then rms_norm on the device, bit for bit.
  const auto not_f32 = dtypes_where([](DType d) { return dtype_is_float(d) && d != DType::F32; });
  add(out, "add_rms_norm", "long", not_f32, [](Inputs& in) -> std::vector<Tensor> {
    auto [s, y] = in.x({2, 40000}, 433).add_rms_norm(in.x({2, 40000}, 434), Tensor(), 1e-5);
    return {s, y};
  });
  add(out, "layer_norm", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 47}, 414).layer_norm(Tensor(), Tensor(), 1e-5)};
  });
  add(out, "layer_norm", "weight", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 47}, 415).layer_norm(in.x_nb({47}, 416), Tensor(), 1e-5)};
  });
  add(out, "layer_norm", "weight,bias", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 9, 47}, 417).layer_norm(in.x_nb({47}, 418), in.x_nb({47}, 419), 1e-5)};
  });

  using RopeFn = Tensor (Tensor::*)(const Tensor&, const Tensor&) const;
  const std::pair<const char*, RopeFn> ropes[] = {
      {"rope_i", &Tensor::rope_i}, {"rope", &Tensor::rope}, {"rope_thd", &Tensor::rope_thd}};
  for (auto [name, fn] : ropes) {
    const bool thd = std::string(name) == "rope_thd";
    for (bool per_batch : {false, true})
      add(out, name, per_batch ? "per_batch" : "", kFloats, [fn, thd, per_batch](Inputs& in) -> std::vector<Tensor> {
        const size_t b = 2, h = 3, t = in.n(7), d = 16;
        Tensor x = thd ? in.x({b, t, h, d}, 421) : in.x({b, h, t, d}, 421);
        const Shape table = per_batch ? Shape{b, t, d / 2} : Shape{t, d / 2};
        Tensor c = in.x_nb(table, 422, Values::Unit), s = in.x_nb(table, 423, Values::Unit);
        return {(x.*fn)(c, s)};
      });
  }

  // rope_kv_append: the rotated q heads and both caches after the write, at a row in range and
  // at one clamped (40 -> 9 - 3).
  for (bool inter : {false, true})
    for (int64_t start : {4, 40})
      add(out, "rope_kv_append", std::string(inter ? "interleaved" : "half") + (start == 4 ? "" : ",clamped"), kFloats,
          [inter, start](Inputs& in) -> std::vector<Tensor> {
            const size_t b = 2, hq = 3, hkv = 2, t = in.n(3), d = 16, cap = 9, dv = 8;
            Tensor kc = in.x_nb({b, hkv, cap, d}, 441), vc = in.x_nb({b, hkv, cap, dv}, 442);
            Tensor c = in.x_nb({t, d / 2}, 443, Values::Unit), s = in.x_nb({t, d / 2}, 444, Values::Unit);
            Tensor q = fast::rope_kv_append(in.x({b, hq + hkv, t, d}, 445), c, s, inter, hq, in.x({b, hkv, t, dv}, 446),
                                            kc, vc, in.lay(Tensor::full({1}, start, DType::I32)));
            return {q, kc, vc};
          });

  // fast::paged_attention: three sequences over shuffled blocks of 4 (a decode token after 9, a 6-token chunk
  // after 2, a new 3-token prompt), grouped-query heads, d 16 and d_v 8, with and without a window of 5; the
  // output and both caches after the write (the caches of the case dtype).
  for (size_t window : {size_t(0), size_t(5)})
    add(out, "paged_attention", window ? "window=5" : "", {DType::BF16, DType::F16, DType::F32},
        [window](Inputs& in) -> std::vector<Tensor> {
          const std::vector<int32_t> table{7, 2, 9, 0, 4, 11, 1, 5, 3, 8, 6, 10};
          std::vector<int32_t> slot, seq, pos;
          for (const auto& [s, pos0, n] : {std::array<int32_t, 3>{0, 9, 1}, {1, 2, 6}, {2, 0, 3}})
            for (int32_t i = 0; i < n; ++i) {
              seq.push_back(s);
              pos.push_back(pos0 + i);
              slot.push_back(table[size_t(s) * 4 + size_t(pos0 + i) / 4] * 4 + (pos0 + i) % 4);
            }
          const size_t t = slot.size();
          auto i32 = [&](const std::vector<int32_t>& v, const Shape& sh) {
            return in.lay(Tensor::from_vector(v, sh)).contiguous();
          };
          Tensor kc = in.x_nb({48, 32}, 461).contiguous(), vc = in.x_nb({48, 16}, 462).contiguous();
          Tensor o = fast::paged_attention(in.x({t, 4, 16}, 463), in.x({t, 2, 16}, 464), in.x({t, 2, 8}, 465), kc, vc,
                                           i32(slot, {t}), i32(table, {3, 4}), i32(seq, {t}), i32(pos, {t}), 4, window);
          return {o, kc, vc};
        });

  add(out, "silu_mul", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 17, 33}, 431).silu_mul(in.x({in.n(5), 17, 33}, 432))};
  });
  add(out, "silu_mul", "bcast_row", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 17, 33}, 433).silu_mul(in.x_nb({33}, 434))};
  });
  add(out, "swiglu", "", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(5), 17, 64}, 435).swiglu()};
  });

  for (const AttnShape& a : kAttn) {
    add(out, "attention", a.name, a.no_f32 ? kAttnNoF32 : kAttnFloats, [a](Inputs& in) -> std::vector<Tensor> {
      Tensor q = in.x({a.b, a.hq, in.n(a.tq), a.d}, 441);
      Tensor k = in.x({a.b, a.hkv, a.tkv, a.d}, 442);
      Tensor v = in.x({a.b, a.hkv, a.tkv, a.dv}, 443);
      std::optional<double> scale;
      if (a.scale != 0) scale = a.scale;
      return {attention(q, k, v, a.causal, scale)};
    });
  }
  // Per-batch key counts: the decode kernel reading them on the device (f16/bf16; runs past a
  // batch's length skipped, lengths 1, 255, 256, 257, clamped 0 and past t_kv), one length for
  // every batch, and shapes that read them to the host (many query rows; f32/f64 everywhere).
  struct KvLenCase {
    const char* name;
    size_t b, hq, hkv, tq, tkv, d;
    bool causal;
    std::vector<int32_t> lens;
  };
  const KvLenCase kv_cases[] = {
      {"decode,gqa4,causal", 2, 8, 2, 1, 600, 64, true, {300, 513}},
      {"decode,edges", 4, 4, 4, 1, 520, 32, false, {1, 255, 256, 257}},
      {"decode,clamped,causal", 2, 4, 1, 2, 300, 16, true, {0, 900}},
      {"decode,one_len", 2, 4, 2, 3, 290, 64, false, {260}},
      {"rows,causal", 2, 4, 2, 9, 70, 16, true, {20, 70}},
  };
  for (const KvLenCase& c : kv_cases) {
    add(out, "attention_kv_len", c.name, kAttnFloats, [c](Inputs& in) -> std::vector<Tensor> {
      Tensor q = in.x({c.b, c.hq, in.n(c.tq), c.d}, 451);
      Tensor k = in.x({c.b, c.hkv, c.tkv, c.d}, 452);
      Tensor v = in.x({c.b, c.hkv, c.tkv, c.d}, 453);
      Tensor lens = in.lay(Tensor::from_vector(c.lens, {c.lens.size()}));
      return {attention_kv_len(q, k, v, lens, c.causal)};
    });
  }
  // q/k/v stored (b, t, h, d), as a model's projections produce them: strided b/h/t dims.
  add(out, "attention", "bthd,gqa,causal", kAttnFloats, [](Inputs& in) -> std::vector<Tensor> {
    Tensor q = in.x({2, in.n(6), 4, 8}, 444).transpose(1, 2);
    Tensor k = in.x({2, 10, 2, 8}, 445).transpose(1, 2);
    Tensor v = in.x({2, 10, 2, 8}, 446).transpose(1, 2);
    return {attention(q, k, v, true)};
  });
  add(out, "attention", "bthd,d128,gqa,causal", kAttnFloats, [](Inputs& in) -> std::vector<Tensor> {
    Tensor q = in.x({1, in.n(150), 4, 128}, 450).transpose(1, 2);
    Tensor k = in.x({1, 150, 2, 128}, 451).transpose(1, 2);
    Tensor v = in.x({1, 150, 2, 128}, 452).transpose(1, 2);
    return {attention(q, k, v, true)};
  });
  add(out, "attention", "bthd,d64,causal", kAttnFloats, [](Inputs& in) -> std::vector<Tensor> {
    Tensor q = in.x({1, in.n(67), 4, 64}, 447).transpose(1, 2);
    Tensor k = in.x({1, 67, 2, 64}, 448).transpose(1, 2);
    Tensor v = in.x({1, 67, 2, 64}, 449).transpose(1, 2);
    return {attention(q, k, v, true)};
  });
}

}  // namespace wick::check

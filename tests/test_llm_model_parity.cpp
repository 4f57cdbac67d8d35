// LLaMA-family models against transformers' logits and greedy tokens and llama.cpp's logits on GGUFs
// converted and quantized by llama.cpp's own tools (tests/fixtures/llm/README.md: gen_hf.py,
// gen_llamacpp.sh), on the CPU and (skipped without one) the GPU; each test skips with a message when
// its fixtures are absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "llm_model_util.hpp"
#include "test_util.hpp"
#include "wick/gguf.hpp"
#include "wick/io.hpp"
#include "wick/llm/model.hpp"

using namespace wick;
using namespace wick::llm;
using namespace wick::llm::test_util;

namespace {

const char* kFamilies[] = {"llama2", "llama3", "mistral", "qwen2", "qwen3"};

bool have_fixture(const std::string& name) { return fs::exists(kLlm + name + "/expected.json"); }

std::vector<int32_t> greedy(Model& m, const std::vector<int32_t>& prompt, size_t steps, DType cache_dtype) {
  KvCache c = m.make_cache(prompt.size() + steps, cache_dtype);
  Tensor l = m.forward(prompt, c);
  std::vector<int32_t> out;
  for (size_t i = 0; i < steps; ++i) {
    const auto v = l.to_vector<float>();
    out.push_back(int32_t(std::max_element(v.begin(), v.end()) - v.begin()));
    if (i + 1 < steps) l = m.forward({out.back()}, c);
  }
  return out;
}

}  // namespace

// f32 on the CPU, from the f16 safetensors directory and from llama.cpp's convert_hf_to_gguf.py F16
// GGUF (the same f16 weights), every prompt position, against
// - dev/hf_ref/<family>.npy: gen_dev.py's NumPy float64 forward of the same weights (gen_hf_ref.py),
//   which agrees with transformers' float64 logits to 1.4e-7 .. 2.0e-7 (dev/hf_ref/check.json):
//   bound 1e-5, measured <= 1.1e-6;
// - transformers' float32 logits (gen_hf.py, rotary inv_freq kept in float32 as from_pretrained
//   does): bound 1e-4, measured <= 9.7e-7. (The first fixtures ran transformers after
//   model.to(float16), which rounded inv_freq; check.json still shows that gap, 1.6e-5 .. 3.9e-4.)
TEST(LlmParity, TransformersF32Logits) {
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    const std::vector<double> hf = as_f64(load_npy(dir + "/logits_f32.npy"));
    const std::vector<double> ref = as_f64(load_npy(kDev + "hf_ref/" + name + ".npy"));
    for (const std::string& path : {dir, dir + "/model-f16.gguf"}) {
      SCOPED_TRACE(path);
      auto m = Model::load(path, f32_cpu());
      const size_t V = m->config().vocab_size;
      const std::vector<double> got = as_f64(prefill(*m, ids));
      const double e_ref = max_rel_err(got, ref, V), e_hf = max_rel_err(got, hf, V);
      std::printf("%-8s %-5s f32: max rel err vs numpy f64 %.3g, vs transformers f32 %.3g\n", name,
                  path == dir ? "hf" : "gguf", e_ref, e_hf);
      EXPECT_LT(e_ref, 1e-5);
      EXPECT_LT(e_hf, 1e-4);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no transformers fixtures under " << kLlm << " (tests/fixtures/llm/gen_hf.py)";
}

// 64 greedy tokens (f32, f32 cache, incremental decode) equal transformers' (f32, full recompute).
TEST(LlmParity, TransformersGreedyTokens) {
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const nlohmann::json e = read_json(dir + "/expected.json");
    const auto want = ids_of(e["greedy_ids"]);
    for (const std::string& path : {dir, dir + "/model-f16.gguf"}) {
      SCOPED_TRACE(path);
      auto m = Model::load(path, f32_cpu());
      EXPECT_EQ(greedy(*m, ids_of(e["prompt_ids"]), want.size(), DType::F32), want);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no transformers fixtures under " << kLlm;
}

// f16 / bf16 compute with the default cache (f16 / bf16), on the CPU, against transformers run in
// that dtype on the GPU (both round differently, so the bound is on the normalised MSE; measured
// values are printed).
TEST(LlmParity, TransformersHalfLogitsCpu) {
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    const std::vector<double> f64 = as_f64(load_npy(dir + "/logits_f64.npy"));
    for (DType dt : {DType::F16, DType::BF16}) {
      LoadOptions o;
      o.dtype = dt;
      auto m = Model::load(dir, o);
      const std::string tag = dt == DType::F16 ? "f16" : "bf16";
      const std::vector<double> got = as_f64(prefill(*m, ids, std::nullopt));
      const double e = nmse(got, f64), e_hf = nmse(as_f64(load_npy(dir + "/logits_" + tag + ".npy")), f64);
      std::printf("%-8s %-4s cpu: nmse vs f64 %.3g (transformers %s on GPU: %.3g)\n", name, tag.c_str(), e, tag.c_str(),
                  e_hf);
      EXPECT_LT(e, dt == DType::F16 ? 1e-5 : 3e-4) << name << " " << tag;
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no transformers fixtures under " << kLlm;
}

// The same on the GPU (the default compute dtype there is f16), skipped without one.
TEST(LlmParity, TransformersLogitsGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const nlohmann::json ex = read_json(dir + "/expected.json");
    const auto ids = ids_of(ex["prompt_ids"]);
    const std::vector<double> f64 = as_f64(load_npy(dir + "/logits_f64.npy"));
    const std::vector<double> ref = as_f64(load_npy(kDev + "hf_ref/" + name + ".npy"));
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (const std::string& path : {dir, dir + "/model-f16.gguf"}) {
        LoadOptions o;
        o.device = d;
        o.dtype = dt;
        auto m = Model::load(path, o);
        EXPECT_EQ(m->device(), d);
        const std::vector<double> got =
            as_f64(prefill(*m, ids, dt == DType::F32 ? std::optional<DType>(DType::F32) : std::nullopt));
        const double e = nmse(got, f64);
        std::printf("%-8s %-4s %s %s: nmse vs f64 %.3g, max rel err %.3g\n", name, dtype_name(dt), d.name().c_str(),
                    path == dir ? "hf" : "gguf", e, max_rel_err(got, f64, m->config().vocab_size));
        EXPECT_LT(e, dt == DType::F32 ? 1e-6 : dt == DType::F16 ? 1e-5 : 3e-4) << name << " " << dtype_name(dt);
        if (dt == DType::F32) {  // the GPU's f32 GEMMs (TF32 never) against the NumPy float64 forward
          EXPECT_LT(max_rel_err(got, ref, m->config().vocab_size), 1e-4);
          const auto want = ids_of(ex["greedy_ids"]);
          EXPECT_EQ(greedy(*m, ids, want.size(), DType::F32), want) << name << " " << path;
        }
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no transformers fixtures under " << kLlm;
}

// Quantized GGUFs on the GPU (f32 activations). Prefill (more than 8 rows) dequantizes W to f16 for
// the vendor GEMM (docs/quant.md), so it is checked against the f64 forward of the dequantized weights
// (gen_hf_ref.py; an f16 emulation of that path in NumPy measured 7e-4): bound 5e-3, f32 cache.
// Decode (up to 8 rows) quantizes activations to Q8_1 where llama.cpp's CPU uses Q8_0 / Q8_K, so it
// differs from both by activation quantization noise (CPU: 1.6e-2 .. 2.6e-2): bound 6e-2.
TEST(LlmParity, QuantizedLogitsGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  size_t ran = 0;
  for (const char* name : kFamilies) {
    const std::string dir = kLlm + name;
    if (!have_fixture(name)) continue;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    for (const std::string t : {"q8_0", "q4_k_m", "q4_0"}) {
      const std::string gg = dir + "/model-" + t + ".gguf", lc = dir + "/llamacpp_logits_" + t + ".npy";
      const std::string dq = kDev + "hf_ref/" + name + "_" + t + "_dequantized.npy";
      if (!fs::exists(gg) || !fs::exists(lc) || !fs::exists(dq)) continue;
      LoadOptions o;
      o.device = d;
      o.dtype = DType::F32;
      auto m = Model::load(gg, o);
      const size_t V = m->config().vocab_size;
      const std::vector<double> want_lc = as_f64(load_npy(lc)), want_dq = as_f64(load_npy(dq));
      const std::vector<double> got = as_f64(prefill(*m, ids, DType::F32));
      KvCache c = m->make_cache(ids.size(), DType::F16);
      std::vector<double> dec;
      for (int32_t id : ids) {
        const auto v = as_f64(m->forward({id}, c));
        dec.insert(dec.end(), v.begin(), v.end());
      }
      const double e_pre = max_rel_err(got, want_dq, V), e_dec = max_rel_err(dec, want_dq, V),
                   e_lc = max_rel_err(dec, want_lc, V);
      std::printf("%-8s %-6s %s: prefill vs dequantized %.3g; decode vs dequantized %.3g, vs llama.cpp %.3g\n", name,
                  t.c_str(), d.name().c_str(), e_pre, e_dec, e_lc);
      EXPECT_LT(e_pre, 5e-3) << name << " " << t;
      EXPECT_LT(e_dec, 6e-2) << name << " " << t;
      EXPECT_LT(e_lc, 6e-2) << name << " " << t;
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no quantized fixtures under " << kLlm;
}

// GGUFs (F16 from convert_hf_to_gguf.py; Q8_0, Q4_K_M, Q4_0 from llama-quantize) against llama.cpp's
// logits for the same file on its CPU backend, with an f16 KV cache as llama.cpp's default.
// - Position 0 (attention over one key is V itself, so rope and the q/k path drop out) must agree to
//   1e-5 on quantized files: both quantize activations to the weights' dot type (Q8_0 / Q8_K)
//   identically (measured 3e-7). F16: llama.cpp rounds activations to f16 for its F16 matmuls, wick
//   keeps f32 (measured 4.8e-4; bound 1e-3).
// - The whole prompt: activation quantization turns any rounding difference (here llama.cpp's f16
//   attention accumulation) into a different quantization of the next activations, so the two
//   differ by about as much as either differs from the unquantized model (printed, e.g. Q8_0: wick
//   vs llama.cpp 1.6e-2, each vs the f64 model 2.7e-2; Q4_K_M 3.2e-2 vs 0.20; Q4_0 1.9e-2 vs 0.25).
//   Bounds: max rel err 2e-3 (F16), 4e-2 (Q8_0, Q4_0), 6e-2 (Q4_K_M); prefill and one-token decode.
TEST(LlmParity, LlamaCppQuantizedLogits) {
  size_t ran = 0;
  const std::vector<std::pair<std::string, double>> types = {
      {"f16", 2e-3}, {"q8_0", 4e-2}, {"q4_k_m", 6e-2}, {"q4_0", 4e-2}};
  for (const char* name : kFamilies) {
    const std::string dir = kLlm + name;
    if (!have_fixture(name)) continue;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    for (const auto& [t, bound] : types) {
      const std::string gg = dir + "/model-" + t + ".gguf", ref = dir + "/llamacpp_logits_" + t + ".npy";
      if (!fs::exists(gg) || !fs::exists(ref)) continue;
      auto m = Model::load(gg, f32_cpu());
      const std::vector<double> want = as_f64(load_npy(ref));
      const std::vector<double> got = as_f64(prefill(*m, ids, DType::F16));
      KvCache c = m->make_cache(ids.size(), DType::F16);  // and decode, one token at a time (matvec path)
      std::vector<double> dec;
      for (int32_t id : ids) {
        const auto v = as_f64(m->forward({id}, c));
        dec.insert(dec.end(), v.begin(), v.end());
      }
      const size_t V = m->config().vocab_size;
      const double e = max_rel_err(got, want, V), ed = max_rel_err(dec, want, V);
      const double e0 = max_rel_err(std::vector<double>(got.begin(), got.begin() + V),
                                    std::vector<double>(want.begin(), want.begin() + V), V);
      EXPECT_LT(e0, t == "f16" ? 1e-3 : 1e-5) << name << " " << t << " position 0";
      std::printf(
          "%-8s %-6s vs llama.cpp: position 0 %.3g; prefill max rel err %.3g nmse %.3g; decode %.3g nmse %.3g\n", name,
          t.c_str(), e0, e, nmse(got, want), ed, nmse(dec, want));
      // Against the forward of the file's dequantized weights (gen_hf_ref.py): both sides differ from it
      // by their activation quantization (llama.cpp: 1.8e-2 Q8_0, 2.4e-2 Q4_K_M, 1.8e-2 Q4_0).
      const std::string dq = kDev + "hf_ref/" + name + "_" + t + "_dequantized.npy";
      if (fs::exists(dq)) {
        const double e_dq = max_rel_err(got, as_f64(load_npy(dq)), V);
        std::printf("%-8s %-6s vs its dequantized weights (f64): max rel err %.3g\n", name, t.c_str(), e_dq);
        EXPECT_LT(e_dq, 5e-2) << name << " " << t;
      }
      // For scale: each side's distance from the unquantized model (NumPy float64 forward).
      const std::vector<double> f64 = as_f64(load_npy(kDev + "hf_ref/" + name + ".npy"));
      std::printf("%-8s %-6s vs f64 unquantized: wick max rel err %.3g nmse %.3g, llama.cpp %.3g nmse %.3g\n", name,
                  t.c_str(), max_rel_err(got, f64, V), nmse(got, f64), max_rel_err(want, f64, V), nmse(want, f64));
      EXPECT_LT(e, bound) << name << " " << t;
      EXPECT_LT(ed, bound) << name << " " << t;
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no llama.cpp logits under " << kLlm << " (tests/fixtures/llm/gen_llamacpp.sh)";
}

// The TinyLlama-size check (gen_hf.py --big DIR on the GPU machine; too big to commit): run with
// WICK_LLM_BIG=DIR. f16 on the best device against transformers' f16 and f32 logits.
TEST(LlmParity, BigModelFromEnv) {
  const char* dir = std::getenv("WICK_LLM_BIG");
  if (!dir || !*dir) GTEST_SKIP() << "set WICK_LLM_BIG to a folder written by gen_hf.py --big";
  const nlohmann::json e = read_json(std::string(dir) + "/expected.json");
  const auto ids = ids_of(e["prompt_ids"]);
  LoadOptions o;
  o.device = Device::best();
  auto m = Model::load(dir, o);
  const std::vector<double> got = as_f64(prefill(*m, ids, std::nullopt));
  const std::vector<double> f32 = as_f64(load_npy(std::string(dir) + "/logits_f32.npy"));
  const std::vector<double> f16 = as_f64(load_npy(std::string(dir) + "/logits_f16.npy"));
  const double e32 = nmse(got, f32), e_hf = nmse(f16, f32);
  std::printf("big model on %s (%s): nmse vs transformers f32 %.3g (transformers f16: %.3g), weights %.2f GiB\n",
              m->device().name().c_str(), dtype_name(m->dtype()), e32, e_hf, m->weight_bytes() / double(1 << 30));
  EXPECT_LT(e32, std::max(4 * e_hf, 1e-5));
}

// GPU decode steps replay a recorded graph (wick::Graph) unless LoadOptions::graphs is false. The
// two must agree: the same tokens (teacher-forced) through both, f16 and bf16, logits compared per
// step; and a second cache (a new recording) must reproduce the first recording's logits exactly.
TEST(LlmParity, DecodeGraphMatchesOpByOpGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    // Q4_K_M: llama-quantize gives the last layer's v Q6_K, so q and k are one product and v another.
    for (const std::string file : {"model-f16.gguf", "model-q4_0.gguf", "model-q4_k_m.gguf"}) {
      if (!fs::exists(dir + "/" + file)) continue;
      for (DType dt : {DType::F16, DType::BF16}) {
        LoadOptions o;
        o.device = d;
        o.dtype = dt;
        o.graphs = false;
        auto eager = Model::load(dir + "/" + file, o);
        o.graphs = true;
        auto graphed = Model::load(dir + "/" + file, o);
        // Op by op; graph; graph on a new cache (recorded again). A one-token first step, then each id.
        std::vector<std::vector<float>> runs[3];
        for (int which = 0; which < 3; ++which) {
          Model& m = which == 0 ? *eager : *graphed;
          KvCache c = m.make_cache(2 * ids.size() + 1);
          (void)m.forward({ids[0]}, c);
          for (size_t i = 0; i < 2 * ids.size(); ++i)
            runs[which].push_back(m.forward({ids[i % ids.size()]}, c).to_vector<float>());
        }
        double worst = 0;
        for (size_t s = 0; s < runs[0].size(); ++s) {
          std::vector<double> a(runs[0][s].begin(), runs[0][s].end()), b(runs[1][s].begin(), runs[1][s].end());
          worst = std::max(worst, nmse(b, a));
          EXPECT_EQ(runs[2][s], runs[1][s]) << name << " " << file << " step " << s << ": a new recording differs";
        }
        std::printf("%-8s %-15s %-4s graph vs op by op: worst step nmse %.3g over %zu steps\n", name, file.c_str(),
                    dtype_name(dt), worst, runs[0].size());
        // The graph's attention (the split-key kernel over the whole cache) sums in another order than
        // the op-by-op one (the flash kernel, for these short caches). F16 files: f16/bf16 rounding of
        // that. Q4_0: the decode matvec quantizes activations to 8 bits, and the rounding differences
        // flip some of those codes (H100: 2.0e-4 .. 3.1e-4 f16, 3.1e-4 .. 5.5e-4 bf16 on these
        // hidden-64 models); both paths stay within QuantizedLogitsGpu's bounds against llama.cpp.
        const bool quant = file.find("q4_") != std::string::npos;
        EXPECT_LT(worst, quant ? 2e-3 : dt == DType::F16 ? 1e-5 : 3e-4) << name << " " << file;
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures under " << kLlm;
}

// Each decode fusion turned off (DecodeOptions), and all of them: the unfused ops give the default's
// logits up to rounding, step by step through the recorded decode graph. The bounds are
// DecodeGraphMatchesOpByOpGpu's (Q4 files: 8-bit activations whose codes may flip).
TEST(LlmParity, DecodeOptionsOffMatchTheFusedStepGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  std::vector<std::pair<std::string, DecodeOptions>> variants;
  for (bool DecodeOptions::*field :
       {&DecodeOptions::stack_qk, &DecodeOptions::q8_1_inputs, &DecodeOptions::rope_kv_append,
        &DecodeOptions::matmul_swiglu, &DecodeOptions::short_view}) {
    DecodeOptions o;
    o.*field = false;
    variants.emplace_back("one off", o);
  }
  variants.emplace_back("all off", DecodeOptions{false, false, false, false, false});
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    for (const std::string file : {"model-f16.gguf", "model-q4_0.gguf", "model-q4_k_m.gguf"}) {
      if (!fs::exists(dir + "/" + file)) continue;
      auto steps = [&](const DecodeOptions& opt) {
        LoadOptions o;
        o.device = d;
        o.dtype = DType::F16;
        o.decode = opt;
        auto m = Model::load(dir + "/" + file, o);
        KvCache c = m->make_cache(2 * ids.size() + 1);
        std::vector<std::vector<double>> out;
        for (size_t i = 0; i < 2 * ids.size(); ++i) {
          const std::vector<float> l = m->forward({ids[i % ids.size()]}, c).to_vector<float>();
          out.emplace_back(l.begin(), l.end());
        }
        return out;
      };
      const auto fused = steps(DecodeOptions{});
      const bool quant = file.find("q4_") != std::string::npos;
      for (size_t v = 0; v < variants.size(); ++v) {
        const auto plain = steps(variants[v].second);
        double worst = 0;
        for (size_t s = 0; s < fused.size(); ++s) worst = std::max(worst, nmse(plain[s], fused[s]));
        std::printf("%-8s %-17s variant %zu (%s): worst step nmse %.3g\n", name, file.c_str(), v,
                    variants[v].first.c_str(), worst);
        EXPECT_LT(worst, quant ? 2e-3 : 1e-5) << name << " " << file << " variant " << v;
      }
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures under " << kLlm;
}

// Decode steps on the GPU in f16, one token at a time through the prompt from an empty cache (the
// recorded decode graph after the first step), each step's logits against transformers' float64
// logits at that position: TransformersLogitsGpu's f16 bound, 1e-5 (an H200 measured 5.5e-7 .. 6.8e-7).
// The decode path's own kernels (the matrix-vector products, the decode attention over the cache,
// the fused norms and rope) are what it checks; the prefill tests above never reach them.
TEST(LlmParity, DecodeStepsHalfGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  size_t ran = 0;
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    const std::vector<double> f64 = as_f64(load_npy(dir + "/logits_f64.npy"));
    for (const std::string& path : {dir, dir + "/model-f16.gguf"}) {
      LoadOptions o;
      o.device = d;
      o.dtype = DType::F16;
      auto m = Model::load(path, o);
      const size_t vocab = m->config().vocab_size;
      ASSERT_EQ(f64.size(), ids.size() * vocab) << name;
      KvCache c = m->make_cache(ids.size());
      std::vector<double> got;
      for (int32_t id : ids) {
        const std::vector<float> l = m->forward({id}, c).to_vector<float>();
        ASSERT_EQ(l.size(), vocab) << name;
        got.insert(got.end(), l.begin(), l.end());
      }
      const double e = nmse(got, f64);
      std::printf("%-8s f16 %s %s decode steps: nmse vs f64 %.3g over %zu steps\n", name, d.name().c_str(),
                  path == dir ? "hf" : "gguf", e, ids.size());
      EXPECT_LT(e, 1e-5) << name << " " << path;
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no transformers fixtures under " << kLlm;
}

// A recorded step attends over the cache's first 256 rows while the position is below 256, and a
// second recording over the whole cache after that: 300 teacher-forced steps through both, each
// step's logits against op by op (the f16 file, f16), across the switch.
TEST(LlmParity, DecodeGraphAcrossTheShortViewGpu) {
  const Device d = Device::best();
  if (d.is_cpu()) GTEST_SKIP() << "no usable GPU: " << gpu_unavailable_reason();
  for (const char* name : kFamilies) {
    if (!have_fixture(name)) continue;
    const std::string dir = kLlm + name, file = dir + "/model-f16.gguf";
    if (!fs::exists(file)) continue;
    const auto ids = ids_of(read_json(dir + "/expected.json")["prompt_ids"]);
    LoadOptions o;
    o.device = d;
    o.dtype = DType::F16;
    o.graphs = false;
    auto eager = Model::load(file, o);
    o.graphs = true;
    auto graphed = Model::load(file, o);
    constexpr size_t kSteps = 300;
    std::vector<std::vector<float>> runs[2];
    for (int which = 0; which < 2; ++which) {
      Model& m = which == 0 ? *eager : *graphed;
      KvCache c = m.make_cache(kSteps + 20);
      for (size_t i = 0; i < kSteps; ++i) runs[which].push_back(m.forward({ids[i % ids.size()]}, c).to_vector<float>());
    }
    double worst_short = 0, worst_long = 0;
    for (size_t s = 0; s < kSteps; ++s) {
      std::vector<double> a(runs[0][s].begin(), runs[0][s].end()), b(runs[1][s].begin(), runs[1][s].end());
      double& worst = s < 256 ? worst_short : worst_long;
      worst = std::max(worst, nmse(b, a));
    }
    std::printf("%-8s graph vs op by op over %zu steps: worst nmse %.3g (positions < 256), %.3g (after)\n", name,
                kSteps, worst_short, worst_long);
    EXPECT_LT(worst_short, 1e-5) << name;
    EXPECT_LT(worst_long, 1e-5) << name;
    return;  // one family is enough: the recordings are the model's, not the family's
  }
  GTEST_SKIP() << "no fixtures under " << kLlm;
}

// LLaMA-family models against a NumPy float64 reference of tiny random-weight models of each family
// (tests/fixtures/llm/dev/gen_dev.py: HF directories and GGUFs), decode against prefill, the sliding
// window, file formats, errors. test_llm_model_parity.cpp holds the transformers / llama.cpp checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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
const char* kDevModels[] = {"llama", "llama3", "llama_linear", "qwen2", "qwen3"};
}  // namespace

// f32 logits of every prompt position against the float64 NumPy reference, from the safetensors
// directory (HF layout, rotate-half) and from the GGUF (llama: permuted q/k, interleaved rope;
// qwen: halves; llama3 scaling from config.json and from rope_freqs.weight). Measured: <= 3e-6.
TEST(LlmModel, DevModelsMatchNumpyReference) {
  for (const char* name : kDevModels) {
    const std::string dir = kDev + "dev_" + name;
    const auto ids = ids_of(read_json(dir + "/prompt.json")["prompt_ids"]);
    const std::vector<double> want = as_f64(load_npy(dir + "/logits.npy"));
    for (const std::string& path : {dir, dir + "/model.gguf"}) {
      SCOPED_TRACE(path);
      auto m = Model::load(path, f32_cpu());
      const size_t vocab = m->config().vocab_size;
      const Tensor got = prefill(*m, ids);
      ASSERT_EQ(got.shape(), (Shape{ids.size(), vocab}));
      EXPECT_EQ(got.dtype(), DType::F32);
      const double e = max_rel_err(as_f64(got), want, vocab);
      std::printf("%s: max rel err %.3g\n", path.c_str(), e);
      EXPECT_LT(e, 1e-5);
    }
  }
}

TEST(LlmModel, ConfigFromFiles) {
  auto q3 = Model::load(kDev + "dev_qwen3", f32_cpu());
  const ModelConfig& c = q3->config();
  EXPECT_EQ(c.arch, Arch::Qwen3);
  EXPECT_EQ(c.head_dim, 16u);  // != hidden / heads = 8
  EXPECT_EQ(c.n_kv_heads, 2u);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.tie_embeddings);
  auto g3 = Model::load(kDev + "dev_qwen3/model.gguf", f32_cpu());
  EXPECT_EQ(g3->config().head_dim, 16u);
  EXPECT_TRUE(g3->config().qk_norm);
  EXPECT_FALSE(g3->config().rope_interleaved);
  auto l3 = Model::load(kDev + "dev_llama3/model.gguf", f32_cpu());
  EXPECT_TRUE(l3->config().tie_embeddings);
  EXPECT_TRUE(l3->config().rope_interleaved);
  auto h3 = Model::load(kDev + "dev_llama3", f32_cpu());
  EXPECT_EQ(h3->config().rope_scaling, RopeScaling::Llama3);
  EXPECT_DOUBLE_EQ(h3->config().rope_factor, 8.0);
  for (const std::string p : {"dev_llama_linear", "dev_llama_linear/model.gguf"}) {
    auto lin = Model::load(kDev + p, f32_cpu());
    EXPECT_EQ(lin->config().rope_scaling, RopeScaling::Linear) << p;
    EXPECT_DOUBLE_EQ(lin->config().rope_factor, 2.5) << p;
  }
  auto q2 = Model::load(kDev + "dev_qwen2/model.gguf", f32_cpu());
  EXPECT_TRUE(q2->config().qkv_bias);
  // Weights on the device: f32 of every parameter (the tied output counts once).
  size_t params = 0;
  for (const auto& n : SafeTensors::open(kDev + "dev_qwen2/model.safetensors").names()) {
    size_t e = 1;
    for (size_t d : SafeTensors::open(kDev + "dev_qwen2/model.safetensors").shape(n)) e *= d;
    params += e;
  }
  EXPECT_EQ(q2->weight_bytes(), params * 4);
}

// Decoding one token at a time through the cache gives the batched prefill's logits, and so does a
// prefill split in two chunks (bottom-right causal alignment with cached keys).
TEST(LlmModel, DecodeMatchesPrefill) {
  for (const char* name : kDevModels) {
    SCOPED_TRACE(name);
    const std::string dir = kDev + "dev_" + name;
    const auto ids = ids_of(read_json(dir + "/prompt.json")["prompt_ids"]);
    for (const std::string& path : {dir, dir + "/model.gguf"}) {
      auto m = Model::load(path, f32_cpu());
      const size_t V = m->config().vocab_size;
      const std::vector<double> all = as_f64(prefill(*m, ids));
      KvCache cache = m->make_cache(ids.size(), DType::F32);
      std::vector<double> steps;
      for (size_t t = 0; t < ids.size(); ++t) {
        const Tensor l = m->forward({ids[t]}, cache);
        ASSERT_EQ(l.shape(), (Shape{1, V}));
        const auto v = as_f64(l);
        steps.insert(steps.end(), v.begin(), v.end());
        EXPECT_EQ(cache.pos(), t + 1);
      }
      EXPECT_LT(max_rel_err(steps, all, V), 1e-5);
      KvCache c2 = m->make_cache(ids.size(), DType::F32);
      const std::vector<int32_t> a(ids.begin(), ids.begin() + 5), b(ids.begin() + 5, ids.end());
      m->forward(a, c2);
      const auto tail = as_f64(m->forward(b, c2, true));
      const std::vector<double> want_tail(all.begin() + 5 * V, all.end());
      EXPECT_LT(max_rel_err(tail, want_tail, V), 1e-5);
      // clear() starts over: the same logits again.
      c2.clear();
      EXPECT_LT(max_rel_err(as_f64(m->forward(ids, c2, true)), all, V), 1e-6);
    }
  }
}

// The default cache (f16) and an f16 / bf16 compute dtype on the CPU stay close to the reference.
TEST(LlmModel, HalfPrecisionCloseToReference) {
  const std::string dir = kDev + "dev_llama";
  const auto ids = ids_of(read_json(dir + "/prompt.json")["prompt_ids"]);
  const std::vector<double> want = as_f64(load_npy(dir + "/logits.npy"));
  auto m = Model::load(dir, f32_cpu());
  KvCache c = m->make_cache(32);
  EXPECT_EQ(c.dtype(), DType::F16);
  EXPECT_EQ(c.bytes(), 2u * 2 * 2 * 32 * 8 * 2);  // K and V, layers, kv heads, ctx, head_dim, f16
  EXPECT_LT(nmse(as_f64(m->forward(ids, c, true)), want), 1e-5);
  for (DType dt : {DType::F16, DType::BF16}) {
    LoadOptions o;
    o.dtype = dt;
    auto h = Model::load(dir + "/model.gguf", o);
    EXPECT_EQ(h->dtype(), dt);
    const double e = nmse(as_f64(prefill(*h, ids, std::nullopt)), want);
    std::printf("%s compute, %s cache: nmse %.3g\n", dtype_name(dt), dtype_name(h->make_cache(1).dtype()), e);
    EXPECT_LT(e, dt == DType::F16 ? 1e-4 : 1e-3) << dtype_name(dt);
  }
}

TEST(LlmModel, CacheOverflowIsAnError) {
  auto m = Model::load(kDev + "dev_llama", f32_cpu());
  KvCache c = m->make_cache(4);
  m->forward({1, 2, 3}, c);
  const std::string w = what_of([&] { m->forward({4, 5}, c); });
  EXPECT_NE(w.find("capacity of 4"), std::string::npos) << w;
  EXPECT_EQ(c.pos(), 3u);  // unchanged by the failed call
  m->forward({4}, c);
  EXPECT_EQ(c.pos(), 4u);
  EXPECT_NE(what_of([&] { m->forward({5}, c); }).find("capacity"), std::string::npos);
  KvCache d = m->make_cache(8);
  EXPECT_NE(what_of([&] { m->forward({64}, d); }).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(what_of([&] { m->forward({}, d); }).find("no tokens"), std::string::npos);
  // More cache than memory: OutOfMemory saying how much (2 * 2 layers * 2 heads * 2^36 * 8 * 2 B).
  const std::string oom = what_of([&] { m->make_cache(size_t(1) << 36); });
  EXPECT_NE(oom.find("needs 8192.00 GiB"), std::string::npos) << oom;
  EXPECT_NE(oom.find("lower the context"), std::string::npos) << oom;
}

// A GGUF rewritten with one tensor dropped, one reshaped, or another architecture name.
TEST(LlmModel, BadFilesNameTheProblem) {
  const GGUFFile f = GGUFFile::open(kDev + "dev_llama/model.gguf");
  auto rewrite = [&](const std::string& path, const std::string& arch, const std::string& drop,
                     const std::string& reshape) {
    std::vector<std::pair<std::string, GGUFValue>> meta;
    for (const auto& [k, v] : f.metadata()) {
      if (k.rfind("GGUF.", 0) == 0) continue;
      meta.emplace_back(k, k == "general.architecture" ? GGUFValue::of_string(arch) : v);
      if (arch != "llama" && k.rfind("llama.", 0) == 0) meta.back().first = arch + k.substr(5);
    }
    std::vector<std::pair<std::string, Tensor>> ts;
    for (const auto& t : f.tensors()) {
      if (t.name == drop) continue;
      Tensor x = f.load(t.name);
      if (t.name == reshape) x = x.narrow(0, 0, x.dim(0) - 1).contiguous();
      ts.emplace_back(t.name, x);
    }
    save_gguf(path, meta, ts);
  };
  const std::string p1 = test::tmp_path("missing.gguf");
  rewrite(p1, "llama", "blk.1.ffn_up.weight", "");
  std::string w = what_of([&] { Model::load(p1); });
  EXPECT_NE(w.find("missing tensor blk.1.ffn_up.weight"), std::string::npos) << w;
  EXPECT_NE(w.find("(48, 32)"), std::string::npos) << w;
  const std::string p2 = test::tmp_path("shape.gguf");
  rewrite(p2, "llama", "", "blk.0.attn_k.weight");
  w = what_of([&] { Model::load(p2); });
  EXPECT_NE(w.find("blk.0.attn_k.weight has shape (15, 32), expected (16, 32)"), std::string::npos) << w;
  const std::string p3 = test::tmp_path("arch.gguf");
  rewrite(p3, "gpt2", "", "");
  w = what_of([&] { Model::load(p3); });
  EXPECT_NE(w.find("architecture 'gpt2' is not supported"), std::string::npos) << w;
  // HF side: an unknown model_type, and a directory missing a tensor.
  const fs::path d = fs::path(test::tmp_path("hf")).parent_path() / "hf_bert";
  fs::create_directories(d);
  nlohmann::json cfg = read_json(kDev + "dev_llama/config.json");
  cfg["model_type"] = "bert";
  std::ofstream(d / "config.json") << cfg.dump();
  fs::copy_file(kDev + "dev_llama/model.safetensors", d / "model.safetensors", fs::copy_options::overwrite_existing);
  w = what_of([&] { Model::load(d.string()); });
  EXPECT_NE(w.find("model_type 'bert' is not supported"), std::string::npos) << w;
  auto st = load_safetensors(kDev + "dev_llama/model.safetensors");
  st.erase("model.layers.0.self_attn.o_proj.weight");
  cfg["model_type"] = "llama";
  std::ofstream(d / "config.json") << cfg.dump();
  save_safetensors(st, (d / "model.safetensors").string());
  w = what_of([&] { Model::load(d.string()); });
  EXPECT_NE(w.find("missing tensor model.layers.0.self_attn.o_proj.weight"), std::string::npos) << w;
  EXPECT_NE(what_of([&] { Model::load(kDev + "no_such_model"); }).find("no such file"), std::string::npos);
}

// A family's own tensors are required in every layer: a qwen3 file without its q/k norms or a
// qwen2 file without its q/k/v biases is an Error naming the tensor (llama.cpp requires them too),
// never a model of another family. Layer 0 and the last layer, GGUF and Hugging Face layouts.
TEST(LlmModel, FamilyTensorsAreRequiredInEveryLayer) {
  auto drop_gguf = [](const std::string& from, const std::string& drop) {
    const GGUFFile f = GGUFFile::open(from);
    std::vector<std::pair<std::string, GGUFValue>> meta;
    for (const auto& [k, v] : f.metadata())
      if (k.rfind("GGUF.", 0) != 0) meta.emplace_back(k, v);
    std::vector<std::pair<std::string, Tensor>> ts;
    for (const auto& t : f.tensors())
      if (t.name != drop) ts.emplace_back(t.name, f.load(t.name));
    const std::string path = test::tmp_path("drop.gguf");
    save_gguf(path, meta, ts);
    return path;
  };
  const size_t last = Model::load(kDev + "dev_qwen3/model.gguf", f32_cpu())->config().n_layers - 1;
  for (const std::string& t :
       {std::string("blk.0.attn_q_norm.weight"), "blk." + std::to_string(last) + ".attn_k_norm.weight"}) {
    const std::string w = what_of([&] { Model::load(drop_gguf(kDev + "dev_qwen3/model.gguf", t), f32_cpu()); });
    EXPECT_NE(w.find("missing tensor " + t), std::string::npos) << w;
    EXPECT_NE(w.find("qwen3"), std::string::npos) << w;
  }
  for (const std::string& t : {"blk.0.attn_q.bias", "blk.0.attn_v.bias"}) {
    const std::string w = what_of([&] { Model::load(drop_gguf(kDev + "dev_qwen2/model.gguf", t), f32_cpu()); });
    EXPECT_NE(w.find("missing tensor " + t), std::string::npos) << w;
  }
  // The same in a Hugging Face directory, named as the checkpoint names it.
  const fs::path d = fs::path(test::tmp_path("hf")).parent_path() / "hf_qwen3_no_qnorm";
  fs::create_directories(d);
  fs::copy_file(kDev + "dev_qwen3/config.json", d / "config.json", fs::copy_options::overwrite_existing);
  auto st = load_safetensors(kDev + "dev_qwen3/model.safetensors");
  ASSERT_EQ(st.erase("model.layers.0.self_attn.q_norm.weight"), 1u);
  save_safetensors(st, (d / "model.safetensors").string());
  const std::string w = what_of([&] { Model::load(d.string(), f32_cpu()); });
  EXPECT_NE(w.find("missing tensor model.layers.0.self_attn.q_norm.weight"), std::string::npos) << w;
}

// A file claiming far more layers than it holds (llama.block_count = 2^24) fails at the first
// missing layer, naming its tensor, without allocating for the layers it claims (over 16 GB of
// layer objects and names before this was checked).
TEST(LlmModel, LayerCountBeyondTheTensorsFailsAtTheFirstMissingLayer) {
  const GGUFFile f = GGUFFile::open(kDev + "dev_llama/model.gguf");
  const size_t held = Model::load(kDev + "dev_llama/model.gguf", f32_cpu())->config().n_layers;
  std::vector<std::pair<std::string, GGUFValue>> meta;
  for (const auto& [k, v] : f.metadata())
    if (k.rfind("GGUF.", 0) != 0)
      meta.emplace_back(k, k == "llama.block_count" ? GGUFValue::of_u32(uint32_t(1) << 24) : v);
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& t : f.tensors()) ts.emplace_back(t.name, f.load(t.name));
  const std::string path = test::tmp_path("many_layers.gguf");
  save_gguf(path, meta, ts);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string w = what_of([&] { Model::load(path, f32_cpu()); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(w.find("missing tensor blk." + std::to_string(held) + ".attn_norm.weight"), std::string::npos) << w;
  EXPECT_LT(s, 5.0);
}

// An architecture outside the table: the error lists every supported one, for both file kinds.
TEST(LlmModel, UnknownArchitectureListsTheSupportedOnes) {
  const GGUFFile f = GGUFFile::open(kDev + "dev_llama/model.gguf");
  std::vector<std::pair<std::string, GGUFValue>> meta;
  for (const auto& [k, v] : f.metadata())
    if (k.rfind("GGUF.", 0) != 0) meta.emplace_back(k, k == "general.architecture" ? GGUFValue::of_string("mamba") : v);
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& t : f.tensors()) ts.emplace_back(t.name, f.load(t.name));
  const std::string path = test::tmp_path("mamba.gguf");
  save_gguf(path, meta, ts);
  std::string w = what_of([&] { Model::load(path); });
  EXPECT_NE(w.find("'mamba' is not supported; supported: llama, qwen2, qwen3, phi3, gemma3"), std::string::npos) << w;
  const fs::path d = fs::path(test::tmp_path("hf")).parent_path() / "hf_mamba";
  fs::create_directories(d);
  nlohmann::json cfg = read_json(kDev + "dev_llama/config.json");
  cfg["model_type"] = "mamba";
  std::ofstream(d / "config.json") << cfg.dump();
  w = what_of([&] { Model::load(d.string()); });
  EXPECT_NE(w.find("'mamba' is not supported; supported: llama, mistral, qwen2, qwen3, phi3, gemma3_text"),
            std::string::npos)
      << w;
  EXPECT_STREQ(arch_to_string(Arch::Mistral), "mistral");
  EXPECT_STREQ(arch_to_string(Arch::Qwen3), "qwen3");
  EXPECT_STREQ(arch_to_string(Arch::Phi3), "phi3");
  EXPECT_STREQ(arch_to_string(Arch::Gemma3), "gemma3");
}

// A mixture of experts under a dense family's name (Mixtral's GGUFs say llama; its config.json has
// num_local_experts) is an Error saying so, not a missing feed-forward tensor.
TEST(LlmModel, MixtureOfExpertsIsAnErrorNamingIt) {
  const GGUFFile f = GGUFFile::open(kDev + "dev_llama/model.gguf");
  std::vector<std::pair<std::string, GGUFValue>> meta;
  for (const auto& [k, v] : f.metadata())
    if (k.rfind("GGUF.", 0) != 0) meta.emplace_back(k, v);
  meta.emplace_back("llama.expert_count", GGUFValue::of_u32(8));
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& t : f.tensors()) ts.emplace_back(t.name, f.load(t.name));
  const std::string path = test::tmp_path("experts.gguf");
  save_gguf(path, meta, ts);
  std::string w = what_of([&] { Model::load(path); });
  EXPECT_NE(w.find("a mixture of experts (llama.expert_count = 8) is not supported"), std::string::npos) << w;
  const fs::path d = fs::path(test::tmp_path("hf")).parent_path() / "hf_experts";
  fs::create_directories(d);
  nlohmann::json cfg = read_json(kDev + "dev_llama/config.json");
  cfg["num_local_experts"] = 8;
  std::ofstream(d / "config.json") << cfg.dump();
  w = what_of([&] { Model::load(d.string()); });
  EXPECT_NE(w.find("a mixture of experts (num_local_experts = 8) is not supported"), std::string::npos) << w;
}

// A config.json key of the wrong JSON type is an Error that names the file, the key (rope settings
// with the object that holds them), the type and value found and the type expected; null is "unset".
TEST(LlmModel, ConfigJsonTypeErrorsNameTheKey) {
  struct Bad {
    const char* patch;  // merged into dev_llama3's config.json (RFC 7386)
    const char* message;
  };
  const std::string long_name(60, 'x');
  const Bad cases[] = {
      {R"({"tie_word_embeddings": "yes"})", R"("tie_word_embeddings" is a string ("yes"); expected a boolean)"},
      {R"({"attention_bias": "no"})", R"("attention_bias" is a string ("no"); expected a boolean)"},
      {R"({"use_sliding_window": 1})", R"("use_sliding_window" is a number (1); expected a boolean)"},
      {R"({"model_type": 7})", R"("model_type" is a number (7); expected a string)"},
      {R"({"model_type": ["llama"]})", R"("model_type" is an array (["llama"]); expected a string)"},
      {R"({"rope_scaling": "x"})", R"("rope_scaling" is a string ("x"); expected an object)"},
      {R"({"rope_parameters": [1]})", R"("rope_parameters" is an array ([1]); expected an object)"},
      {R"({"rope_scaling": {"rope_type": 3}})", R"("rope_scaling.rope_type" is a number (3); expected a string)"},
      {R"({"rope_scaling": {"rope_type": null, "type": false}})",
       R"("rope_scaling.type" is a boolean (false); expected a string)"},
      {R"({"rope_scaling": {"factor": "8"}})", R"("rope_scaling.factor" is a string ("8"); expected a number)"},
      {R"({"rope_scaling": null, "rope_parameters": {"rope_type": "linear", "factor": {}}})",
       R"("rope_parameters.factor" is an object ({}); expected a number)"},
      {R"({"rope_parameters": {"rope_theta": "1e4"}})",
       R"("rope_parameters.rope_theta" is a string ("1e4"); expected a number)"},
      {R"({"hidden_size": "32"})", R"("hidden_size" is a string ("32"); expected a number)"},
      {R"({"num_hidden_layers": true})", R"("num_hidden_layers" is a boolean (true); expected a number)"},
      {R"({"head_dim": [8]})", R"("head_dim" is an array ([8]); expected a number)"},
      {R"({"max_position_embeddings": "256"})", R"("max_position_embeddings" is a string ("256"); expected a number)"},
      {R"({"rms_norm_eps": "1e-5"})", R"("rms_norm_eps" is a string ("1e-5"); expected a number)"},
      {R"({"rope_theta": "500000"})", R"("rope_theta" is a string ("500000"); expected a number)"},
      {R"({"num_attention_heads": 2.5})", R"("num_attention_heads" is 2.5; expected a non-negative integer)"},
      {R"({"vocab_size": -64})", R"("vocab_size" is -64; expected a non-negative integer)"},
  };
  const fs::path d = fs::path(test::tmp_path("hf")).parent_path() / "hf_typed";
  fs::create_directories(d);
  const nlohmann::json base = read_json(kDev + "dev_llama3/config.json");
  auto error_of = [&](const nlohmann::json& cfg) -> std::pair<ErrorKind, std::string> {
    std::ofstream(d / "config.json") << cfg.dump();
    try {
      Model::load(d.string(), f32_cpu());
    } catch (const Error& e) {
      return {e.kind(), e.what()};
    }
    return {ErrorKind::Internal, "(no error)"};
  };
  for (const Bad& c : cases) {
    nlohmann::json cfg = base;
    cfg.merge_patch(nlohmann::json::parse(c.patch));
    const auto [kind, w] = error_of(cfg);
    SCOPED_TRACE(std::string(c.patch) + " -> " + w);
    EXPECT_EQ(kind, ErrorKind::Io);
    EXPECT_NE(w.find((d / "config.json").string()), std::string::npos);
    EXPECT_NE(w.find(c.message), std::string::npos);
  }
  // A long value is cut short.
  nlohmann::json cfg = base;
  cfg["model_type"] = {{"name", long_name}};
  const std::string w = error_of(cfg).second;
  EXPECT_NE(w.find(R"("model_type" is an object ({"name":"xxx)"), std::string::npos) << w;
  EXPECT_NE(w.find(R"(xxx...); expected a string)"), std::string::npos) << w;
  EXPECT_EQ(w.find(long_name), std::string::npos) << w;
  // null is the default, as absent: the model loads.
  cfg = base;
  for (const char* key : {"attention_bias", "use_sliding_window", "rope_parameters", "rms_norm_eps"})
    cfg[key] = nullptr;
  cfg["rope_scaling"]["low_freq_factor"] = nullptr;
  std::ofstream(d / "config.json") << cfg.dump();
  fs::copy_file(kDev + "dev_llama3/model.safetensors", d / "model.safetensors", fs::copy_options::overwrite_existing);
  auto m = Model::load(d.string(), f32_cpu());
  EXPECT_TRUE(m->config().tie_embeddings);
  EXPECT_FALSE(m->config().qkv_bias);
  EXPECT_DOUBLE_EQ(m->config().rms_eps, 1e-6);
  EXPECT_DOUBLE_EQ(m->config().rope_low_freq_factor, 1.0);
}

TEST(LlmModel, ProgressReportsEveryByte) {
  LoadOptions o = f32_cpu();
  std::vector<std::pair<size_t, size_t>> calls;
  o.progress = [&](size_t done, size_t total) { calls.emplace_back(done, total); };
  auto m = Model::load(kDev + "dev_qwen2/model.gguf", o);
  ASSERT_FALSE(calls.empty());
  size_t file_bytes = 0;
  const GGUFFile file = GGUFFile::open(kDev + "dev_qwen2/model.gguf");  // tensors() refers into it: keep it alive
  for (const auto& t : file.tensors()) file_bytes += t.nbytes;
  EXPECT_EQ(calls.back().first, file_bytes);
  EXPECT_EQ(calls.back().second, file_bytes);
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i].first, calls[i - 1].first);
}

// Mistral's sliding window (5 keys here, a 12-token prompt) against the NumPy reference's windowed
// mask: one prefill (split internally), one token at a time, and a prefill that starts past the window.
TEST(LlmModel, MistralSlidingWindow) {
  const std::string dir = kDev + "dev_mistral_swa";
  const auto ids = ids_of(read_json(dir + "/prompt.json")["prompt_ids"]);
  const std::vector<double> want = as_f64(load_npy(dir + "/logits.npy"));
  auto m = Model::load(dir, f32_cpu());
  EXPECT_EQ(m->config().arch, Arch::Mistral);
  EXPECT_EQ(m->config().sliding_window, 5u);
  const size_t V = m->config().vocab_size;
  EXPECT_LT(max_rel_err(as_f64(prefill(*m, ids)), want, V), 1e-5);
  KvCache c = m->make_cache(ids.size(), DType::F32);
  std::vector<double> steps;
  for (int32_t id : ids) {
    const auto v = as_f64(m->forward({id}, c));
    steps.insert(steps.end(), v.begin(), v.end());
  }
  EXPECT_LT(max_rel_err(steps, want, V), 1e-5);
  KvCache c2 = m->make_cache(ids.size(), DType::F32);
  m->forward({ids.begin(), ids.begin() + 7}, c2);
  const auto tail = as_f64(m->forward({ids.begin() + 7, ids.end()}, c2, true));
  EXPECT_LT(max_rel_err(tail, std::vector<double>(want.begin() + 7 * V, want.end()), V), 1e-5);
  // Last-token logits only: the last row.
  KvCache c3 = m->make_cache(ids.size(), DType::F32);
  EXPECT_LT(max_rel_err(as_f64(m->forward(ids, c3)), std::vector<double>(want.end() - V, want.end()), V), 1e-5);
  // Without the window the logits past position 4 differ: the test can see it.
  nlohmann::json cfg = read_json(dir + "/config.json");
  cfg.erase("sliding_window");
  const fs::path d = fs::path(test::tmp_path("x")).parent_path() / "no_window";
  fs::create_directories(d);
  std::ofstream(d / "config.json") << cfg.dump();
  fs::copy_file(dir + "/model.safetensors", d / "model.safetensors", fs::copy_options::overwrite_existing);
  auto full = Model::load(d.string(), f32_cpu());
  EXPECT_GT(max_rel_err(as_f64(prefill(*full, ids)), want, V), 1e-3);
}

// A directory with the weights in two shards named by model.safetensors.index.json, stored as bf16:
// the model loads from both files, defaults to f32 on the CPU and matches the reference to bf16's
// weight rounding; a shard missing from the directory is an Io error.
TEST(LlmModel, ShardedBf16Directory) {
  const std::string src = kDev + "dev_qwen2";
  const auto ids = ids_of(read_json(src + "/prompt.json")["prompt_ids"]);
  const std::vector<double> want = as_f64(load_npy(src + "/logits.npy"));
  const fs::path d = fs::path(test::tmp_path("x")).parent_path() / "sharded";
  fs::create_directories(d);
  fs::copy_file(src + "/config.json", d / "config.json", fs::copy_options::overwrite_existing);
  std::map<std::string, Tensor> a, b;
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (auto& [name, t] : load_safetensors(src + "/model.safetensors")) {
    const bool first = name.find("layers.1.") == std::string::npos;
    (first ? a : b)[name] = t.to_dtype(DType::BF16);
    index["weight_map"][name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  save_safetensors(a, (d / "model-00001-of-00002.safetensors").string());
  save_safetensors(b, (d / "model-00002-of-00002.safetensors").string());
  std::ofstream(d / "model.safetensors.index.json") << index.dump();
  auto m = Model::load(d.string());
  EXPECT_EQ(m->dtype(), DType::F32);
  const double e = nmse(as_f64(prefill(*m, ids)), want);
  EXPECT_LT(e, 1e-4);  // bf16 weights (8-bit mantissa) against the f32 ones
  EXPECT_GT(e, 1e-9);  // and they really were rounded
  fs::remove(d / "model-00002-of-00002.safetensors");
  const std::string w = what_of([&] { Model::load(d.string()); });
  EXPECT_NE(w.find("model-00002-of-00002.safetensors"), std::string::npos) << w;
}

// A GGUF whose matrices are BF16 (norms F32, as convert_hf_to_gguf.py --outtype bf16 writes): f32 on the
// CPU by default, close to the reference within bf16's weight rounding; on a GPU the default compute
// dtype follows the file (bf16).
TEST(LlmModel, Bf16Gguf) {
  const std::string src = kDev + "dev_qwen3";
  const GGUFFile f = GGUFFile::open(src + "/model.gguf");
  std::vector<std::pair<std::string, GGUFValue>> meta;
  for (const auto& kv : f.metadata())
    if (kv.first.rfind("GGUF.", 0) != 0) meta.push_back(kv);
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& t : f.tensors()) {
    const Tensor x = f.load(t.name);
    ts.emplace_back(t.name, x.rank() == 2 ? x.to_dtype(DType::BF16) : x);
  }
  const std::string path = test::tmp_path("bf16.gguf");
  save_gguf(path, meta, ts);
  const auto ids = ids_of(read_json(src + "/prompt.json")["prompt_ids"]);
  const std::vector<double> want = as_f64(load_npy(src + "/logits.npy"));
  auto m = Model::load(path);
  EXPECT_EQ(m->dtype(), DType::F32);
  const double e = nmse(as_f64(prefill(*m, ids)), want);
  EXPECT_LT(e, 1e-4);
  EXPECT_GT(e, 1e-9);
  if (Device::best().is_gpu()) {
    LoadOptions o;
    o.device = Device::best();
    auto g = Model::load(path, o);
    EXPECT_EQ(g->dtype(), DType::BF16);
    EXPECT_EQ(g->make_cache(8).dtype(), DType::BF16);
    EXPECT_LT(nmse(as_f64(prefill(*g, ids, std::nullopt)), want), 1e-3);
  }
}

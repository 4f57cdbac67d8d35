// Model hyper-parameters from GGUF metadata or a Hugging Face config.json.
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "archs.hpp"
#include "json_fields.hpp"
#include "wick/error.hpp"

namespace wick::llm::detail {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& msg) {
  throw Error(ErrorKind::Io, "model config (" + path + "): " + msg);
}

void check_sizes(const ModelConfig& c, const std::string& path) {
  auto need = [&](size_t v, const char* what) {
    if (v == 0) bad(path, std::string(what) + " must be positive");
    // Sizes far beyond any real model are a corrupt file, not a request to allocate terabytes.
    if (v > (size_t(1) << 24)) bad(path, std::string(what) + " = " + std::to_string(v) + " is implausibly large");
  };
  need(c.vocab_size, "vocab size");
  need(c.hidden, "hidden size");
  need(c.intermediate, "intermediate (feed-forward) size");
  need(c.n_layers, "layer count");
  need(c.n_heads, "attention head count");
  need(c.n_kv_heads, "key/value head count");
  need(c.head_dim, "head dim");
  if (c.n_heads % c.n_kv_heads != 0)
    bad(path, "attention heads (" + std::to_string(c.n_heads) + ") must be a multiple of key/value heads (" +
                  std::to_string(c.n_kv_heads) + ")");
  if (c.head_dim % 2 != 0) bad(path, "head dim " + std::to_string(c.head_dim) + " must be even for rotary embeddings");
  if (c.rope_dim == 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    bad(path, "rotary dims " + std::to_string(c.rope_dim) + " must be even and within the head dim " +
                  std::to_string(c.head_dim) + " (partial rotary rotates the first ones)");
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0)) bad(path, "rms eps and rope theta must be positive");
  if (c.rope_scaling != RopeScaling::None && !(c.rope_factor > 0)) bad(path, "rope scaling factor must be positive");
  if (!c.sliding_layers.empty() && c.sliding_layers.size() != c.n_layers)
    bad(path, "the sliding-window layer list has " + std::to_string(c.sliding_layers.size()) + " entries for " +
                  std::to_string(c.n_layers) + " layers");
  if (!(c.rope_local_theta >= 0) || !std::isfinite(c.rope_local_theta) || !(c.attention_scale >= 0) ||
      !(c.final_logit_softcap >= 0) || !std::isfinite(c.attention_scale) || !std::isfinite(c.final_logit_softcap))
    bad(path, "local rope base, attention scale and final logit soft-cap must be non-negative and finite");
  if (c.rope_scaling == RopeScaling::Yarn &&
      (!(c.rope_yarn_beta_fast > 0) || !(c.rope_yarn_beta_slow > 0) || c.rope_original_max_position == 0 ||
       !(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor)))
    bad(path, "YaRN needs positive beta_fast, beta_slow, original context and attention factor");
  if (c.rope_scaling == RopeScaling::LongRope) {
    for (const auto* f : {&c.rope_long_factors, &c.rope_short_factors}) {
      if (f->size() != c.rope_dim / 2)
        bad(path, "LongRoPE needs " + std::to_string(c.rope_dim / 2) +
                      " long and short factors (rotary dims / 2), got " + std::to_string(c.rope_long_factors.size()) +
                      " and " + std::to_string(c.rope_short_factors.size()));
      for (float v : *f)
        if (!(v > 0) || !std::isfinite(v)) bad(path, "LongRoPE factors must be positive and finite");
    }
    if (c.rope_original_max_position == 0) bad(path, "LongRoPE's original context length must be positive");
    if (!(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor))
      bad(path, "LongRoPE's attention factor must be positive and finite");
  }
}

}  // namespace

ModelConfig config_from_gguf(const GGUFFile& f, const std::string& path) {
  const GGUFValue* a = f.find("general.architecture");
  if (!a || a->type != GGUFType::String) bad(path, "GGUF metadata has no general.architecture string");
  ModelConfig c;
  c.arch_name = a->as_string();
  const ArchInfo* row = find_gguf_arch(c.arch_name);
  if (!row)
    throw Error(ErrorKind::Unsupported, "model (" + path + "): GGUF architecture '" + c.arch_name +
                                            "' is not supported; supported: " + supported_gguf_archs());
  c.arch = row->arch;
  const HParamKeys& k = row->keys;
  const std::string p = c.arch_name + ".";
  auto get_u = [&](const HParamKey& hk, std::optional<uint64_t> dflt) -> uint64_t {
    const std::string key = hk.gguf;
    const GGUFValue* v = f.find(p + key);
    if (!v) {
      if (dflt) return *dflt;
      bad(path, "GGUF metadata lacks " + p + key);
    }
    if (v->type == GGUFType::Array)
      throw Error(ErrorKind::Unsupported, "model (" + path + "): " + p + key +
                                              " is a per-layer array; only one value for all layers is supported");
    try {
      return v->as_u64();
    } catch (const Error& e) {
      bad(path, p + key + ": " + e.what());
    }
  };
  auto get_f = [&](const std::string& key, double dflt) -> double {
    const GGUFValue* v = f.find(p + key);
    if (!v) return dflt;
    try {
      return v->as_f64();
    } catch (const Error& e) {
      bad(path, p + key + ": " + e.what());
    }
  };
  c.max_position = get_u(k.context_length, 4096);
  c.hidden = get_u(k.hidden, std::nullopt);
  c.n_layers = get_u(k.n_layers, std::nullopt);
  c.intermediate = get_u(k.intermediate, std::nullopt);
  c.n_heads = get_u(k.n_heads, std::nullopt);
  c.n_kv_heads = get_u(k.n_kv_heads, c.n_heads);
  c.head_dim = get_u(k.head_dim, c.n_heads ? c.hidden / c.n_heads : 0);
  if (get_u(k.value_dim, c.head_dim) != c.head_dim)
    throw Error(ErrorKind::Unsupported, "model (" + path + "): key and value head dims differ");
  c.rope_dim = get_u(k.rope_dim, c.head_dim);
  c.rms_eps = get_f(k.rms_eps.gguf, 1e-5);
  c.rope_theta = get_f(k.rope_theta.gguf, 10000.0);
  if (const GGUFValue* v = f.find(p + "rope.scaling.type"); v && v->type == GGUFType::String) {
    const std::string& t = v->as_string();
    if (t == "linear") {
      c.rope_scaling = RopeScaling::Linear;
      c.rope_factor = get_f("rope.scaling.factor", 1.0);
    } else if (t == "yarn") {
      // As llama.cpp reads it: the factor, the original context, the ramp's ends; cos and sin scaled by
      // 0.1 ln(factor) + 1 (its yarn_attn_factor with ggml's own factor put back) times attn_factor.
      if (f.find(p + "rope.scaling.yarn_log_multiplier"))
        throw Error(ErrorKind::Unsupported, "model (" + path +
                                                "): YaRN with rope.scaling.yarn_log_multiplier "
                                                "(DeepSeek's mscale) is not supported");
      c.rope_scaling = RopeScaling::Yarn;
      c.rope_factor = get_f("rope.scaling.factor", 1.0);
      c.rope_original_max_position = get_u({"rope.scaling.original_context_length", nullptr}, c.max_position);
      c.rope_yarn_beta_fast = get_f("rope.scaling.yarn_beta_fast", 32.0);
      c.rope_yarn_beta_slow = get_f("rope.scaling.yarn_beta_slow", 1.0);
      c.rope_attn_factor =
          (c.rope_factor > 1 ? 0.1 * std::log(c.rope_factor) + 1 : 1.0) * get_f("rope.scaling.attn_factor", 1.0);
    } else if (t != "none") {
      throw Error(ErrorKind::Unsupported, "model (" + path + "): rope scaling '" + t +
                                              "' is not supported (supported: none, linear, yarn, llama3 via "
                                              "rope_freqs)");
    }
  } else if (f.find(p + "rope.scale_linear")) {
    c.rope_scaling = RopeScaling::Linear;
    c.rope_factor = get_f("rope.scale_linear", 1.0);
  }
  // LongRoPE (Phi-3's long-context files): the two factor tensors convert_hf_to_gguf.py writes.
  if (f.contains("rope_factors_long.weight") || f.contains("rope_factors_short.weight")) {
    for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"})
      if (!f.contains(t)) bad(path, std::string("has one of rope_factors_long/short.weight but not ") + t);
    c.rope_scaling = RopeScaling::LongRope;
    c.rope_long_factors = f.load("rope_factors_long.weight").to_dtype(DType::F32).to_vector<float>();
    c.rope_short_factors = f.load("rope_factors_short.weight").to_dtype(DType::F32).to_vector<float>();
    c.rope_original_max_position = get_u({"rope.scaling.original_context_length", nullptr}, c.max_position);
    c.rope_attn_factor = get_f("rope.scaling.attn_factor", 1.0);
  }
  const std::string emb = "token_embd.weight";
  if (!f.contains(emb)) bad(path, "missing tensor " + emb);
  const Shape es = f.tensor(emb).shape();
  c.vocab_size = es.size() == 2 ? es[0] : 0;
  c.tie_embeddings = !f.contains("output.weight");
  // The family decides its features (what llama.cpp reads), never the tensors of one layer.
  c.qkv_bias = row->qkv_bias;
  c.qk_norm = row->qk_norm;
  // convert_hf_to_gguf.py permutes llama q/k for llama.cpp's normal (interleaved) rope; qwen2/3
  // keep HF's order and use NEOX (halves).
  c.rope_interleaved = row->gguf_rope_interleaved;
  // Mixtral's GGUFs say llama with experts: not a dense llama whose feed-forward tensors are missing.
  if (const uint64_t experts = get_u({"expert_count", nullptr}, 0); experts > 0)
    throw Error(ErrorKind::Unsupported, "model (" + path + "): a mixture of experts (" + p +
                                            "expert_count = " + std::to_string(experts) + ") is not supported yet");
  if (k.sliding_window.gguf) c.sliding_window = get_u(k.sliding_window, 0);
  if (c.arch == Arch::Gemma3) {
    // As llama.cpp reads a gemma3 file: a window on layers l % pattern < pattern - 1 (pattern 6 unless the
    // file says), those rotating with base rope.freq_base_swa (10000 unless given) and no scaling; the
    // scale 1 / sqrt(head_dim), 1 / sqrt(hidden / heads) for the 62-layer (27B) shape; norms stored as 1 + w.
    if (c.sliding_window) {
      if (const GGUFValue* v = f.find(p + "attention.sliding_window_pattern"); v && v->type == GGUFType::Array)
        throw Error(ErrorKind::Unsupported, "model (" + path +
                                                "): a per-layer attention.sliding_window_pattern array "
                                                "is not supported; give one period");
      const uint64_t pattern = get_u({"attention.sliding_window_pattern", nullptr}, 6);
      for (size_t l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back(pattern == 0 || l % pattern < pattern - 1);
    }
    c.rope_local_theta = get_f("rope.freq_base_swa", 10000.0);
    c.attention_scale = 1.0 / std::sqrt(double(c.n_layers == 62 && c.n_heads ? c.hidden / c.n_heads : c.head_dim));
    c.final_logit_softcap = get_f("final_logit_softcapping", 0.0);
  }
  check_sizes(c, path);
  return c;
}

namespace {
ModelConfig parse_hf(const std::string& config_path) {
  std::ifstream in(config_path);
  if (!in) throw Error(ErrorKind::Io, "model: cannot open " + config_path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    bad(config_path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(config_path, "not a JSON object");
  // Every typed read goes through json_fields.hpp, whose errors name the key, what it holds and
  // what it should hold; absent and null (HF's "unset") give the default.
  const std::string context = "model config (" + config_path + ")";
  // transformers 5 keeps text settings under text_config for some models; read the top level.
  auto num = [&](const nlohmann::json& o, const char* key, const std::string& prefix = "") {
    return json_field<double>(o, key, context, prefix);
  };
  auto size = [&](const char* key, std::optional<size_t> dflt) -> size_t {
    if (!key) {
      if (dflt) return *dflt;
      bad(config_path, "no config.json key for a required size");
    }
    auto v = num(j, key);
    if (!v) {
      if (dflt) return *dflt;
      bad(config_path, std::string("missing \"") + key + "\"");
    }
    // Compared in double: size_t(*v) of a negative, fractional or huge value would not round-trip.
    if (!(*v >= 0 && *v < 0x1p63) || *v != double(size_t(*v)))
      bad(config_path, "\"" + std::string(key) + "\" is " + j[key].dump() + "; expected a non-negative integer");
    return size_t(*v);
  };
  ModelConfig c;
  c.arch_name = json_field_or<std::string>(j, "model_type", "", context);
  const ArchInfo* row = find_hf_type(c.arch_name);
  if (!row)
    throw Error(ErrorKind::Unsupported, "model (" + config_path + "): model_type '" + c.arch_name +
                                            "' is not supported; supported: " + supported_hf_types());
  c.arch = row->arch;
  const HParamKeys& k = row->keys;
  c.vocab_size = size(k.vocab_size.hf, std::nullopt);
  c.hidden = size(k.hidden.hf, std::nullopt);
  c.intermediate = size(k.intermediate.hf, std::nullopt);
  c.n_layers = size(k.n_layers.hf, std::nullopt);
  c.n_heads = size(k.n_heads.hf, std::nullopt);
  c.n_kv_heads = size(k.n_kv_heads.hf, c.n_heads);
  c.head_dim = size(k.head_dim.hf, c.n_heads ? c.hidden / c.n_heads : 0);
  c.rope_dim = c.head_dim;
  if (const auto prf = num(j, "partial_rotary_factor"); prf && *prf != 1.0) {
    if (!(*prf > 0 && *prf <= 1)) bad(config_path, "partial_rotary_factor must be in (0, 1]");
    c.rope_dim = size_t(double(c.head_dim) * *prf);  // Phi-4-mini: the first 3/4 of each head rotate
  }
  c.max_position = size(k.context_length.hf, 4096);
  c.rms_eps = num(j, k.rms_eps.hf).value_or(1e-6);
  // Rope settings: top-level rope_theta / rope_scaling (transformers 4), or rope_parameters
  // (transformers 5), which also holds rope_theta. rp_from keeps which of the two gave each key,
  // for the errors.
  nlohmann::json rp = nlohmann::json::object();
  std::map<std::string, std::string> rp_from;
  for (const char* name : {"rope_scaling", "rope_parameters"}) {
    if (const nlohmann::json* o = json_object_field(j, name, context)) {
      for (const auto& [key, v] : o->items()) {
        rp[key] = v;
        rp_from[key] = std::string(name) + ".";
      }
    }
  }
  // transformers 5 writes a model with two kinds of layers (Gemma 3) with one rope_parameters object per kind:
  // the full-attention layers' is the model's rope; the sliding layers' gives their base.
  std::optional<double> sliding_theta;
  if (const nlohmann::json* full = json_object_field(rp, "full_attention", context, "rope_parameters.")) {
    if (const nlohmann::json* sl = json_object_field(rp, "sliding_attention", context, "rope_parameters."))
      sliding_theta = num(*sl, "rope_theta", "rope_parameters.sliding_attention.");
    const nlohmann::json flat = *full;
    rp = flat;
    rp_from.clear();
    for (const auto& [key, v] : rp.items()) rp_from[key] = "rope_parameters.full_attention.";
  }
  auto rope_num = [&](const char* key) { return num(rp, key, rp_from[key]); };
  auto rope_str = [&](const char* key) { return json_field<std::string>(rp, key, context, rp_from[key]); };
  c.rope_theta = num(j, k.rope_theta.hf).value_or(rope_num("rope_theta").value_or(10000.0));
  const std::string rt = rope_str("rope_type").value_or(rope_str("type").value_or("default"));
  // The scaled rope's original context, from the given value or dflt, checked to be a positive integer.
  auto original_context = [&](std::optional<double> v, double dflt) {
    const double omp = v.value_or(dflt);
    if (!(omp >= 1 && omp < 1e9)) bad(config_path, "original_max_position_embeddings must be a positive integer");
    return omp;
  };
  if (rt == "llama3") {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_factor = rope_num("factor").value_or(8.0);
    c.rope_low_freq_factor = rope_num("low_freq_factor").value_or(1.0);
    c.rope_high_freq_factor = rope_num("high_freq_factor").value_or(4.0);
    c.rope_original_max_position = size_t(original_context(rope_num("original_max_position_embeddings"), 8192));
    if (c.rope_low_freq_factor == c.rope_high_freq_factor)
      bad(config_path, "llama3 rope scaling needs low_freq_factor != high_freq_factor");
  } else if (rt == "linear") {
    c.rope_scaling = RopeScaling::Linear;
    c.rope_factor = rope_num("factor").value_or(1.0);
  } else if (rt == "yarn") {
    // transformers' _compute_yarn_parameters; mscale / mscale_all_dim (DeepSeek's) are not supported.
    if (rp.contains("mscale") || rp.contains("mscale_all_dim"))
      throw Error(ErrorKind::Unsupported,
                  "model (" + config_path + "): YaRN with mscale / mscale_all_dim is not supported");
    c.rope_scaling = RopeScaling::Yarn;
    c.rope_factor = rope_num("factor").value_or(1.0);
    c.rope_original_max_position =
        size_t(original_context(rope_num("original_max_position_embeddings"), double(c.max_position)));
    c.rope_yarn_beta_fast = rope_num("beta_fast").value_or(32.0);
    c.rope_yarn_beta_slow = rope_num("beta_slow").value_or(1.0);
    c.rope_attn_factor =
        rope_num("attention_factor").value_or(c.rope_factor > 1 ? 0.1 * std::log(c.rope_factor) + 1 : 1.0);
  } else if (rt == "longrope" || rt == "su") {
    // transformers' _compute_longrope_parameters: the attention factor, when not given, from the ratio of
    // the context to the original one.
    c.rope_scaling = RopeScaling::LongRope;
    for (auto [key, out] : {std::pair{"long_factor", &c.rope_long_factors}, {"short_factor", &c.rope_short_factors}}) {
      const nlohmann::json* a = rp.contains(key) ? &rp[key] : nullptr;
      if (!a || !a->is_array()) bad(config_path, std::string("longrope rope scaling needs a list ") + key);
      for (const auto& v : *a) {
        if (!v.is_number()) bad(config_path, std::string("longrope ") + key + " holds a non-number: " + v.dump());
        out->push_back(v.get<float>());
      }
    }
    const auto top = num(j, "original_max_position_embeddings");
    const double omp =
        original_context(top ? top : rope_num("original_max_position_embeddings"), double(c.max_position));
    c.rope_original_max_position = size_t(omp);
    const double scale = double(c.max_position) / omp;
    c.rope_attn_factor =
        rope_num("attention_factor").value_or(scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(omp)) : 1.0);
  } else if (rt != "default") {
    throw Error(ErrorKind::Unsupported, "model (" + config_path + "): rope type '" + rt +
                                            "' is not supported (supported: default, linear, llama3, longrope, yarn)");
  }
  c.tie_embeddings = json_field_or(j, k.tie_embeddings.hf, false, context);
  // Qwen2 always has q/k/v bias; others say attention_bias (the loader also takes any bias present).
  // Read whatever the family, so a wrong type is an error on every family.
  const bool attention_bias = json_field_or(j, k.attention_bias.hf, false, context);
  c.qkv_bias = row->qkv_bias || attention_bias;
  c.qk_norm = row->qk_norm;
  c.rope_interleaved = false;
  for (const char* key : {"num_local_experts", "num_experts"})
    if (num(j, key).value_or(0) > 0)
      throw Error(ErrorKind::Unsupported, "model (" + config_path + "): a mixture of experts (" + key + " = " +
                                              j[key].dump() + ") is not supported yet");
  if (c.arch == Arch::Gemma3) {
    // transformers' Gemma3TextConfig: layer_types, else sliding_window_pattern (6): layer l slides unless
    // (l + 1) % pattern == 0; query_pre_attn_scalar^-1/2; RMSNorm weights applied as 1 + w.
    if (json_field_or(j, "attn_logit_softcapping", 0.0, context) != 0.0)
      throw Error(ErrorKind::Unsupported, "model (" + config_path + "): attn_logit_softcapping is not supported");
    if (const auto* lt = j.contains("layer_types") && j["layer_types"].is_array() ? &j["layer_types"] : nullptr) {
      for (const auto& t : *lt) {
        if (!t.is_string()) bad(config_path, "layer_types holds a non-string: " + t.dump());
        c.sliding_layers.push_back(t.get<std::string>() == "sliding_attention");
      }
      if (c.sliding_layers.size() != c.n_layers)
        bad(config_path, "layer_types has " + std::to_string(c.sliding_layers.size()) + " entries for " +
                             std::to_string(c.n_layers) + " layers");
    } else {
      const size_t pattern = size("sliding_window_pattern", 6);
      for (size_t l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back(pattern == 0 || (l + 1) % pattern != 0);
    }
    c.rope_local_theta = num(j, "rope_local_base_freq").value_or(sliding_theta.value_or(10000.0));
    c.attention_scale = 1.0 / std::sqrt(num(j, "query_pre_attn_scalar").value_or(double(c.head_dim)));
    c.final_logit_softcap = json_field_or(j, "final_logit_softcapping", 0.0, context);
    c.norm_weight_offset = 1.0;
  }
  if (k.sliding_window.hf) {
    c.sliding_window = size(k.sliding_window.hf, 0);
  } else if (json_field_or(j, "use_sliding_window", false, context)) {
    // Qwen2/3's window applies from layer max_window_layers on; not implemented.
    throw Error(ErrorKind::Unsupported, "model (" + config_path + "): use_sliding_window = true is not supported for " +
                                            c.arch_name +
                                            "; set it to false in config.json to run with full attention");
  }
  check_sizes(c, config_path);
  return c;
}
}  // namespace

ModelConfig config_from_hf(const std::string& config_path) {
  try {
    return parse_hf(config_path);
  } catch (const nlohmann::json::exception& e) {  // a read json_fields.hpp does not cover
    bad(config_path, e.what());
  }
}

}  // namespace wick::llm::detail

#pragma once
// Helpers shared by the LLM model suites (test_llm_model, test_llm_model_parity).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wick/llm/model.hpp"

namespace wick::llm::test_util {

namespace fs = std::filesystem;

inline const std::string kDev = std::string(WICK_FIXTURES) + "/llm/dev/";
inline const std::string kLlm = std::string(WICK_FIXTURES) + "/llm/";

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

inline std::vector<double> as_f64(const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); }

// max over positions of max|a - b| / max|b| within the position's row: the relative error the docs
// state for logits.
inline double max_rel_err(const std::vector<double>& a, const std::vector<double>& b, size_t vocab) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t r = 0; r * vocab < std::min(a.size(), b.size()); ++r) {
    double num = 0, den = 0;
    for (size_t i = r * vocab; i < (r + 1) * vocab; ++i) {
      num = std::max(num, std::abs(a[i] - b[i]));
      den = std::max(den, std::abs(b[i]));
    }
    worst = std::max(worst, num / den);
  }
  return worst;
}

// sum (a - b)^2 / sum b^2 over everything: the normalised MSE used for half-precision runs.
inline double nmse(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return num / den;
}

inline Tensor prefill(Model& m, const std::vector<int32_t>& ids, std::optional<DType> cache_dtype = DType::F32) {
  KvCache cache = m.make_cache(ids.size() + 4, cache_dtype);
  return m.forward(ids, cache, /*all_logits=*/true);
}

// Hugging Face directory `dir`'s model.safetensors copied into this test's temporary directory as `name`, beside
// the config.json that edit() makes of dir's: a config variant of a fixture. Returns the copy's path.
inline std::string hf_copy_with_config(const std::string& dir, const std::string& name,
                                       const std::function<void(nlohmann::json&)>& edit) {
  const fs::path out(test::tmp_path(name));
  fs::create_directories(out);
  fs::copy_file(dir + "/model.safetensors", out / "model.safetensors", fs::copy_options::overwrite_existing);
  nlohmann::json cfg = read_json(dir + "/config.json");
  edit(cfg);
  std::ofstream(out / "config.json") << cfg.dump();
  return out.string();
}

inline LoadOptions f32_cpu() {
  LoadOptions o;
  o.dtype = DType::F32;
  return o;
}

inline std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace wick::llm::test_util

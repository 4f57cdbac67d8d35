#include "test_util.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "wick/llm/sampler.hpp"

namespace wick::test {

std::string fixture_path(const std::string& name) { return std::string(WICK_FIXTURES) + "/" + name; }

std::vector<double> values(const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); }

::testing::AssertionResult all_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                                     double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok && bad++ < 8) msg << "\n  [" << i << "] got " << g << " want " << w;
  }
  if (bad) return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << msg.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& got, const std::vector<double>& want, double rtol, double atol) {
  return all_close(values(got), want, rtol, atol);
}

double rtol_for(DType d) {
  switch (d) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-5;
    case DType::F16: return 1e-3;
    case DType::BF16: return 8e-3;
    case DType::F8E4M3: return 7e-2;
    default: return 0;
  }
}

Tensor as_transposed(const Tensor& t) {
  return t.t().contiguous().t();  // same values; storage holds the transpose
}

Tensor as_offset(const Tensor& t) {
  Shape s = t.shape();
  if (s.empty()) s = {1};
  Shape head = s, tail = s;
  head[0] = 2;
  tail[0] = 1;
  Tensor big = Tensor::cat({Tensor::zeros(head, t.dtype(), t.device()), t.reshape(s),
                            Tensor::zeros(tail, t.dtype(), t.device())}, 0);
  return big.narrow(0, 2, s[0]).reshape(t.shape());
}

// One directory per test, emptied the first time the test asks for a path.
std::string tmp_path(const std::string& file) {
  namespace fs = std::filesystem;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir =
      fs::path(::testing::TempDir()) / "wick_tests" / (std::string(info->test_suite_name()) + "." + info->name());
  static std::string made;
  if (made != dir.string()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    made = dir.string();
  }
  return (dir / file).string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace wick::test

#include <fstream>

namespace wick::test {

nlohmann::json load_json_fixture(const std::string& name) {
  std::ifstream f(fixture_path(name));
  if (!f) throw std::runtime_error("missing fixture " + fixture_path(name));
  return nlohmann::json::parse(f);
}

std::vector<double> doubles_from_json(const nlohmann::json& data) {
  std::vector<double> out;
  for (const auto& x : data) {
    if (x.is_string()) {
      std::string s = x.get<std::string>();
      out.push_back(s == "nan" ? NAN : s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : std::stod(s));
    } else {
      out.push_back(x.get<double>());
    }
  }
  return out;
}

Tensor tensor_from_json(const nlohmann::json& j) {
  DType d = dtype_from_name(j.at("dtype").get<std::string>());
  Shape shape = j.at("shape").get<Shape>();
  std::vector<double> v = doubles_from_json(j.at("data"));
  if (d == DType::I64) {  // keep 64-bit integers exact
    std::vector<int64_t> iv;
    for (const auto& x : j.at("data")) iv.push_back(x.get<int64_t>());
    return Tensor::from_vector(iv, shape);
  }
  return Tensor::from_vector(v, shape).to_dtype(d);
}

std::vector<uint8_t> from_hex(const std::string& h) {
  std::vector<uint8_t> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

void expect_sampler_paths_agree(Device d, size_t n_vocab) {
  using llm::SamplingParams;
  std::vector<SamplingParams> settings(6);
  settings[1].repeat_penalty = 1.3;
  settings[2].repeat_penalty = 0.7;
  settings[2].top_k = 5;
  settings[3].temperature = 0.0;
  settings[3].repeat_penalty = 1.5;
  settings[4].top_p = 1.0;
  settings[4].min_p = 0.0;
  settings[4].top_k = 64;
  settings[5].temperature = 1.5;
  settings[5].top_k = 1000;
  settings[5].min_p = 0.0;
  const size_t rows = 6;
  // Rounded to 1/8: many ties. Row 4 has two +inf entries, row 5 a NaN.
  Tensor x = Tensor::randn({rows, n_vocab}, DType::F32, Device::cpu(), 11).affine(4, 0).round().affine(0.125, 0);
  std::vector<float> h = x.to_vector<float>();
  // Id 10 (in the history) just outside the top few of rows 0-3, and first once a penalty < 1 raises it.
  for (size_t r = 0; r < 4; ++r)
    h[r * n_vocab + 10] = 0.72f * *std::max_element(h.begin() + std::ptrdiff_t(r * n_vocab),
                                                     h.begin() + std::ptrdiff_t((r + 1) * n_vocab));
  h[4 * n_vocab + 7] = h[4 * n_vocab + n_vocab / 2] = std::numeric_limits<float>::infinity();
  h[5 * n_vocab + 3] = std::nanf("");
  const Tensor all = Tensor::from_data(h.data(), {rows, n_vocab}, DType::F32, d);
  for (size_t si = 0; si < settings.size(); ++si)
    for (uint64_t seed : {uint64_t(1), uint64_t(77)}) {
      SamplingParams p = settings[si];
      p.seed = seed;
      llm::Sampler host(p), dev(p);
      std::vector<int32_t> history = {3, int32_t(n_vocab) - 1, 3, 10, 42};
      for (size_t step = 0; step < 3 * rows; ++step) {
        const size_t r = step % rows;
        const int32_t want = host.sample(h.data() + r * n_vocab, n_vocab, history);
        const int32_t got = dev.sample(all.narrow(0, int64_t(r), 1), history);
        ASSERT_EQ(got, want) << "setting " << si << " seed " << seed << " step " << step << " row " << r;
        history.push_back(want);
      }
    }
}

}  // namespace wick::test

// Tests of the quantized parity cases' machinery (tools/check/quant_util.hpp, cases_quant.cpp) and
// of the file commands (file_tools.hpp): the random blocks are valid, the qmatmul bound is the
// derived one by hand, it accepts the CPU's results and rejects wrong ones, the activation-block
// check rejects a wrong quant or scale, and quantize_file's rules and output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "check/cases.hpp"
#include "check/file_tools.hpp"
#include "check/quant_util.hpp"
#include "test_util.hpp"
#include "wick/gguf.hpp"
#include "wick/io.hpp"

using namespace wick;
using namespace wick::check;
using wick::test::tmp_path;

namespace {

bool rejects(const std::function<void()>& f) {
  try {
    f();
  } catch (const ReferenceFailure&) {
    return true;
  }
  return false;
}

size_t k_for(GGMLType t) { return ggml_block_size(t) == 32 ? 32 * 5 : 512; }

}  // namespace

TEST(QuantCases, EveryBlockTypeHasCases) {
  const std::vector<GGMLType> types = supported_qtypes();
  EXPECT_EQ(types.size(), 15u);  // Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K..Q8_K IQ4_NL IQ4_XS MXFP4
  std::set<std::string> names;
  for (const Case& c : all_cases()) names.insert(c.full_name());
  for (GGMLType t : types) {
    const std::string n = ggml_type_name(t);
    for (const std::string& want :
         {"dequantize[" + n + "]", "qembedding[" + n + "]", "qmatmul[" + n + ",decode]", "qmatmul[" + n + ",prefill]"})
      EXPECT_TRUE(names.count(want)) << want;
  }
  for (const char* q : {"quantize[Q8_0]", "quantize[Q8_1]", "quantize[Q8_K]"}) EXPECT_TRUE(names.count(q)) << q;
}

TEST(QuantCases, RandomBlocksAreValid) {
  for (GGMLType t : supported_qtypes()) {
    const size_t k = k_for(t);
    std::vector<uint8_t> b = random_qblocks(t, 4, k, 3);
    ASSERT_EQ(b.size(), 4 * k / ggml_block_size(t) * ggml_type_size(t));
    EXPECT_EQ(b, random_qblocks(t, 4, k, 3));  // deterministic
    EXPECT_NE(b, random_qblocks(t, 4, k, 4));
    std::vector<float> w = QTensor::from_bytes(t, {4, k}, b.data(), b.size()).dequantize().to_vector<float>();
    double amax = 0;
    for (float v : w) {
      ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(t);
      amax = std::max(amax, double(std::fabs(v)));
    }
    // Weights of order 0.1..1: big enough to matter, small enough for f16 outputs.
    EXPECT_GT(amax, 0.05) << ggml_type_name(t);
    EXPECT_LT(amax, 20.0) << ggml_type_name(t);
    if (t == GGMLType::Q8_K)  // bsums are the sums of 16 quants, as a dot product reads them
      for (size_t g = 0; g < 16; ++g) {
        int s = 0;
        for (size_t j = 0; j < 16; ++j) s += int8_t(b[4 + g * 16 + j]);
        int16_t stored;
        std::memcpy(&stored, b.data() + 260 + 2 * g, 2);
        EXPECT_EQ(stored, s);
      }
  }
  // Specials: an Inf scale and a NaN scale in the first blocks of rows 0 and 1.
  std::vector<uint8_t> b = random_qblocks(GGMLType::Q4_K, 2, 256, 1);
  set_special_scales(GGMLType::Q4_K, b, 2, 256);
  std::vector<float> w =
      QTensor::from_bytes(GGMLType::Q4_K, {2, 256}, b.data(), b.size()).dequantize().to_vector<float>();
  bool inf = false, nan = false;
  for (size_t i = 0; i < 256; ++i) inf = inf || std::isinf(w[i]);
  for (size_t i = 256; i < 512; ++i) nan = nan || std::isnan(w[i]);
  EXPECT_TRUE(inf);
  EXPECT_TRUE(nan);
}

// One Q8_0 block with d = 1 and q = 1 (w = 1 everywhere), x = (1, 0, ..., 0): by hand,
// amax = 1, d_x = 1/127, e = d_x (1/2 + 2^-16) + 127 max(d_x 2^-11, 2^-25) = d_x (1/2 + 2^-16) + 2^-11,
// E_act = 32 e, S = sum |w| (|x| + e) = 1 + 32 e, gamma = (32 + 16) 2^-24,
// worst-case bound = E + (|y_ref| + E) 2^-24 + 2^-25 with E = E_act + gamma S and y_ref = 1;
// rms limit: (y - 1)^2 <= 16 var, var = 32 e^2 / 3 + (gamma S)^2 + ((1 + E) 2^-24)^2 + 2^-50.
TEST(QuantCases, QmatmulBoundByHand) {
  std::vector<uint8_t> w(34, 1);
  w[0] = 0x00;
  w[1] = 0x3c;  // f16 1.0
  std::vector<float> xv(32, 0.0f);
  xv[0] = 1.0f;
  Tensor x = Tensor::from_vector(xv, {1, 32});
  const double dx = 1.0 / 127, e = dx * (0.5 + 0x1p-16) + 0x1p-11, gs = 48 * 0x1p-24 * (1 + 32 * e);
  const double E = 32 * e + gs;
  const double bound = E + (1 + E) * 0x1p-24 + 0x1p-25;
  const double rms_limit = 4 * std::sqrt(32 * e * e / 3 + gs * gs + std::pow((1 + E) * 0x1p-24, 2) + 0x1p-50);
  ASSERT_LT(rms_limit, bound);  // one element: the rms limit is the tighter
  auto y_of = [](double v) { return Tensor::from_vector(std::vector<double>{v}, {1, 1}).to_dtype(DType::F32); };
  auto run = [&](double v, bool prefill = false) {
    check_qmatmul(GGMLType::Q8_0, w, 1, 32, x, y_of(v), prefill, "hand");
  };
  auto reason = [&](double v) {
    try {
      run(v);
    } catch (const ReferenceFailure& f) {
      return std::string(f.what());
    }
    return std::string();
  };
  EXPECT_EQ(reason(1.0), "");
  EXPECT_EQ(reason(1.0 + 0.999 * rms_limit), "");
  EXPECT_EQ(reason(1.0 - 0.999 * rms_limit), "");
  EXPECT_NE(reason(1.0 + 1.001 * rms_limit).find("root mean square"), std::string::npos);
  EXPECT_NE(reason(1.0 - 1.001 * bound).find("> bound"), std::string::npos);
  EXPECT_NE(reason(std::nan("")).find("> bound"), std::string::npos);
  // Prefill adds nothing here: the half rounding of x = 1 and w = 1 is exact, smaller than E_act.
  EXPECT_TRUE(rejects([&] { run(1.0 + 1.001 * rms_limit, true); }));
  EXPECT_FALSE(rejects([&] { run(1.0 + 0.999 * rms_limit, true); }));
  // A result of the wrong shape or dtype.
  EXPECT_TRUE(rejects([&] { check_qmatmul(GGMLType::Q8_0, w, 1, 32, x, y_of(1.0).reshape({1}), false, "hand"); }));
  EXPECT_TRUE(
      rejects([&] { check_qmatmul(GGMLType::Q8_0, w, 1, 32, x, y_of(1.0).to_dtype(DType::F16), false, "hand"); }));
}

// The CPU's own results pass, and a wrong weight row (another seed's blocks: what a decoder bug or
// a wrong row stride gives) fails, for every type and x dtype: the bound has teeth.
TEST(QuantCases, QmatmulBoundAcceptsCpuRejectsWrong) {
  for (GGMLType t : supported_qtypes()) {
    const size_t n = 5, k = k_for(t);
    const std::vector<uint8_t> good = random_qblocks(t, n, k, 21), other = random_qblocks(t, n, k, 22);
    QTensor q = QTensor::from_bytes(t, {n, k}, good.data(), good.size());
    QTensor wrong = QTensor::from_bytes(t, {n, k}, other.data(), other.size());
    for (DType d : {DType::F32, DType::F16, DType::BF16})
      for (size_t m : {size_t(1), size_t(9)}) {
        const bool prefill = m > 8;
        Tensor x = Tensor::randn({m, k}, d, Device::cpu(), 5);
        const std::string what = std::string(ggml_type_name(t)) + " " + dtype_name(d) + " m=" + std::to_string(m);
        EXPECT_FALSE(rejects([&] { check_qmatmul(t, good, n, k, x, q.matmul_t(x), prefill, what); })) << what;
        EXPECT_TRUE(rejects([&] { check_qmatmul(t, good, n, k, x, wrong.matmul_t(x), prefill, what); })) << what;
        // Every element 10% too large (a scale off): outside too.
        Tensor y = q.matmul_t(x);
        Tensor off = y.to_dtype(DType::F64).affine(1.1, 0.0).to_dtype(d);
        EXPECT_TRUE(rejects([&] { check_qmatmul(t, good, n, k, x, off, prefill, what); })) << what;
      }
  }
}

TEST(QuantCases, ActivationBlocksCheck) {
  for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q8_1, GGMLType::Q8_K}) {
    const size_t k = 512;
    Tensor x = Tensor::randn({2, k}, DType::F32, Device::cpu(), 9);
    const std::vector<double> xv = x.to_dtype(DType::F64).to_vector<double>();
    const std::vector<uint8_t> good = QTensor::quantize(x, t).to_bytes();
    const std::string what = ggml_type_name(t);
    EXPECT_FALSE(rejects([&] { check_activation_blocks(t, xv, good, 2, k, what); })) << what;
    const size_t qs = t == GGMLType::Q8_0 ? 2 : 4;
    std::vector<uint8_t> bad = good;
    bad[qs + 3] = uint8_t(bad[qs + 3] + 2);  // one quant off by 2
    EXPECT_TRUE(rejects([&] { check_activation_blocks(t, xv, bad, 2, k, what); })) << what;
    bad = good;
    if (t == GGMLType::Q8_K) {
      float d;
      std::memcpy(&d, bad.data(), 4);
      d *= 1.01f;
      std::memcpy(bad.data(), &d, 4);
    } else {
      bad[0] ^= 0x10;  // the f16 scale's mantissa
    }
    EXPECT_TRUE(rejects([&] { check_activation_blocks(t, xv, bad, 2, k, what); })) << what;
    if (t == GGMLType::Q8_1) {
      bad = good;
      bad[3] ^= 0x04;  // s's exponent
      EXPECT_TRUE(rejects([&] { check_activation_blocks(t, xv, bad, 2, k, what); }));
    }
    if (t == GGMLType::Q8_K) {
      bad = good;
      bad[260] ^= 1;  // bsums[0]
      EXPECT_TRUE(rejects([&] { check_activation_blocks(t, xv, bad, 2, k, what); }));
    }
  }
}

TEST(QuantizeFile, WhichTensorsAreQuantized) {
  const GGMLType q4 = GGMLType::Q4_0, k4 = GGMLType::Q4_K;
  EXPECT_EQ(quantize_skip_reason("blk.0.attn_q.weight", {64, 64}, q4), "");
  EXPECT_EQ(quantize_skip_reason("model.layers.0.mlp.up_proj.weight", {96, 32}, q4), "");
  EXPECT_NE(quantize_skip_reason("blk.0.attn_norm.weight", {64}, q4), "");        // rank 1
  EXPECT_NE(quantize_skip_reason("blk.0.attn_q.bias", {64, 64}, q4), "");         // not a weight
  EXPECT_NE(quantize_skip_reason("blk.0.ffn_gate_inp.weight", {8, 64}, q4), "");  // MoE router
  EXPECT_NE(quantize_skip_reason("blk.0.post_ffw_norm.weight", {2, 64}, q4), "");
  EXPECT_NE(quantize_skip_reason("blk.0.attn_q.weight", {64, 96}, k4), "");  // 96 is not whole 256-blocks
  EXPECT_EQ(quantize_skip_reason("blk.0.attn_q.weight", {64, 96}, q4), "");
  EXPECT_EQ(llama_ftype(GGMLType::Q8_0), 7u);
  EXPECT_EQ(llama_ftype(GGMLType::Q4_K), 15u);
  EXPECT_EQ(llama_ftype(GGMLType::MXFP4), 38u);
}

// safetensors -> Q8_0 GGUF: a weight quantized (its blocks equal QTensor::quantize's), a 1-D f16
// norm written F32, a weight whose rows are not whole blocks kept, the two metadata keys set; then
// GGUF -> GGUF keeps every key and refuses to requantize unless asked.
TEST(QuantizeFile, RoundTrip) {
  const std::string in = tmp_path("t1_quant_in.safetensors"), out = tmp_path("t1_quant_out.gguf"),
                    again = tmp_path("t1_quant_again.gguf");
  Tensor w = Tensor::randn({8, 64}, DType::F32, Device::cpu(), 1);
  Tensor norm = Tensor::rand({64}, DType::F16, Device::cpu(), 2, 0.5, 1.5);
  Tensor odd = Tensor::randn({4, 48}, DType::F32, Device::cpu(), 3);
  save_safetensors({{"layer.weight", w}, {"norm.weight", norm}, {"odd.weight", odd}}, in);
  QuantizeOptions o;
  o.in = in;
  o.out = out;
  o.type = GGMLType::Q8_0;
  size_t steps = 0;
  QuantizeSummary s = quantize_file(o, [&](const QuantizeStep& st) {
    ++steps;
    EXPECT_EQ(st.count, 3u);
    EXPECT_EQ(st.index, steps);
  });
  EXPECT_EQ(steps, 3u);
  EXPECT_EQ(s.tensors, 3u);
  EXPECT_EQ(s.quantized, 1u);
  GGUFFile f = GGUFFile::open(out);
  EXPECT_EQ(f.tensor("layer.weight").type, GGMLType::Q8_0);
  EXPECT_EQ(f.tensor("norm.weight").type, GGMLType::F32);
  EXPECT_EQ(f.tensor("odd.weight").type, GGMLType::F32);
  auto [p, nb] = f.raw("layer.weight");
  EXPECT_EQ(std::vector<uint8_t>(p, p + nb), QTensor::quantize(w, GGMLType::Q8_0).to_bytes());
  EXPECT_EQ(f.load("norm.weight").to_vector<float>(), norm.to_dtype(DType::F32).to_vector<float>());
  EXPECT_EQ(f.load("odd.weight").to_vector<float>(), odd.to_vector<float>());
  ASSERT_NE(f.find("general.file_type"), nullptr);
  EXPECT_EQ(f.find("general.file_type")->as_u64(), 7u);
  EXPECT_EQ(f.find("general.quantization_version")->as_u64(), 2u);

  // GGUF in: metadata kept in order, file_type replaced in place.
  o.in = out;
  o.out = again;
  o.type = GGMLType::Q4_0;
  try {
    quantize_file(o, {});
    ADD_FAILURE() << "requantizing without --allow-requantize";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-requantize"), std::string::npos) << e.what();
  }
  o.allow_requantize = true;
  quantize_file(o, {});
  GGUFFile g = GGUFFile::open(again);
  EXPECT_EQ(g.tensor("layer.weight").type, GGMLType::Q4_0);
  ASSERT_EQ(g.metadata().size(), f.metadata().size());
  for (size_t i = 0; i < g.metadata().size(); ++i) EXPECT_EQ(g.metadata()[i].first, f.metadata()[i].first);
  EXPECT_EQ(g.find("general.file_type")->as_u64(), 2u);
}

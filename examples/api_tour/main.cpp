// The README's "API in ten lines" between the markers (its #include is at the top), then checks of what it
// computed: exits 0 and prints "api_tour: OK" when every check holds, 1 otherwise.
#include <cmath>
#include <cstdio>
#include <vector>
#include <wick/wick.hpp>

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}
}  // namespace

int main() try {
  // ---- README
  // clang-format off
  using namespace wick;

  Device dev = Device::best();                                  // a GPU if built and present, else cpu
  Tensor x = Tensor::randn({256, 512}, DType::F16, dev, /*seed=*/7);
  Tensor w = Tensor::rand({512, 128}, DType::F16, dev, /*seed=*/8, -0.1, 0.1);
  Tensor y = x.matmul(w).gelu().to_dtype(DType::F32);           // (256, 128)
  Tensor m = y.max({-1}, /*keepdim=*/true);
  Tensor p = (y - m).exp() / (y - m).exp().sum({-1}, true);     // softmax by hand
  std::vector<float> v = p.to_vector<float>();                  // synchronises
  save_safetensors({{"p", p}}, "p.safetensors");
  // clang-format on
  // ---- end of README

  std::printf("wick %s, device %s, p is %s\n", WICK_VERSION, dev.name().c_str(), p.str().c_str());
  expect(p.shape() == Shape{256, 128} && p.dtype() == DType::F32, "p is (256, 128) f32");
  expect(v.size() == 256 * 128, "to_vector gives 256 * 128 values");

  // Softmax rows are probabilities: each in [0, 1], each row sums to 1 (checked in double here).
  double worst = 0;
  bool in_range = true;
  for (size_t r = 0; r < 256 && v.size() == 256 * 128; ++r) {
    double s = 0;
    for (size_t c = 0; c < 128; ++c) {
      float e = v[r * 128 + c];
      in_range = in_range && e >= 0.f && e <= 1.f;
      s += e;
    }
    worst = std::fmax(worst, std::fabs(s - 1.0));
  }
  std::printf("max |row sum - 1| = %.3g over 256 rows\n", worst);
  expect(in_range, "every probability is in [0, 1]");
  expect(worst < 1e-5, "every row sums to 1 within 1e-5");

  // The library's fused softmax agrees with the hand-written one.
  std::vector<float> fused = y.softmax_last_dim().to_vector<float>();
  double diff = 0;
  for (size_t i = 0; i < v.size() && i < fused.size(); ++i) diff = std::fmax(diff, std::fabs(fused[i] - v[i]));
  expect(diff < 1e-5, "softmax_last_dim matches the softmax by hand within 1e-5");

  // The file written above reads back bit for bit.
  std::vector<float> back = load_safetensors("p.safetensors").at("p").to_vector<float>();
  expect(back == v, "p.safetensors reads back the same values");

  // A matmul small enough to do by hand: [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}, dev);
  Tensor b = Tensor::from_vector<float>({5, 6, 7, 8}, {2, 2}, dev);
  expect(a.matmul(b).to_vector<float>() == std::vector<float>{19, 22, 43, 50}, "2x2 matmul by hand");

  if (failures) {
    std::printf("api_tour: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("api_tour: OK\n");
  return 0;
} catch (const std::exception& e) {
  std::printf("api_tour: error: %s\n", e.what());
  return 1;
}

// The sampler's cost per token on a GPU row of logits: the tensor entry (top-k candidates found
// on the device, only they copied to the host) against the whole row copied and sampled on the
// host (what WICK_SAMPLE_ON_HOST=1 does), and top_k_last_dim alone; llama.cpp's default chain
// (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8). Public API only.
//   gpu_sampler [reps]   -> one line per vocabulary size, microseconds per call (median of 5 runs)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wick/llm/sampler.hpp"
#include "wick/wick.hpp"

using namespace wick;

namespace {

template <class F> double us_per_call(int reps, F&& f) {
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) f();
    runs.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  const Device d = Device::gpu(0);
  std::printf("%-8s %14s %14s %14s %10s\n", "vocab", "whole row us", "top-k path us", "top_k(40) us", "same ids");
  for (size_t n : {size_t(32000), size_t(128256), size_t(152064)}) {
    const Tensor logits = Tensor::randn({1, n}, DType::F32, d, 3).affine(3, 0);
    llm::SamplingParams p;
    llm::Sampler a(p), b(p);
    const std::vector<int32_t> history = {1, 2, 3};
    int same = 0;
    const double host = us_per_call(reps, [&] {
      const std::vector<float> row = logits.to_vector<float>();
      same += a.sample(row.data(), n, history);
    });
    const double dev = us_per_call(reps, [&] { same -= b.sample(logits, history); });
    const double topk = us_per_call(reps, [&] {
      auto t = logits.top_k_last_dim(40);
      (void)t.second.to_vector<uint32_t>();
    });
    // Both samplers drew the same number of times from the same seed: equal sums of ids.
    std::printf("%-8zu %14.1f %14.1f %14.1f %10s\n", n, host, dev, topk, same == 0 ? "yes" : "NO");
  }
  return 0;
}

#pragma once
// Choosing the next token from a row of logits. The chain is llama.cpp's default
// (common/sampling.cpp): repetition penalty, top-k, top-p, min-p, temperature, then a seeded
// draw, on the host. The same logits, history and seed give the same ids on every device and
// platform; from a tensor on a GPU only the top-k candidates are copied to the host.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace wick {
class Tensor;
}

namespace wick::llm {

struct SamplingParams {
  double temperature = 0.8;     // <= 0: greedy argmax after the repetition penalty (ties: the lowest id)
  size_t top_k = 40;            // 0: off (whole vocabulary)
  double top_p = 0.95;          // >= 1: off
  double min_p = 0.05;          // <= 0: off; keeps p >= min_p * p_max
  double repeat_penalty = 1.0;  // 1: off; a logit of a recent id: positive / penalty, negative * penalty
  size_t repeat_last_n = 64;    // how many of the last history ids the penalty looks at (0: off)
  uint64_t seed = 42;
  // sample(const Tensor&) copies the whole row to the host instead of the top k found on the
  // device: the same ids, for timing the two (`wick run --sample-on-host`).
  bool sample_on_host = false;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);  // Error(Argument) naming the field for an invalid setting

  // logits: n_vocab f32 values (NaN counts as -inf). history: ids seen so far (prompt and generated),
  // for the repetition penalty; ids outside [0, n_vocab) are ignored. Each non-greedy call draws one
  // random number. Error(Argument) when every logit is -inf or NaN.
  int32_t sample(const float* logits, size_t n_vocab, const std::vector<int32_t>& history);
  // The same id as sample() over the row's values, for a (n_vocab) or (1, n_vocab) f32 tensor on
  // any device: with top-k on (or greedy), the k best ids (plus the penalized ones) are found on the
  // tensor's device (Tensor::top_k_last_dim) and only they are copied to the host.
  int32_t sample(const Tensor& logits, const std::vector<int32_t>& history);

  const SamplingParams& params() const { return p_; }
  void reseed(uint64_t seed);  // restart the random sequence as if constructed with this seed

 private:
  double next_uniform();  // [0, 1), 53 bits from splitmix64
  // The chain over logits_[0, n), the penalty on pen_'s ids: entry i is id map_[i] (map_ ascending;
  // empty: id i), a set that holds every id that can be among the top k after the penalty, of a
  // vocabulary of n_all. Returns the drawn id.
  int32_t draw(size_t n, size_t n_all);
  // pen_ = the distinct ids in [0, n_vocab) among the history's last repeat_last_n, ascending; none
  // when the penalty is off.
  void set_penalized(const std::vector<int32_t>& history, size_t n_vocab);

  SamplingParams p_;
  uint64_t state_;
  // Scratch reused across calls (one per generation; not thread-safe).
  std::vector<float> logits_;
  std::vector<int32_t> ids_;
  std::vector<double> probs_;
  std::vector<int32_t> map_;
  std::vector<int32_t> pen_;
};

}  // namespace wick::llm

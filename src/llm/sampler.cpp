// The sampler chain of llama.cpp's common defaults (penalties, top-k, top-p, min-p, temperature,
// dist), on the host. Candidates are ordered by (logit descending, id ascending) so that ties and
// the draw do not depend on a sort's whims; probabilities are computed in double. The random
// numbers are splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, the same sequence on every
// platform, unlike std::discrete_distribution.
#include "wick/llm/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "wick/error.hpp"

namespace wick::llm {

namespace {

void check_param(bool ok, const char* field, double v, const char* need) {
  if (!ok)
    throw Error(ErrorKind::Argument,
                std::string("Sampler: SamplingParams.") + field + " = " + std::to_string(v) + " is invalid; " + need);
}

}  // namespace

Sampler::Sampler(const SamplingParams& p) : p_(p), state_(p.seed) {
  check_param(!std::isnan(p.temperature), "temperature", p.temperature, "use a number (<= 0 means greedy)");
  check_param(p.top_p >= 0, "top_p", p.top_p, "use a value in [0, 1] (1 turns top-p off)");
  check_param(p.min_p >= 0 && p.min_p <= 1, "min_p", p.min_p, "use a value in [0, 1] (0 turns min-p off)");
  check_param(p.repeat_penalty > 0 && std::isfinite(p.repeat_penalty), "repeat_penalty", p.repeat_penalty,
              "use a positive number (1 turns the penalty off)");
}

void Sampler::reseed(uint64_t seed) {
  p_.seed = seed;
  state_ = seed;
}

double Sampler::next_uniform() {
  state_ += 0x9E3779B97F4A7C15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(const float* logits, size_t n_vocab, const std::vector<int32_t>& history) {
  if (logits == nullptr || n_vocab == 0)
    throw Error(ErrorKind::Argument, "Sampler::sample: no logits (n_vocab = " + std::to_string(n_vocab) +
                                         "); pass the model's last row of logits");
  if (n_vocab > size_t(std::numeric_limits<int32_t>::max()))
    throw Error(ErrorKind::Argument,
                "Sampler::sample: n_vocab = " + std::to_string(n_vocab) + " does not fit a 32-bit token id");
  const float neg_inf = -std::numeric_limits<float>::infinity();
  logits_.assign(logits, logits + n_vocab);
  for (float& l : logits_)
    if (std::isnan(l)) l = neg_inf;

  // Repetition penalty, once per distinct id among the last repeat_last_n of the history.
  if (p_.repeat_penalty != 1.0 && p_.repeat_last_n > 0 && !history.empty()) {
    const size_t n = std::min(p_.repeat_last_n, history.size());
    ids_.assign(history.end() - std::ptrdiff_t(n), history.end());
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    const float pen = float(p_.repeat_penalty);
    for (int32_t id : ids_) {
      if (id < 0 || size_t(id) >= n_vocab) continue;
      float& l = logits_[size_t(id)];
      l = l <= 0 ? l * pen : l / pen;
    }
  }

  // The largest logit, the lowest id among equals.
  size_t best = 0;
  for (size_t i = 1; i < n_vocab; ++i)
    if (logits_[i] > logits_[best]) best = i;
  if (logits_[best] == neg_inf)
    throw Error(ErrorKind::Argument, "Sampler::sample: all " + std::to_string(n_vocab) +
                                         " logits are -inf or NaN; the model's output is broken");
  if (p_.temperature <= 0) return int32_t(best);
  if (logits_[best] == std::numeric_limits<float>::infinity()) {
    // Only the +inf entries have any probability; among them, keep the draw uniform.
    for (float& l : logits_) l = l == logits_[best] ? 0.0f : neg_inf;
  }

  // Candidates: the top_k best (all when top_k is 0), sorted by (logit desc, id asc).
  const size_t k = p_.top_k == 0 ? n_vocab : std::min(p_.top_k, n_vocab);
  ids_.resize(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) ids_[i] = int32_t(i);
  auto better = [this](int32_t a, int32_t b) {
    const float la = logits_[size_t(a)], lb = logits_[size_t(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids_.begin(), ids_.begin() + std::ptrdiff_t(k), ids_.end(), better);
  size_t m = k;
  while (m > 1 && logits_[size_t(ids_[m - 1])] == neg_inf) --m;  // -inf has no probability
  const double top = logits_[size_t(ids_[0])];

  // Top-p at temperature 1 over the candidates: the shortest prefix whose mass reaches top_p.
  if (p_.top_p < 1.0) {
    probs_.resize(m);
    double sum = 0;
    for (size_t i = 0; i < m; ++i) sum += probs_[i] = std::exp(double(logits_[size_t(ids_[i])]) - top);
    double cum = 0;
    for (size_t i = 0; i < m; ++i) {
      cum += probs_[i] / sum;
      if (cum >= p_.top_p) {
        m = i + 1;
        break;
      }
    }
  }
  // Min-p: keep p >= min_p * p_max, i.e. logit >= top + log(min_p); the best always stays.
  if (p_.min_p > 0) {
    const double floor_logit = top + std::log(p_.min_p);
    size_t keep = 1;
    while (keep < m && double(logits_[size_t(ids_[keep])]) >= floor_logit) ++keep;
    m = keep;
  }

  // Temperature, then one draw from the softmax of what is left.
  probs_.resize(m);
  double sum = 0;
  for (size_t i = 0; i < m; ++i) sum += probs_[i] = std::exp((double(logits_[size_t(ids_[i])]) - top) / p_.temperature);
  const double u = next_uniform() * sum;
  double cum = 0;
  for (size_t i = 0; i < m; ++i) {
    cum += probs_[i];
    if (u < cum) return ids_[i];
  }
  return ids_[m - 1];  // u landed in the last sliver lost to rounding
}

}  // namespace wick::llm

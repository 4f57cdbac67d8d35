// The sampler chain of llama.cpp's common defaults (penalties, top-k, top-p, min-p, temperature,
// dist), on the host. The cuts follow the strict order (logit descending, id ascending) and the
// draw walks the kept ids in ascending id order, so neither depends on a sort's whims; the
// probabilities are computed in double. The random numbers are splitmix64 (Steele, Lea, Flood
// 2014): one 64-bit state, the same sequence on every platform, unlike std::discrete_distribution.
#include "wick/llm/sampler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "wick/error.hpp"
#include "wick/tensor.hpp"

namespace wick::llm {

namespace {

void check_param(bool ok, const char* field, double v, const char* need) {
  if (!ok)
    throw Error(ErrorKind::Argument,
                std::string("Sampler: SamplingParams.") + field + " = " + std::to_string(v) + " is invalid; " + need);
}

}  // namespace

Sampler::Sampler(const SamplingParams& p) : p_(p), state_(p.seed) {
  check_param(std::isfinite(p.temperature), "temperature", p.temperature, "use a finite number (<= 0 means greedy)");
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
  logits_.assign(logits, logits + n_vocab);
  map_.clear();
  set_penalized(history, n_vocab);
  return draw(n_vocab, n_vocab);
}

int32_t Sampler::sample(const Tensor& logits, const std::vector<int32_t>& history) {
  if (logits.dtype() != DType::F32 || logits.rank() < 1 || logits.rank() > 2 || logits.numel() == 0 ||
      logits.numel() != logits.shape().back())
    throw Error(ErrorKind::Argument, "Sampler::sample: logits of shape " + shape_str(logits.shape()) + " " +
                                         dtype_name(logits.dtype()) + "; pass one row, (n_vocab) or (1, n_vocab) f32");
  const size_t n_vocab = logits.shape().back();
  const size_t want = p_.temperature <= 0 ? 1 : p_.top_k;
  auto whole_row = [&] {
    const std::vector<float> row = logits.to_vector<float>();
    return sample(row.data(), n_vocab, history);
  };
  if (p_.sample_on_host || want == 0 || n_vocab > size_t(std::numeric_limits<int32_t>::max())) return whole_row();
  // The penalty moves the logits of the history's ids, so the set is the top (k + their count)
  // before it: a penalty > 1 only lowers them, so every id of the top k after the penalty is in it;
  // one < 1 raises them, so those ids join the set too.
  set_penalized(history, n_vocab);
  const size_t kk = std::min(want + pen_.size(), n_vocab);
  const Tensor flat = logits.reshape({n_vocab});
  auto top = flat.top_k_last_dim(kk);
  std::vector<float> vals = top.first.to_vector<float>();
  const std::vector<uint32_t> ids = top.second.to_vector<uint32_t>();
  // A NaN sorts first on the device but counts as -inf here: then the top k is another set.
  for (float v : vals)
    if (std::isnan(v)) return whole_row();
  std::vector<std::pair<int32_t, float>> cand(kk);
  for (size_t i = 0; i < kk; ++i) cand[i] = {int32_t(ids[i]), vals[i]};
  if (!pen_.empty() && p_.repeat_penalty < 1.0) {
    const Tensor pid = Tensor::from_data(pen_.data(), {pen_.size()}, DType::I32, logits.device());
    const std::vector<float> pv = flat.index_select(pid, 0).to_vector<float>();
    for (size_t i = 0; i < pen_.size(); ++i) cand.emplace_back(pen_[i], pv[i]);
  }
  std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  cand.erase(std::unique(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
             cand.end());
  logits_.resize(cand.size());
  map_.resize(cand.size());
  for (size_t i = 0; i < cand.size(); ++i) {
    map_[i] = cand[i].first;
    logits_[i] = cand[i].second;
  }
  return draw(cand.size(), n_vocab);
}

void Sampler::set_penalized(const std::vector<int32_t>& history, size_t n_vocab) {
  pen_.clear();
  if (p_.repeat_penalty == 1.0 || p_.repeat_last_n == 0 || history.empty()) return;
  const size_t n = std::min(p_.repeat_last_n, history.size());
  for (auto it = history.end() - std::ptrdiff_t(n); it != history.end(); ++it)
    if (*it >= 0 && size_t(*it) < n_vocab) pen_.push_back(*it);
  std::sort(pen_.begin(), pen_.end());
  pen_.erase(std::unique(pen_.begin(), pen_.end()), pen_.end());
}

// n_vocab here counts the entries of logits_ (all of the vocabulary, n_all, or a candidate set).
int32_t Sampler::draw(size_t n_vocab, size_t n_all) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (float& l : logits_)
    if (std::isnan(l)) l = neg_inf;
  auto global = [&](size_t i) { return map_.empty() ? int32_t(i) : map_[i]; };

  // Repetition penalty, once per distinct id among the last repeat_last_n of the history.
  const float pen = float(p_.repeat_penalty);
  for (int32_t id : pen_) {
    size_t i = size_t(id);
    if (!map_.empty()) {
      const auto it = std::lower_bound(map_.begin(), map_.end(), id);
      if (it == map_.end() || *it != id) continue;
      i = size_t(it - map_.begin());
    }
    if (i >= n_vocab) continue;
    float& l = logits_[i];
    l = l <= 0 ? l * pen : l / pen;
  }

  // The largest logit, the lowest id among equals.
  size_t best = 0;
  for (size_t i = 1; i < n_vocab; ++i)
    if (logits_[i] > logits_[best]) best = i;
  if (logits_[best] == neg_inf)
    throw Error(ErrorKind::Argument, "Sampler::sample: all " + std::to_string(n_all) +
                                         " logits are -inf or NaN; the model's output is broken");
  if (p_.temperature <= 0) return global(best);
  if (logits_[best] == std::numeric_limits<float>::infinity()) {
    // Only the +inf entries have any probability; among them, keep the draw uniform.
    const float pos_inf = std::numeric_limits<float>::infinity();
    for (float& l : logits_) l = l == pos_inf ? 0.0f : neg_inf;
  }

  // The order (logit desc, id asc) is strict, so the top-k set and each cut below are the same
  // whatever the standard library's selection algorithm does.
  auto better = [this](int32_t a, int32_t b) {
    const float la = logits_[size_t(a)], lb = logits_[size_t(b)];
    return la > lb || (la == lb && a < b);
  };
  const double top = logits_[best];
  auto weight1 = [&](int32_t id) { return std::exp(double(logits_[size_t(id)]) - top); };  // temperature 1

  // Top-k: ids_[0, k) holds the k best, sorted by the order. (partial_sort, a heap of k, is ~10x
  // faster than nth_element here: one well-predicted comparison for most of a 150k vocabulary.)
  const size_t k = p_.top_k == 0 ? n_vocab : std::min(p_.top_k, n_vocab);
  ids_.resize(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) ids_[i] = int32_t(i);
  size_t sorted = 0;  // ids_[0, sorted) are the best, in order
  if (k < n_vocab) {
    std::partial_sort(ids_.begin(), ids_.begin() + std::ptrdiff_t(k), ids_.end(), better);
    sorted = k;
  }

  // Min-p: p >= min_p * p_max, i.e. logit >= top + log(min_p); a prefix of the order of m_min ids.
  const double floor_logit = p_.min_p > 0 ? top + std::log(p_.min_p) : -std::numeric_limits<double>::infinity();
  size_t m_min = k;
  if (p_.min_p > 0) {
    m_min = 0;
    for (size_t j = 0; j < k; ++j) m_min += double(logits_[size_t(ids_[j])]) >= floor_logit;
  }

  // Top-p: the shortest prefix of the order whose mass (at temperature 1, over the top k) reaches
  // top_p. It runs before min-p, but both are prefixes of one order, so the smaller cut wins and
  // the walk stops at min-p's. Without top-k the order is found only as far as needed: a histogram
  // of the logits (1/16 wide bins below the best) says which ids can be in the prefix; those are
  // sorted, and if rounding leaves the mass short the sort grows in chunks over the rest.
  size_t m_top_p = k;
  if (p_.top_p < 1.0) {
    constexpr size_t kBins = 1024;
    constexpr double kBinsPerUnit = 16;
    constexpr size_t kChunk = 256;
    auto bin_of = [&](int32_t id) {
      const double d = top - double(logits_[size_t(id)]);  // >= 0; +inf for -inf logits
      return d < double(kBins - 1) / kBinsPerUnit ? size_t(d * kBinsPerUnit) : kBins - 1;
    };
    // (When min-p leaves at most one chunk to sort, a partial sort is cheaper than the histogram.)
    const bool use_bins = sorted < m_min && m_min > kChunk;
    std::array<double, kBins> mass{};
    double total = 0;
    for (size_t j = 0; j < k; ++j) {
      const double w = weight1(ids_[j]);
      total += w;
      if (use_bins) mass[bin_of(ids_[j])] += w;
    }
    const double target = p_.top_p * total;
    const auto first = ids_.begin(), end_k = ids_.begin() + std::ptrdiff_t(k);
    if (use_bins) {
      double c = 0;
      for (size_t b = 0; b + 1 < kBins; ++b) {
        c += mass[b];
        if (c >= target * (1 + 1e-9)) {  // the margin covers summation order
          const auto mid = std::partition(first, end_k, [&](int32_t id) { return bin_of(id) <= b; });
          std::sort(first, mid, better);  // bins follow the order, so these are its first ids
          sorted = size_t(mid - first);
          break;
        }
      }
    }
    double cum = 0;
    for (size_t i = 0; i < m_min; ++i) {
      if (i == sorted) {  // the next chunk of the order: ids_[i, sorted)
        sorted = std::min(std::max(2 * sorted, kChunk), k);
        std::partial_sort(first + std::ptrdiff_t(i), first + std::ptrdiff_t(sorted), end_k, better);
      }
      cum += weight1(ids_[i]);
      if (cum >= target) {
        m_top_p = i + 1;
        break;
      }
    }
  }

  // The kept ids, ascending into ids_[0, m): the draw walks them in id order.
  size_t m = 0;
  if (m_top_p < m_min) {  // the sorted prefix
    m = m_top_p;
    std::sort(ids_.begin(), ids_.begin() + std::ptrdiff_t(m));
  } else if (k == n_vocab) {  // every id at or above min-p's floor (all of them without min-p)
    for (size_t i = 0; i < n_vocab; ++i)
      if (double(logits_[i]) >= floor_logit) ids_[m++] = int32_t(i);
  } else {  // the top k at or above the floor
    for (size_t j = 0; j < k; ++j)
      if (double(logits_[size_t(ids_[j])]) >= floor_logit) ids_[m++] = ids_[j];
    std::sort(ids_.begin(), ids_.begin() + std::ptrdiff_t(m));
  }

  // Temperature, then one draw from the softmax of what is left.
  probs_.resize(m);
  double sum = 0;
  for (size_t i = 0; i < m; ++i) sum += probs_[i] = std::exp((double(logits_[size_t(ids_[i])]) - top) / p_.temperature);
  const double u = next_uniform() * sum;
  double cum = 0;
  size_t last = 0;  // the last id with a nonzero weight, for u landing in the sliver lost to rounding
  for (size_t i = 0; i < m; ++i) {
    if (probs_[i] <= 0) continue;
    cum += probs_[i];
    last = i;
    if (u < cum) return global(size_t(ids_[i]));
  }
  return global(size_t(ids_[last]));
}

}  // namespace wick::llm

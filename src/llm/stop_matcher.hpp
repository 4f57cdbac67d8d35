#pragma once
// Stop strings over streamed text, for generate() and the engine.
#include <algorithm>
#include <string>
#include <vector>

namespace wick::llm::detail {

// Holds back the end of the text while it could be the start of a stop string, so that no text
// from a stop string on is ever emitted, even when the stop string spans several tokens.
class StopMatcher {
 public:
  explicit StopMatcher(const std::vector<std::string>& stops) {
    for (const auto& s : stops)
      if (!s.empty()) stops_.push_back(s);
  }
  bool stopped() const { return stopped_; }

  // Appends text; returns what is safe to emit now.
  std::string push(const std::string& text) {
    if (stopped_) return "";
    pending_ += text;
    size_t at = std::string::npos;
    for (const auto& s : stops_) at = std::min(at, pending_.find(s));
    if (at != std::string::npos) {
      stopped_ = true;
      std::string out = pending_.substr(0, at);
      pending_.clear();
      return out;
    }
    size_t hold = 0;  // the longest end of pending_ that begins some stop string
    for (const auto& s : stops_)
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
  }
  // At the end of generation: what was held back is plain text after all.
  std::string finish() {
    std::string out;
    out.swap(pending_);
    return out;
  }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace wick::llm::detail

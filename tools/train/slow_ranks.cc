#include "tools/train/slow_ranks.h"

#include <algorithm>

#include "core/error.h"

namespace ember::train {

SlowRankDetector::SlowRankDetector(int world_size, double ratio, int streak)
    : ratio_(ratio), streak_(streak), run_(static_cast<size_t>(world_size), 0) {
  EMBER_CHECK(world_size >= 1 && ratio > 1 && streak >= 1, "SlowRankDetector: expected world_size >= 1, ratio > 1, ",
              "streak >= 1, got ", world_size, ", ", ratio, ", ", streak);
}

std::vector<int> SlowRankDetector::observe(const std::vector<double>& busy_seconds) {
  EMBER_CHECK(busy_seconds.size() == run_.size(), "SlowRankDetector::observe: expected ", run_.size(),
              " ranks' times, got ", busy_seconds.size());
  std::vector<double> sorted = busy_seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  median_ = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  std::vector<int> named;
  for (size_t r = 0; r < n; ++r) {
    run_[r] = busy_seconds[r] > ratio_ * median_ ? run_[r] + 1 : 0;
    if (run_[r] == streak_) named.push_back(static_cast<int>(r));
  }
  return named;
}

}  // namespace ember::train

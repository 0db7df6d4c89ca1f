// Timing helpers shared by the benchmark programs: a monotonic clock in seconds and the median
// of a set of samples (the upper middle one for an even count).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace ember::bench {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace ember::bench

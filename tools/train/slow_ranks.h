// Naming a slow rank: one whose own work in a step (the step's time less the time it waited for
// the others' gradients) is more than `ratio` times the median rank's, `streak` steps in a row.
// Under DDP the ranks step together, so a slow rank's wall-clock step is everyone's: only the time
// each spends working tells them apart.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::train {

class SlowRankDetector {
 public:
  explicit SlowRankDetector(int world_size, double ratio = 1.2, int streak = 10);
  // One step's busy seconds per rank (the same on every rank); returns the ranks whose streak
  // reaches `streak` at this step: each is named once per streak.
  std::vector<int> observe(const std::vector<double>& busy_seconds);
  // The median of the last observed step.
  double median() const { return median_; }

 private:
  double ratio_;
  int streak_;
  std::vector<int> run_;  // steps in a row above the bound, per rank
  double median_ = 0;
};

}  // namespace ember::train

// Measuring a pipeline's schedule, shared by //tools/bench:pipeline and the pipeline tests: the
// bubble of stages of fixed cost, and each stage's stored activations from the caching
// allocator's peaks. Stage s runs on cuda:s.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/module.h"
#include "parallel/pipeline.h"

namespace ember::bench {

// A layer of fixed cost: its forward and its backward each wait `seconds` on the host (a stand-in
// for a kernel of known length; waiting, not spinning, so that p stage threads overlap on a host
// with fewer than p cores), around y = x * w with a scalar parameter w.
class FixedCostImpl : public nn::Cloneable<FixedCostImpl> {
 public:
  explicit FixedCostImpl(double seconds);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  double seconds;
  Tensor weight;
};
EMBER_MODULE(FixedCost);

struct BubbleRun {
  double measured = 0;  // mean over stages of 1 - busy / makespan
  double expected = 0;  // (p - 1) / (m + p - 1)
  double makespan_s = 0;
};

// One train_step of p FixedCost stages (one per device) over m micro-batches; the best (least
// idle) of `repeats` runs, since host scheduling noise only adds idle time.
BubbleRun measure_bubble(int64_t p, int64_t m, parallel::Schedule schedule, double seconds_per_action, int repeats = 3);

// Each stage's peak of stored activations during one train_step, in micro-batches: the stages are
// equal two-layer MLP blocks (a `hidden`-wide layer whose activations dominate), and the unit is
// calibrated per stage from GPipe runs with 1 and 2 micro-batches (peak(2) - peak(1)), the
// transient of a backward from peak(1) - unit.
std::vector<double> measure_held_activations(int64_t p, int64_t m, parallel::Schedule schedule, int64_t hidden = 4096);

}  // namespace ember::bench

// Measuring a pipeline's schedule, shared by //tools/bench:pipeline and the pipeline tests: the
// bubble of stages of fixed cost, and each device's stored activations from the caching
// allocator's peaks. Device d is cuda:d; with v virtual stages it holds stages d, d + p, ...
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
  double measured = 0;  // mean over devices of 1 - busy / makespan
  double expected = 0;  // the schedule's with equal actions: (p - 1) / (m + p - 1) for GPipe and 1F1B
  double makespan_s = 0;
};

// One train_step of p * v FixedCost stages (each waiting seconds_per_action / v, so a device's
// work is the same whatever v) over m micro-batches; the best (least idle) of `repeats` runs,
// since host scheduling noise only adds idle time.
BubbleRun measure_bubble(int64_t p, int64_t m, parallel::Schedule schedule, double seconds_per_action, int repeats = 3,
                         int64_t virtual_stages = 1);

// Each device's peak of stored activations during one train_step, in (stage, micro-batch) units:
// the p * v stages are equal two-layer MLP blocks (a `hidden`-wide layer whose activations
// dominate), and the unit is calibrated per device from one-block-per-device GPipe runs with 1 and
// 2 micro-batches (peak(2) - peak(1)), the transient of a backward from peak(1) - unit; the
// calibration is made once per (p, hidden) in a process (not thread-safe).
std::vector<double> measure_held_activations(int64_t p, int64_t m, parallel::Schedule schedule, int64_t hidden = 4096,
                                             int64_t virtual_stages = 1);

// What a schedule costs on a pipeline: the median step (first action to last, over `steps`
// train_steps after one warm-up step) and the largest device's peak of allocated bytes above what
// it held before the measured steps (activations, their gradients and the messages).
struct ScheduleRun {
  double step_s = 0;
  int64_t peak_bytes = 0;
};
ScheduleRun measure_schedule(parallel::Pipeline& pipe, const Tensor& input, const Tensor& target, int steps);

}  // namespace ember::bench

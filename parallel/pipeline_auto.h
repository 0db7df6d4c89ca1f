// Schedule::kAuto: a pipeline's schedule, virtual stages, micro-batch count and balance chosen by
// measuring each layer once per candidate micro-batch size and simulating every candidate
// (pipeline_schedule.h). The fastest whose simulated activation memory fits the budget wins.
//
//   PipelineOptions options;
//   options.memory_budget = 2ll << 30;  // activation bytes per device
//   Pipeline pipe(seq, devices, /*chunks=*/16, Schedule::kAuto, options);
//   pipe.train_step(x, y, loss_fn);     // the first step measures, chooses, then trains
//   pipe.plan()->chosen().schedule;     // and every candidate's simulated step time and memory
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/modules/container.h"
#include "parallel/pipeline_schedule.h"

namespace ember::parallel {

// One layer's cost on one micro-batch, measured on the layer's own device.
struct LayerCost {
  double forward_s = 0, backward_s = 0;
  int64_t held_bytes = 0;            // allocated by the forward and kept (saved tensors, output)
  int64_t backward_extra_bytes = 0;  // the backward's peak above what was allocated before it
  int64_t input_bytes = 0;
};

// Each layer's forward and backward (the gradient of its output taken as ones) on `input`, run
// layer after layer on each layer's device, the best of `repeats` times; memory from the device
// runtime's allocation counts (0 where a backend keeps none). Leaves no trace: no gradient, no
// running-statistics update, no draw from the global generator.
std::vector<LayerCost> measure_layer_costs(const nn::Sequential& sequential, const Tensor& input, int repeats = 2);

struct PipelineCandidate {
  Schedule schedule = Schedule::kGPipe;
  int64_t virtual_stages = 1, micro_batches = 1;
  std::vector<int64_t> balance;  // layers per stage, p * v of them, by measured time
  double simulated_step_s = 0;
  std::vector<int64_t> held_bytes;  // simulated peak per device
  bool fits = true;
  std::string describe() const;  // "interleaved v=2 m=8"
};

struct PipelinePlan {
  std::vector<PipelineCandidate> candidates;
  size_t chosen_index = 0;
  int64_t memory_budget = 0;   // 0: none
  double measured_step_s = 0;  // the first train_step run with the choice
  const PipelineCandidate& chosen() const { return candidates.at(chosen_index); }
};

// Pure: every schedule (GPipe, 1F1B, interleaved with each v of 2..8 that leaves every stage a
// layer) at every micro-batch count of `layer_costs` (measured at that count's micro-batch size),
// simulated on `devices` devices with each candidate's layers balanced by time. Recomputation
// keeps only each stage's input and reruns its forward in the backward. An Error when no candidate
// fits `memory_budget` (bytes per device; 0: none), naming the one that needs the least.
PipelinePlan plan_pipeline(const std::map<int64_t, std::vector<LayerCost>>& layer_costs, int64_t devices,
                           int64_t memory_budget, bool recompute);

}  // namespace ember::parallel

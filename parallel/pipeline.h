// Pipeline parallelism: a Sequential split into stages on several devices (CPU included), the
// batch split into micro-batches, each stage on its own host thread and stream so that stages
// overlap. Two schedules:
//   GPipe: every micro-batch forward, then every backward (last micro-batch first);
//   1F1B:  stage i runs min(p - 1 - i, m) forwards, then alternates one forward and one backward,
//          so it holds at most p - i micro-batches' activations.
// Any number of micro-batches works with either (fewer than the stages too): each stage runs a
// fixed list of actions, and a stage only waits for a message its neighbour's list sends.
//
//   auto pipe = std::make_shared<parallel::Pipeline>(seq, devices, /*chunks=*/8, Schedule::k1F1B);
//   optim::SGD opt(pipe->parameters(), ...);
//   opt.zero_grad();
//   auto step = pipe->train_step(x, y, loss_fn);  // forwards and backwards per the schedule
//   opt.step();
//
// forward(x) is the GPipe forward with a normal autograd result: backward() from a loss on it runs
// every stage's backward, pipelined, whatever the schedule. Without grad it only pipelines the
// forwards (evaluation).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/modules/container.h"
#include "nn/module.h"
#include "parallel/data_parallel.h"

namespace ember::parallel {

enum class Schedule { kGPipe, k1F1B };
const char* schedule_name(Schedule schedule);

struct PipelineOptions {
  // Layers per stage (sums to the Sequential's size). Empty: balanced by parameter count
  // (balance_by_parameters); balance_by_time measures instead.
  std::vector<int64_t> balance;
  // Activation recomputation: a stage keeps only its micro-batches' inputs and reruns their
  // forward in the backward (random ops replay the same numbers).
  bool checkpoint = false;
  // BatchNorm's running statistics updated once per mini-batch, from all its micro-batches'
  // statistics (torchgpipe's deferred_batch_norm), instead of once per micro-batch.
  bool deferred_batch_norm = false;
  // Along which dimension the batch splits into micro-batches.
  int64_t dim = 0;
};

// Contiguous split of `costs` into `parts` non-empty runs minimising the largest run's sum.
std::vector<int64_t> balance_costs(const std::vector<double>& costs, int64_t parts);
// Balance by each layer's parameter count (a parameterless layer counts as one element).
std::vector<int64_t> balance_by_parameters(const nn::Sequential& sequential, int64_t parts);
// Balance by each layer's measured forward + backward time on `sample` (run on sample's device;
// the layers must be there).
std::vector<int64_t> balance_by_time(const nn::Sequential& sequential, const Tensor& sample, int64_t parts,
                                     int repeats = 3);

// One step of a stage: micro-batch `micro_batch`'s forward or backward.
struct PipelineAction {
  int64_t micro_batch = 0;
  bool backward = false;
};
// Stage `stage`'s actions in order, for `micro_batches` micro-batches over `stages` stages.
std::vector<PipelineAction> schedule_actions(Schedule schedule, int64_t stage, int64_t stages, int64_t micro_batches);

struct PipelineStep {
  Tensor loss;    // detached scalar on the last stage's device: the whole batch's loss
  Tensor metric;  // the metric function's results summed over micro-batches, if given
};

// One action of the last run, for measuring the schedule: times from the run's start.
struct PipelineEvent {
  int64_t stage = 0, micro_batch = 0;
  bool backward = false;
  double start_s = 0, end_s = 0;
};

class Pipeline : public nn::Module {
 public:
  // Moves each stage's layers to its device. `devices` may repeat a device and may hold the CPU.
  Pipeline(nn::Sequential sequential, std::vector<Device> devices, int64_t chunks, Schedule schedule = Schedule::kGPipe,
           PipelineOptions options = {});
  ~Pipeline() override;

  // The micro-batches' outputs concatenated on the last stage's device.
  Tensor forward(const Tensor& input) override;
  // One training step's gradients under the schedule: `loss_fn` runs on the last stage per
  // micro-batch, and gradients accumulate into the parameters' .grad as the whole-batch loss's
  // would. The target moves to the last stage's device.
  PipelineStep train_step(const Tensor& input, const Tensor& target, const ReplicaLossFn& loss_fn,
                          LossReduction reduction = LossReduction::kMean, const ReplicaLossFn& metric = nullptr);

  int64_t num_stages() const { return static_cast<int64_t>(devices_.size()); }
  int64_t chunks() const { return chunks_; }
  Schedule schedule() const { return schedule_; }
  const std::vector<int64_t>& balance() const { return balance_; }
  const std::vector<Device>& devices() const { return devices_; }
  const nn::Sequential& stage(int64_t i) const { return stages_[static_cast<size_t>(i)]; }
  const nn::Sequential& sequential() const { return sequential_; }
  // The actions of the last forward/backward/train_step, in each stage's order.
  std::vector<PipelineEvent> last_events() const;

  // The bare Sequential's keys (no prefix): checkpoints load into the unsplit model and back.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const override;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const override;
  NamedTensors state_dict() const override;
  nn::LoadResult load_state_dict(const NamedTensors& state, bool strict = true) override;
  void train(bool on = true) override;
  // The stages stay where they were placed: an Error.
  void to(Device device) override;
  void to(DType dtype) override;
  std::string extra_repr() const override;

  struct Executor;

 private:
  nn::Sequential sequential_;
  std::vector<nn::Sequential> stages_;
  std::vector<Device> devices_;
  std::vector<int64_t> balance_;
  int64_t chunks_;
  Schedule schedule_;
  PipelineOptions options_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace ember::parallel

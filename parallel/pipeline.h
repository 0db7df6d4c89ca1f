// Pipeline parallelism: a Sequential split into stages on several devices (CPU included), the
// batch split into micro-batches, each device on its own host thread and stream so that stages
// overlap. Schedules (pipeline_schedule.h has their lists):
//   GPipe: every micro-batch forward, then every backward (last micro-batch first);
//   1F1B:  stage i runs min(p - 1 - i, m) forwards, then alternates one forward and one backward,
//          so it holds at most p - i micro-batches' activations;
//   interleaved 1F1B: the model splits into p * v stages, device d holding stages d, d + p, ...
//          (options.virtual_stages = v >= 2): the bubble shrinks about v-fold, for v times the
//          messages and a little more held activation (Megatron-LM's virtual stages);
//   auto:  measured and simulated at the first train_step (pipeline_auto.h).
// Any number of micro-batches works with each (fewer than the stages too): each device runs a
// fixed list of actions, and only waits for a message another device's list sends.
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
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nn/modules/container.h"
#include "nn/module.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_auto.h"
#include "parallel/pipeline_schedule.h"

namespace ember::parallel {

struct PipelineOptions {
  // Layers per stage (p * virtual_stages of them, summing to the Sequential's size). Empty:
  // balanced by parameter count (balance_by_parameters); balance_by_time measures instead.
  std::vector<int64_t> balance;
  // Chunks of the model per device: at least 2 for Schedule::kInterleaved1F1B, 1 for 1F1B; GPipe
  // takes any (each device's chunks in turn, no smaller bubble). kAuto chooses it.
  int64_t virtual_stages = 1;
  // kAuto: the activation bytes a device may hold at once (simulated; parameters, gradients and
  // optimizer state not counted); 0: no limit.
  int64_t memory_budget = 0;
  // kAuto: the micro-batch counts to consider. Empty: the divisors of the first train_step's batch
  // that are at most `chunks` (equal micro-batches, each size measured once).
  std::vector<int64_t> auto_chunks;
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

struct PipelineStep {
  Tensor loss;    // detached scalar on the last stage's device: the whole batch's loss
  Tensor metric;  // the metric function's results summed over micro-batches, if given
};

// One action of the last run, for measuring the schedule: times from the run's start.
struct PipelineEvent {
  int64_t stage = 0;         // of the p * v
  int64_t device_index = 0;  // into devices(): the thread and list that ran it
  int64_t micro_batch = 0;
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

  // Stages: p * v parts of the model; stage i runs on devices()[i % p].
  int64_t num_stages() const { return static_cast<int64_t>(stages_.size()); }
  int64_t num_devices() const { return static_cast<int64_t>(devices_.size()); }
  int64_t virtual_stages() const { return virtual_stages_; }
  int64_t chunks() const { return chunks_; }
  // kAuto until the first train_step has chosen.
  Schedule schedule() const { return schedule_; }
  const std::vector<int64_t>& balance() const { return balance_; }
  const std::vector<Device>& devices() const { return devices_; }
  const nn::Sequential& stage(int64_t i) const { return stages_[static_cast<size_t>(i)]; }
  Device stage_device(int64_t i) const { return devices_[static_cast<size_t>(i % num_devices())]; }
  // kAuto's candidates and choice, once made (null otherwise).
  const PipelinePlan* plan() const { return plan_ ? &*plan_ : nullptr; }
  // From the first action's start to the last one's end, in the last run.
  double last_step_seconds() const;
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
  // Splits the Sequential into balance_'s stages on their devices (again after kAuto's choice).
  void place_stages();
  void start_executor();  // pipeline.cc, where the Executor is defined
  // kAuto (pipeline_auto.cc): measures on a batch like `input`, chooses, and re-places the
  // stages; after the first step with the choice, logs its simulated and measured step time.
  void choose_schedule(const Tensor& input);
  void report_plan();

  nn::Sequential sequential_;
  std::vector<nn::Sequential> stages_;
  std::vector<Device> devices_;
  std::vector<int64_t> balance_;
  int64_t chunks_;
  Schedule schedule_;
  int64_t virtual_stages_;
  PipelineOptions options_;
  std::optional<PipelinePlan> plan_;
  std::set<int64_t> checked_micro_batches_;  // m whose lists were simulated once
  int64_t placements_ = 0;                   // place_stages calls: a forward's backward needs the same
  // Shared, not unique: the constructor (pipeline_module.cc) does not see the Executor's type.
  std::shared_ptr<Executor> executor_;
};

}  // namespace ember::parallel

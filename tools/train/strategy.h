// How one parallel mode of the train tool places and wraps the model, runs a training step, and
// reaches the module for evaluation and for checkpoints. run_training (trainer.cc) holds what every
// mode shares; each mode is one file, tools/train/strategy_<mode>.cc, listed in strategies.cc.
//   std::unique_ptr<TrainStrategy> strategy = make_strategy(config);  // before the data: DDP's group
//   strategy->wrap(model);                                           // placed, and wrapped
//   StepResult r = strategy->train_step(batch, loss_fn);             // forward and backward
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "core/autocast.h"
#include "core/ember_core.h"
#include "data/batch.h"
#include "nn/amp/grad_scaler.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/optim/optim.h"
#include "parallel/data_parallel.h"
#include "tools/train/config.h"

namespace ember::train {

// The loss of a batch's (or a replica's chunk's) logits against its targets.
using LossFn = parallel::ReplicaLossFn;

struct StepResult {
  Tensor loss;     // the batch's mean loss, a scalar
  Tensor correct;  // how many predictions were right, an int64 scalar
};

// A module to evaluate: its input goes to `input`, its logits come out on `output`.
struct EvalTarget {
  nn::Module* module = nullptr;
  Device input, output;
  std::shared_ptr<void> scope;  // held while the evaluation runs (fully sharded: the gathered parameters)
};

// The base class is the single-device mode: the model on --device, unwrapped.
class TrainStrategy {
 public:
  explicit TrainStrategy(const TrainConfig& config);
  virtual ~TrainStrategy() = default;

  // The ranks training together (DDP), or null for one process.
  virtual std::shared_ptr<comm::ProcessGroup> world() const { return nullptr; }
  int rank() const;
  int world_size() const;

  // Places `model` on its device(s) and wraps it; called once, before the optimizer is made.
  virtual void wrap(const std::shared_ptr<nn::Module>& model);
  // The bare model (the optimizer's parameters) and what trains (the wrapper, or the model).
  nn::Module& model() const { return *model_; }
  nn::Module& trained() const { return *trained_; }
  // Whose named_parameters() the optimizer steps: the bare model's, or the shards of a sharded one.
  virtual nn::Module& optimized() const { return *model_; }

  // Forward and backward of one batch, the forward and the loss under autocast(); the optimizer
  // step is the caller's.
  virtual StepResult train_step(const data::Batch& batch, const LossFn& loss_fn);

  // The autocast of --amp for the training device's type (disabled without --amp): what the
  // forward passes of training and evaluation run under, as PyTorch users write them. Threads
  // that run the caller's work (DataParallel's replicas, pipeline stages) inherit it.
  AutocastGuard autocast() const;
  // --amp fp16's gradient scaler, given after wrap() (null: none). The backward then starts from
  // the scaled loss, checkpoints carry the scaler's state, and DDP binds it to its group so that
  // every rank skips the same steps.
  virtual void use_scaler(amp::GradScaler* scaler) { scaler_ = scaler; }

  // What the evaluation after an epoch runs, and what --eval-only runs (the bare model on
  // --device, unless the model is split across devices).
  virtual EvalTarget evaluation_target();
  virtual EvalTarget eval_only_target();

  // Checkpoints hold the bare model's state_dict keys whatever the mode, so a run resumes in any
  // mode. Every rank calls these; by default rank 0 alone writes. A sharded run's checkpoint (a
  // directory, parallel/sharded_checkpoint.h) loads here into the bare model.
  virtual nn::Module& module_for_checkpoint() { return *model_; }
  virtual void save_checkpoint(const std::string& path, const optim::Optimizer& optimizer,
                               const optim::LRScheduler& schedule, const nn::TrainingState& state);
  virtual nn::TrainingState load_checkpoint(const std::string& path, optim::Optimizer& optimizer,
                                            optim::LRScheduler& schedule);
  virtual void load_weights(const std::string& path);

  // The devices whose peak memory the progress line reports, besides --device.
  virtual std::vector<Device> memory_devices() const { return {}; }
  // Host seconds the last step's backward waited at its end for gradient communication (what
  // overlap did not hide); 0 where the mode has none to wait for.
  virtual double exposed_comm_seconds() const { return 0; }
  // For the run's first line: where it trains ("cpu", "DataParallel on ..."), and what follows
  // "batch N per process" (how the batch splits, how gradients travel).
  virtual std::string where() const { return device_.str(); }
  virtual std::string batch_note() const { return ""; }

 protected:
  // Where a batch's images go, and where the logits (and so the targets) are.
  virtual Device input_device() const { return device_; }
  virtual Device output_device() const { return device_; }
  // loss.backward(), from the loss times the scaler's scale when there is a scaler.
  void backward(const Tensor& loss);

  const TrainConfig& config_;
  Device device_;
  std::shared_ptr<nn::Module> model_, trained_;
  amp::GradScaler* scaler_ = nullptr;
};

// The strategy of the mode `config` asks for (strategies.cc lists them).
std::unique_ptr<TrainStrategy> make_strategy(const TrainConfig& config);

// Shared by the modes' files.
// How many of `logits`' predictions (argmax over dim 1) equal `target`, as an int64 scalar.
Tensor count_correct(const Tensor& logits, const Tensor& target);
// "cuda:0,cuda:1".
std::string device_list(const std::vector<Device>& devices);
// A batch split into `parts` whose sizes differ by at most one: "4", or "5/4" when they differ.
std::string part_sizes(int64_t batch, int64_t parts);
// The stages' devices of a split model, and "ModelParallel on cuda:0,cuda:1 (layers 7/5 balanced
// by parameters" (the caller closes the parenthesis).
std::vector<Device> parse_devices(const std::vector<std::string>& names);
std::string split_where(const std::string& kind, const std::vector<Device>& stages,
                        const std::vector<int64_t>& balance);

}  // namespace ember::train

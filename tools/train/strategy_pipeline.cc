// Pipeline (--pipeline N): micro-batches overlap the stages, per the GPipe, 1F1B or interleaved
// schedule, or the one auto measures to be fastest; the backward runs inside its train_step.
#include <algorithm>

#include "models/sequential_form.h"
#include "parallel/pipeline.h"
#include "tools/train/strategy_split.h"

namespace ember::train {

namespace {

class PipelineStrategy : public SplitStrategy {
 public:
  explicit PipelineStrategy(const TrainConfig& config) : SplitStrategy(config, config.pipeline) {}

  // The stages go straight to their devices.
  void wrap(const std::shared_ptr<nn::Module>& model) override {
    parallel::PipelineOptions options;
    options.checkpoint = config_.recompute;
    options.virtual_stages = config_.virtual_stages;
    options.memory_budget = static_cast<int64_t>(config_.pipeline_memory_budget_mb * 1024 * 1024);
    const std::string& name = config_.pipeline_schedule;
    const auto schedule = name == "1f1b"          ? parallel::Schedule::k1F1B
                          : name == "interleaved" ? parallel::Schedule::kInterleaved1F1B
                          : name == "auto"        ? parallel::Schedule::kAuto
                                                  : parallel::Schedule::kGPipe;
    model_ = model;
    pipe_ =
        std::make_shared<parallel::Pipeline>(models::as_sequential(model), stages_, config_.chunks, schedule, options);
    trained_ = pipe_;
  }

  // The loss and count come back detached. The backward runs inside too (where autograd holds
  // autocast off), from each micro-batch's loss: with a scaler, the loss function scales them, on
  // the last stage's thread, one micro-batch at a time, and the step's loss is divided back.
  StepResult train_step(const data::Batch& batch, const LossFn& loss_fn) override {
    LossFn scaled_loss_fn = loss_fn;
    if (scaler_)
      scaled_loss_fn = [&](const Tensor& logits, const Tensor& target) {
        return scaler_->scale(loss_fn(logits, target));
      };
    AutocastGuard mixed_precision = autocast();
    parallel::PipelineStep r = pipe_->train_step(batch.data.to(input_device(), true), batch.target, scaled_loss_fn,
                                                 parallel::LossReduction::kMean, count_correct);
    if (scaler_) r.loss = r.loss / static_cast<double>(scaler_->get_scale());  // a power of two: exact
    return {r.loss, r.metric};
  }

  // Its micro-batches too.
  std::string where() const override {
    const int64_t parts = std::min(config_.chunks, config_.batch_size);
    return split_where("Pipeline", stages_, pipe_->balance()) + "; " + std::to_string(parts) + " micro-batch" +
           (parts == 1 ? " of " : "es of ") + part_sizes(config_.batch_size, parts) + ", " + config_.pipeline_schedule +
           " schedule" +
           (config_.virtual_stages > 1 ? " (" + std::to_string(config_.virtual_stages) + " virtual stages)" : "") +
           (config_.pipeline_schedule == "auto" ? " (chosen at the first step, logged)" : "") +
           (config_.recompute ? ", recompute" : "") + ")";
  }

 private:
  std::shared_ptr<parallel::Pipeline> pipe_;
};

}  // namespace

std::unique_ptr<TrainStrategy> make_pipeline_strategy(const TrainConfig& config) {
  if (config.pipeline.empty()) return nullptr;
  return std::make_unique<PipelineStrategy>(config);
}

}  // namespace ember::train

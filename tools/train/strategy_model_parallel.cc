// ModelParallel (--model-parallel N): the stages run in turn, one batch at a time.
#include "models/sequential_form.h"
#include "parallel/model_parallel.h"
#include "tools/train/strategy_split.h"

namespace ember::train {

namespace {

class ModelParallelStrategy : public SplitStrategy {
 public:
  explicit ModelParallelStrategy(const TrainConfig& config) : SplitStrategy(config, config.model_parallel) {}

  // The stages go straight to their devices.
  void wrap(const std::shared_ptr<nn::Module>& model) override {
    model_ = model;
    placed_ = std::make_shared<parallel::ModelParallel>(models::as_sequential(model), stages_);
    trained_ = placed_;
  }

  std::string where() const override { return split_where("ModelParallel", stages_, placed_->balance()) + ")"; }

 private:
  std::shared_ptr<parallel::ModelParallel> placed_;
};

}  // namespace

std::unique_ptr<TrainStrategy> make_model_parallel_strategy(const TrainConfig& config) {
  if (config.model_parallel.empty()) return nullptr;
  return std::make_unique<ModelParallelStrategy>(config);
}

}  // namespace ember::train

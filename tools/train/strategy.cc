// The single-device behaviour every mode starts from, and the helpers the modes' files share.
#include "tools/train/strategy.h"

#include "core/profiler.h"
#include "parallel/sharded_checkpoint.h"

namespace ember::train {

TrainStrategy::TrainStrategy(const TrainConfig& config) : config_(config), device_(Device::parse(config.device)) {}

int TrainStrategy::rank() const { return world() ? world()->rank() : 0; }
int TrainStrategy::world_size() const { return world() ? world()->size() : 1; }

void TrainStrategy::wrap(const std::shared_ptr<nn::Module>& model) {
  model->to(device_);
  model_ = trained_ = model;
}

AutocastGuard TrainStrategy::autocast() const {
  return AutocastGuard(device_.type, config_.amp == "fp16" ? kFloat16 : kBFloat16, config_.amp != "off");
}

StepResult TrainStrategy::train_step(const data::Batch& batch, const LossFn& loss_fn) {
  StepResult r;
  Tensor target = batch.target.to(output_device(), true);
  Tensor logits;
  {
    const profiler::Range range("forward", "forward and loss");
    const profiler::DeviceRange on_device(input_device(), "forward", "forward and loss");
    AutocastGuard mixed_precision = autocast();
    logits = trained_->forward(batch.data.to(input_device(), true));
    r.loss = loss_fn(logits, target);
  }
  {
    NoGradGuard no_grad;
    r.correct = count_correct(logits.detach(), target);
  }
  backward(r.loss);
  return r;
}

void TrainStrategy::backward(const Tensor& loss) {
  const profiler::DeviceRange on_device(output_device(), "backward", "backward");
  (scaler_ ? scaler_->scale(loss) : loss).backward();
}

EvalTarget TrainStrategy::evaluation_target() { return {trained_.get(), input_device(), output_device()}; }

EvalTarget TrainStrategy::eval_only_target() { return {model_.get(), device_, device_}; }

void TrainStrategy::save_checkpoint(const std::string& path, const optim::Optimizer& optimizer,
                                    const optim::LRScheduler& schedule, const nn::TrainingState& state) {
  if (rank() == 0)
    nn::save_checkpoint(path, module_for_checkpoint(), &optimizer, &schedule, state, &default_generator(), scaler_);
}

nn::TrainingState TrainStrategy::load_checkpoint(const std::string& path, optim::Optimizer& optimizer,
                                                 optim::LRScheduler& schedule) {
  if (parallel::is_sharded_checkpoint(path))
    return parallel::load_sharded_checkpoint(path, module_for_checkpoint(), &optimizer, &schedule, &default_generator(),
                                             scaler_);
  return nn::load_checkpoint(path, module_for_checkpoint(), &optimizer, &schedule, &default_generator(), scaler_);
}

void TrainStrategy::load_weights(const std::string& path) {
  if (parallel::is_sharded_checkpoint(path))
    parallel::load_sharded_checkpoint(path, module_for_checkpoint(), nullptr, nullptr, nullptr, nullptr);
  else
    nn::load_model_weights(path, module_for_checkpoint());
}

Tensor count_correct(const Tensor& logits, const Tensor& target) {
  return (logits.argmax(1) == target).to(kInt64).sum();
}

std::string device_list(const std::vector<Device>& devices) {
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) text += (i ? "," : "") + devices[i].str();
  return text;
}

std::string part_sizes(int64_t batch, int64_t parts) {
  const int64_t base = batch / parts, extra = batch % parts;
  return std::to_string(base + (extra > 0)) + (extra > 0 && base > 0 ? "/" + std::to_string(base) : "");
}

std::vector<Device> parse_devices(const std::vector<std::string>& names) {
  std::vector<Device> devices;
  for (const std::string& name : names) devices.push_back(Device::parse(name));
  return devices;
}

std::string split_where(const std::string& kind, const std::vector<Device>& stages,
                        const std::vector<int64_t>& balance) {
  std::string layers;  // "7/5": layers per stage
  for (size_t i = 0; i < balance.size(); ++i) layers += (i ? "/" : "") + std::to_string(balance[i]);
  return kind + " on " + device_list(stages) + " (layers " + layers + " balanced by parameters";
}

}  // namespace ember::train

// DataParallel (--data-parallel / --devices): one process, the model replicated on several devices
// each step, the batch split across them; each replica computes its chunk's loss and correct count.
#include "parallel/data_parallel.h"
#include "tools/train/strategy.h"

namespace ember::train {

namespace {

class DataParallelStrategy : public TrainStrategy {
 public:
  explicit DataParallelStrategy(const TrainConfig& config)
      : TrainStrategy(config), devices_(parse_devices(config.data_parallel)) {}

  void wrap(const std::shared_ptr<nn::Module>& model) override {
    model->to(device_);
    model_ = model;
    dp_ = std::make_shared<parallel::DataParallel>(model, devices_);
    trained_ = dp_;
  }

  // Only the scalars meet on --device.
  StepResult train_step(const data::Batch& batch, const LossFn& loss_fn) override {
    parallel::ReplicaLoss r;
    {
      AutocastGuard mixed_precision = autocast();
      r = dp_->forward_loss(batch.data, batch.target, loss_fn, parallel::LossReduction::kMean, count_correct);
    }
    backward(r.loss);
    return {r.loss, r.metric};
  }

  std::vector<Device> memory_devices() const override { return devices_; }

  std::string where() const override {
    return "DataParallel on " + device_list(devices_) + " (model on " + device_.str() + ", loss per replica)";
  }
  // How the batch splits across the devices (sizes differ by at most 1).
  std::string batch_note() const override {
    const int64_t n = static_cast<int64_t>(devices_.size());
    if (n > 1 && config_.batch_size >= n) return " (" + part_sizes(config_.batch_size, n) + " per device)";
    return "";
  }

 protected:
  // DataParallel copies each chunk of a (pinned) CPU batch straight to its device.
  Device input_device() const override { return Device(kCPU); }

 private:
  std::vector<Device> devices_;
  std::shared_ptr<parallel::DataParallel> dp_;
};

}  // namespace

std::unique_ptr<TrainStrategy> make_data_parallel_strategy(const TrainConfig& config) {
  if (config.data_parallel.empty()) return nullptr;
  return std::make_unique<DataParallelStrategy>(config);
}

}  // namespace ember::train

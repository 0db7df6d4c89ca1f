// DistributedDataParallel: one process per device under a launcher (mpirun), each on its shard of
// the data; the gradients are averaged across ranks in the backward.
#include "comm/init.h"
#include "parallel/ddp.h"
#include "parallel/grad_scaler_sync.h"
#include "tools/train/strategy.h"

namespace ember::train {

namespace {

class DdpStrategy : public TrainStrategy {
 public:
  explicit DdpStrategy(const TrainConfig& config) : TrainStrategy(config), world_(comm::init()) {}

  std::shared_ptr<comm::ProcessGroup> world() const override { return world_; }

  void wrap(const std::shared_ptr<nn::Module>& model) override {
    model->to(device_);
    model_ = model;
    parallel::DDPOptions options;
    options.bucket_cap_mb = config_.bucket_cap_mb;
    ddp_ = std::make_shared<parallel::DistributedDataParallel>(model, world_, options);
    trained_ = ddp_;
  }

  void use_scaler(amp::GradScaler* scaler) override {
    TrainStrategy::use_scaler(scaler);
    if (scaler) parallel::sync_grad_scaler(*scaler, *ddp_);
  }

  double exposed_comm_seconds() const override {
    return std::chrono::duration<double>(ddp_->reducer().stats().wait_time).count();
  }

  // Every rank evaluates with rank 0's batch-norm statistics, the ones its checkpoint holds (in
  // evaluation mode DDP's forward does not broadcast them).
  EvalTarget evaluation_target() override {
    ddp_->sync_buffers();
    return TrainStrategy::evaluation_target();
  }

  // The group sends CUDA tensors over NCCL (flag parsing refused EMBER_BACKEND=mpi with a CUDA
  // device) and CPU tensors over MPI.
  std::string batch_note() const override {
    if (device_.is_cuda()) return ", gradients over NCCL";
    return comm::read_environment().host_backend() == "gloo" ? ", gradients over Gloo" : ", gradients over MPI";
  }

 private:
  std::shared_ptr<comm::ProcessGroup> world_;
  std::shared_ptr<parallel::DistributedDataParallel> ddp_;
};

}  // namespace

// Under a launcher (even of one process) when no one-process mode was asked for: flag parsing
// refused those under a launcher of several.
std::unique_ptr<TrainStrategy> make_ddp_strategy(const TrainConfig& config) {
  if (!comm::read_environment().launched) return nullptr;
  return std::make_unique<DdpStrategy>(config);
}

}  // namespace ember::train

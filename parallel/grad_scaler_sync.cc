// The found-inf reducers of parallel/grad_scaler_sync.h. The all-reduce's wait orders the current
// stream on a device (no host block); the scaler's read of the flag comes after it.
#include "parallel/grad_scaler_sync.h"

namespace ember::parallel {

void sync_grad_scaler(amp::GradScaler& scaler, std::shared_ptr<comm::ProcessGroup> group) {
  EMBER_CHECK(group != nullptr, "sync_grad_scaler: the process group is null");
  scaler.set_found_inf_reducer(
      [group](Tensor& found_inf) { group->all_reduce(found_inf, comm::ReduceOp::Max)->wait(); });
}

namespace {

void sync_on_device(amp::GradScaler& scaler, std::shared_ptr<comm::ProcessGroup> group, Device device) {
  scaler.set_found_inf_reducer([group, device](Tensor& found_inf) {
    if (found_inf.device() != device) found_inf = found_inf.to(device);
    group->all_reduce(found_inf, comm::ReduceOp::Max)->wait();
  });
}

}  // namespace

void sync_grad_scaler(amp::GradScaler& scaler, const DistributedDataParallel& ddp) {
  sync_on_device(scaler, ddp.process_group(), ddp.device());
}

void sync_grad_scaler(amp::GradScaler& scaler, const ShardedDataParallel& sharded) {
  sync_on_device(scaler, sharded.process_group(), sharded.device());
}

}  // namespace ember::parallel

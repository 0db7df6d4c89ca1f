// SyncBatchNorm over a process group: per-rank statistics all-gathered and combined (the
// combination is replica_batch_norm.cc's), the backward's per-channel sums all-reduced.
#include "parallel/sync_batch_norm.h"

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::parallel {

void ProcessGroupBatchNormReducer::reduce_stats(Tensor& mean, Tensor& var, int64_t& count) {
  NoGradGuard no_grad;
  // On the statistics' device: a process group for GPUs gathers device memory.
  Tensor local = stats_row(mean, var, count);
  Tensor gathered = empty({group_->size() * local.numel()}, local.options());
  group_->all_gather_into_tensor(gathered, local)->wait();
  Tensor rows = gathered.view({group_->size(), local.numel()});
  // The count leaves the device (a host round trip per layer): the unbiased running variance
  // and the backward's scale are host scalars. item() copies after the gather, on the current stream.
  count = static_cast<int64_t>(rows.select(1, 0).sum().item<double>());
  combine_rows(rows, mean, var);
}

void ProcessGroupBatchNormReducer::reduce_grad_sums(Tensor& sum_dy, Tensor& sum_dy_xmu) {
  NoGradGuard no_grad;
  const int64_t channels = sum_dy.numel();
  Tensor both = cat({sum_dy.reshape({-1}), sum_dy_xmu.reshape({-1})});
  group_->all_reduce(both, comm::ReduceOp::Sum)->wait();
  sum_dy = both.narrow(0, 0, channels).view(sum_dy.sizes()).clone();
  sum_dy_xmu = both.narrow(0, channels, channels).view(sum_dy_xmu.sizes()).clone();
}

int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<comm::ProcessGroup> group) {
  EMBER_CHECK(group != nullptr,
              "convert_sync_batchnorm: the process group is null (for DataParallel's replicas, "
              "call convert_sync_batchnorm(module) without one)");
  return convert_batchnorm_with(module, std::make_shared<ProcessGroupBatchNormReducer>(std::move(group)));
}

}  // namespace ember::parallel

// SyncBatchNorm: batch norm whose training statistics are those of the global batch across a
// process group (the per-rank mean/variance/count are all-gathered and combined; the backward's
// per-channel sums are all-reduced). No collective runs in evaluation mode.
//
//   ember::parallel::convert_sync_batchnorm(*model, world);   // every BatchNorm1d/2d, in place
//   ember::parallel::convert_sync_batchnorm(*model);          // across DataParallel's replicas
#pragma once

#include <memory>

#include "autograd/functional.h"
#include "comm/process_group.h"
#include "nn/module.h"

namespace ember::parallel {

class ProcessGroupBatchNormReducer final : public BatchNormStatsReducer {
 public:
  explicit ProcessGroupBatchNormReducer(std::shared_ptr<comm::ProcessGroup> group) : group_(std::move(group)) {}
  void reduce_stats(Tensor& mean, Tensor& var, int64_t& count) override;
  void reduce_grad_sums(Tensor& sum_dy, Tensor& sum_dy_xmu) override;

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
};

// Across the replicas of DataParallel in this process: the replicas meet on their threads (in the
// backward too, which DataParallel runs per replica). Outside DataParallel, or with one replica,
// the batch's own statistics.
class ReplicaBatchNormReducer final : public BatchNormStatsReducer {
 public:
  void reduce_stats(Tensor& mean, Tensor& var, int64_t& count) override;
  void reduce_grad_sums(Tensor& sum_dy, Tensor& sum_dy_xmu) override;
};

// Batch statistics of several parts (ranks, replicas, a pipeline's micro-batches) as rows
// [count, mean..., var...] in float64 on the statistics' device, and the whole's mean and biased
// variance from the stacked rows [R, 1 + 2C] (into mean and var, keeping their dtype and shape).
Tensor stats_row(const Tensor& mean, const Tensor& var, int64_t count);
void combine_rows(const Tensor& rows, Tensor& mean, Tensor& var);

// Turns every BatchNorm1d/BatchNorm2d in `module` into a SyncBatchNorm over `group` (the modules
// stay where they are, so handles held by the model keep working). Returns how many it converted.
int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<comm::ProcessGroup> group);
// The same across DataParallel's replicas: call it before wrapping the module.
int convert_sync_batchnorm(nn::Module& module);

}  // namespace ember::parallel

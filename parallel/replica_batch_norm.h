// SyncBatchNorm across DataParallel's replicas in this process (no process group, no comm): the
// replicas meet on their threads to combine their batch statistics. Also the combination itself,
// which SyncBatchNorm over a process group (sync_batch_norm.h) and the pipeline's deferred
// statistics share.
//
//   ember::parallel::convert_sync_batchnorm(*model);   // every BatchNorm1d/2d, before DataParallel
#pragma once

#include <memory>

#include "autograd/functional.h"
#include "nn/module.h"

namespace ember::parallel {

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

// Gives every BatchNorm1d/BatchNorm2d in `module` `reducer` and names it SyncBatchNorm (the
// modules stay where they are, so handles held by the model keep working). Returns how many.
int convert_batchnorm_with(nn::Module& module, const std::shared_ptr<BatchNormStatsReducer>& reducer);
// Every BatchNorm1d/BatchNorm2d across DataParallel's replicas: call it before wrapping the module.
int convert_sync_batchnorm(nn::Module& module);

}  // namespace ember::parallel

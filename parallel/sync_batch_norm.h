// SyncBatchNorm: batch norm whose training statistics are those of the global batch across a
// process group (the per-rank mean/variance/count are all-gathered and combined; the backward's
// per-channel sums are all-reduced). No collective runs in evaluation mode. Across DataParallel's
// replicas instead (no process group): replica_batch_norm.h, which this header includes.
//
//   ember::parallel::convert_sync_batchnorm(*model, world);   // every BatchNorm1d/2d, in place
//   ember::parallel::convert_sync_batchnorm(*model);          // across DataParallel's replicas
#pragma once

#include <memory>

#include "autograd/functional.h"
#include "comm/process_group.h"
#include "nn/module.h"
#include "parallel/replica_batch_norm.h"

namespace ember::parallel {

class ProcessGroupBatchNormReducer final : public BatchNormStatsReducer {
 public:
  explicit ProcessGroupBatchNormReducer(std::shared_ptr<comm::ProcessGroup> group) : group_(std::move(group)) {}
  void reduce_stats(Tensor& mean, Tensor& var, int64_t& count) override;
  void reduce_grad_sums(Tensor& sum_dy, Tensor& sum_dy_xmu) override;

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
};

// Turns every BatchNorm1d/BatchNorm2d in `module` into a SyncBatchNorm over `group` (the modules
// stay where they are, so handles held by the model keep working). Returns how many it converted.
int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<comm::ProcessGroup> group);
// convert_sync_batchnorm(module), across DataParallel's replicas, is in replica_batch_norm.h.

}  // namespace ember::parallel

// Combining per-part statistics: Chan et al.'s parallel variance in float64, so parts with
// different counts (the last, smaller batch) combine exactly; and the replicas' exchange.
#include "parallel/replica_batch_norm.h"

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "nn/modules/batchnorm.h"
#include "parallel/replica_threads.h"

namespace ember::parallel {

// [count, mean..., var...] in float64 on the statistics' device: one row per rank or replica.
Tensor stats_row(const Tensor& mean, const Tensor& var, int64_t count) {
  const TensorOptions options = TensorOptions(kFloat64).device(mean.device());
  return cat({full({1}, static_cast<double>(count), options), mean.to(kFloat64).reshape({-1}),
              var.to(kFloat64).reshape({-1})});
}

// The whole batch's mean and biased variance from the rows [R, 1 + 2C], into mean and var.
void combine_rows(const Tensor& rows, Tensor& mean, Tensor& var) {
  const int64_t channels = mean.numel();
  Tensor counts = rows.select(1, 0).unsqueeze(1);          // [R, 1]
  Tensor means = rows.narrow(1, 1, channels);              // [R, C]
  Tensor vars = rows.narrow(1, 1 + channels, channels);    // [R, C]
  Tensor total = counts.sum({0});                          // [1]
  Tensor global_mean = (means * counts).sum({0}) / total;  // [C]
  // Sum of squared deviations: within each rank plus between ranks.
  Tensor deviation = means - global_mean;
  Tensor m2 = (vars * counts).sum({0}) + (deviation * deviation * counts).sum({0});
  Tensor global_var = m2 / total;
  mean = global_mean.to(mean.dtype()).view(mean.sizes());
  var = global_var.to(var.dtype()).view(var.sizes());
}

void ReplicaBatchNormReducer::reduce_stats(Tensor& mean, Tensor& var, int64_t& count) {
  const ReplicaContext* replica = current_replica();
  if (replica == nullptr || replica->count == 1) return;  // one device: the batch's own statistics
  NoGradGuard no_grad;
  std::vector<Contribution> all =
      replica->rendezvous->exchange(replica->index, {stats_row(mean, var, count), count}, "SyncBatchNorm statistics");
  // Every replica stacks the rows in replica order on its own device: the same sums everywhere.
  std::vector<Tensor> rows;
  count = 0;
  for (const Contribution& c : all) {
    rows.push_back(c.tensor.to(replica->device));
    count += c.count;
  }
  combine_rows(stack(rows), mean, var);
}

void ReplicaBatchNormReducer::reduce_grad_sums(Tensor& sum_dy, Tensor& sum_dy_xmu) {
  const ReplicaContext* replica = current_replica();
  if (replica == nullptr || replica->count == 1) return;
  NoGradGuard no_grad;
  const int64_t channels = sum_dy.numel();
  Tensor both = cat({sum_dy.reshape({-1}), sum_dy_xmu.reshape({-1})});
  std::vector<Contribution> all =
      replica->rendezvous->exchange(replica->index, {both, 0}, "SyncBatchNorm gradient sums");
  Tensor total;
  for (const Contribution& c : all) {
    Tensor part = c.tensor.to(replica->device);
    total = total.defined() ? total + part : part;
  }
  sum_dy = total.narrow(0, 0, channels).view(sum_dy.sizes()).clone();
  sum_dy_xmu = total.narrow(0, channels, channels).view(sum_dy_xmu.sizes()).clone();
}

int convert_batchnorm_with(nn::Module& module, const std::shared_ptr<BatchNormStatsReducer>& reducer) {
  int converted = 0;
  module.apply([&](nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNorm2dImpl*>(&m)) {
      bn->reducer = reducer;
    } else if (auto* bn1 = dynamic_cast<nn::BatchNorm1dImpl*>(&m)) {
      bn1->reducer = reducer;
    } else {
      return;
    }
    m.set_type_name("SyncBatchNorm");
    ++converted;
  });
  return converted;
}

int convert_sync_batchnorm(nn::Module& module) {
  return convert_batchnorm_with(module, std::make_shared<ReplicaBatchNormReducer>());
}

}  // namespace ember::parallel

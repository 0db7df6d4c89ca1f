// See deferred_batch_norm.h. The combination is SyncBatchNorm's (replica_batch_norm.h).
#include "parallel/deferred_batch_norm.h"

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "parallel/replica_batch_norm.h"

namespace ember::parallel {

void DeferredStats::record(const nn::Module* layer, const Tensor& input, nn::RunningStatsUpdate update) {
  NoGradGuard no_grad;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < input.dim(); ++d)
    if (d != 1) dims.push_back(d);
  const Tensor x = input.detach().to(kFloat64);
  Entry& e = layers_[layer];
  if (!e.update) order_.push_back(layer);
  e.update = std::move(update);
  e.channels = input.size(1);
  const int64_t count = input.numel() / input.size(1);
  e.rows[micro_batch] = {stats_row(x.mean(dims), x.var(dims, /*correction=*/0), count), count};
}

void DeferredStats::apply() {
  NoGradGuard no_grad;
  for (const nn::Module* layer : order_) {
    Entry& e = layers_[layer];
    std::vector<Tensor> rows;
    int64_t total = 0;
    for (auto& [i, row] : e.rows) {
      rows.push_back(row.first);
      total += row.second;  // the host's count: no read of the rows' device
    }
    Tensor mean = empty({e.channels}, TensorOptions(kFloat64).device(rows.front().device()));
    Tensor var = empty_like(mean);
    combine_rows(stack(rows), mean, var);
    e.update(mean, var, total);
  }
  layers_.clear();
  order_.clear();
}

}  // namespace ember::parallel

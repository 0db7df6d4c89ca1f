// Deferred batch norm for pipelines (torchgpipe's deferred_batch_norm): a stage's BatchNorm layers
// record each micro-batch's statistics instead of updating their running statistics, and apply()
// moves each layer's running statistics once, by the whole mini-batch's statistics.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "nn/modules/batchnorm.h"

namespace ember::parallel {

class DeferredStats final : public nn::RunningStatsSink {
 public:
  int64_t micro_batch = 0;  // the forward being run

  void record(const nn::Module* layer, const Tensor& input, nn::RunningStatsUpdate update) override;
  // Combines each layer's micro-batches in micro-batch order (so the result does not depend on
  // the order the stages ran them) and applies the update once; forgets what it recorded.
  void apply();

 private:
  struct Entry {
    nn::RunningStatsUpdate update;
    // By micro-batch: its stats_row (replica_batch_norm.h) and its count per channel.
    std::map<int64_t, std::pair<Tensor, int64_t>> rows;
    int64_t channels = 0;
  };
  std::map<const nn::Module*, Entry> layers_;
  std::vector<const nn::Module*> order_;
};

}  // namespace ember::parallel

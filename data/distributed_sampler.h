// DistributedSampler: each rank's share of a dataset for data-parallel training. Every rank
// computes the same (optionally shuffled) order from (seed, epoch) and takes every world_size-th
// index starting at its rank, so the shards are disjoint and together cover the dataset.
//   - training (default): the order is padded by repeating its first indices so every rank gets
//     the same number of batches (or, with drop_last, the tail is dropped);
//   - evaluation (unpadded): no padding, so every example is counted exactly once (shards may
//     differ by one in size).
// Call set_epoch(e) at the start of every epoch, or every epoch sees the same order.
//
//   ember::data::DistributedSampler sampler(dataset->size(), world->rank(), world->size(),
//                                           ember::data::DistributedSamplerOptions().seed(42));
//   loader_options.sampler(std::make_shared<ember::data::DistributedSampler>(sampler));
#pragma once

#include "data/sampler.h"

namespace ember::data {

class DistributedSamplerOptions {
 public:
  DistributedSamplerOptions& shuffle(bool value) {
    shuffle_ = value;
    return *this;
  }
  DistributedSamplerOptions& seed(uint64_t value) {
    seed_ = value;
    return *this;
  }
  DistributedSamplerOptions& drop_last(bool value) {
    drop_last_ = value;
    return *this;
  }
  // Evaluation mode: no padding and no dropping.
  DistributedSamplerOptions& unpadded(bool value) {
    unpadded_ = value;
    return *this;
  }
  bool shuffle() const { return shuffle_; }
  uint64_t seed() const { return seed_; }
  bool drop_last() const { return drop_last_; }
  bool unpadded() const { return unpadded_; }

 private:
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  bool drop_last_ = false;
  bool unpadded_ = false;
};

class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, DistributedSamplerOptions options = {});
  int64_t size() const override;
  std::vector<int64_t> indices() const override;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  int64_t dataset_size_;
  int rank_, world_size_;
  DistributedSamplerOptions options_;
};

}  // namespace ember::data

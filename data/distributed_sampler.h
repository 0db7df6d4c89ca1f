// DistributedSampler: each rank's share of a dataset for data-parallel training. Every rank
// computes the same (optionally shuffled) order from (seed, epoch) and takes every world_size-th
// index starting at its rank, so the shards are disjoint and together cover the dataset.
//   - training (default): the order is padded by repeating its first indices so every rank gets
//     the same number of batches (or, with drop_last, the tail is dropped);
//   - evaluation (unpadded): no padding, so every example is counted exactly once (shards may
//     differ by one in size).
// Call set_epoch(e) at the start of every epoch, or every epoch sees the same order.
//
// Resuming an epoch at another world size (an elastic restart): the epoch's global sequence is
// the (seed, epoch) order repeated cyclically; after c examples of it were consumed (c =
// steps x batch x world size of the run that stopped: the ranks step together, so the consumed
// ones are exactly its first c), resume_epoch_at(c) deals the rest round-robin over this world's
// ranks, extended by fewer than world_size examples (from the sequence's continuation) so every
// rank gets the same count. Every example of the epoch is then seen once, and only the padding
// twice, as in any padded epoch; with the same world size the ranks get exactly the batches they
// would have had. The offset holds until set_epoch moves to another epoch.
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
  void set_epoch(int64_t epoch) override;
  // This epoch without the first `consumed` examples of its global sequence (see above).
  void resume_epoch_at(int64_t consumed);
  int64_t resumed_at() const { return consumed_; }

 private:
  int64_t dataset_size_;
  int rank_, world_size_;
  DistributedSamplerOptions options_;
  int64_t consumed_ = 0;
};

}  // namespace ember::data

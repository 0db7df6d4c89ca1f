// The global order, its padding or truncation, and the rank's stride through it.
#include "data/distributed_sampler.h"

#include <numeric>

#include "core/error.h"

namespace ember::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size), rank_(rank), world_size_(world_size), options_(options) {
  EMBER_CHECK(world_size >= 1, "DistributedSampler: world_size must be at least 1, got ", world_size);
  EMBER_CHECK(rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank, " is outside [0, ", world_size, ")");
  EMBER_CHECK(dataset_size >= 0, "DistributedSampler: negative dataset size ", dataset_size);
  EMBER_CHECK(!(options.drop_last() && options.unpadded()),
              "DistributedSampler: drop_last and unpadded are different modes; choose one");
  EMBER_CHECK(options.unpadded() || options.drop_last() || dataset_size > 0 || world_size == 1,
              "DistributedSampler: cannot pad an empty dataset");
}

void DistributedSampler::set_epoch(int64_t epoch) {
  if (epoch != this->epoch()) consumed_ = 0;
  Sampler::set_epoch(epoch);
}

void DistributedSampler::resume_epoch_at(int64_t consumed) {
  EMBER_CHECK(!options_.unpadded() && !options_.drop_last(),
              "DistributedSampler::resume_epoch_at: only a padded training sampler resumes mid-epoch");
  EMBER_CHECK(consumed >= 0 && consumed < dataset_size_,
              "DistributedSampler::resume_epoch_at: expected a count in [0, ", dataset_size_,
              ") of examples consumed in epoch ", epoch(), ", got ", consumed);
  consumed_ = consumed;
}

int64_t DistributedSampler::size() const {
  const int64_t n = dataset_size_ - consumed_, w = world_size_;
  if (options_.unpadded()) return (n - rank_ + w - 1) / w;
  if (options_.drop_last()) return n / w;
  return (n + w - 1) / w;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order;
  if (options_.shuffle()) {
    order = random_permutation(dataset_size_, options_.seed(), epoch());
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t per_rank = size();
  if (!options_.unpadded()) {
    const int64_t total = consumed_ + per_rank * world_size_;
    // Padding repeats the order from its start (cyclically, for tiny datasets).
    for (int64_t i = static_cast<int64_t>(order.size()); i < total; ++i) order.push_back(order[i % dataset_size_]);
    order.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (size_t i = static_cast<size_t>(consumed_ + rank_); i < order.size(); i += static_cast<size_t>(world_size_))
    mine.push_back(order[i]);
  return mine;
}

}  // namespace ember::data

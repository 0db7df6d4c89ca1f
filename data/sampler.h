// Sampler: the ordered list of dataset indices the DataLoader visits in one epoch. A sampler's
// list depends only on its settings and the epoch (set_epoch), never on the loader's workers,
// which is what lets a DistributedSampler (rank, world size, pad/drop) plug in from outside.
//
//   ember::data::RandomSampler sampler(/*size=*/60000, /*seed=*/42);
//   sampler.set_epoch(3);
//   std::vector<int64_t> order = sampler.indices();   // a permutation of 0..59999, fixed by (42, 3)
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ember::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // How many indices indices() returns (per epoch, for this process).
  virtual int64_t size() const = 0;
  // The indices of epoch epoch(), in visiting order; the same list on every call for one epoch.
  virtual std::vector<int64_t> indices() const = 0;
  // Overrides must call Sampler::set_epoch, which keeps epoch() right.
  virtual void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

 private:
  int64_t epoch_ = 0;
};

using SamplerPtr = std::shared_ptr<Sampler>;

// 0, 1, ..., size - 1 in every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size);
  int64_t size() const override { return size_; }
  std::vector<int64_t> indices() const override;

 private:
  int64_t size_;
};

// A fresh permutation of 0..size-1 each epoch: random_permutation(size, seed, epoch()).
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size, uint64_t seed = 0);
  int64_t size() const override { return size_; }
  std::vector<int64_t> indices() const override;
  uint64_t seed() const { return seed_; }

 private:
  int64_t size_;
  uint64_t seed_;
};

// Fisher-Yates shuffle of 0..n-1 driven by a Philox stream keyed by (seed, epoch): the same
// permutation on every machine and for any thread count. Exposed so distributed samplers can
// shuffle exactly as RandomSampler does before sharding.
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace ember::data

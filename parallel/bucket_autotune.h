// Choosing DDP's bucket sizes by measurement (DDPOptions::bucket_cap_mb = kAuto). The DDP paper
// reports that the bucket size alone can change a step's speed by more than 2x, and the best
// size depends on the model, the network and the group: PyTorch promised auto-tuning and never
// shipped it. Here the reducer records, in the first ordinary iteration, when each gradient became
// ready and when backward ended, times the group's all-reduce at a few sizes, and simulates each
// candidate layout: buckets closed along the agreed gradient order, each all-reduced once its last
// gradient is ready and the one before has finished (one communication queue). The candidate
// whose last all-reduce ends least after backward (the exposed communication) is the simulation's
// pick. It cannot see contention (collectives taking compute's cores), so the reducer then times
// the pick, the default and the caps on real iterations, and those times decide
// (parallel/reducer.cc, docs/DISTRIBUTED.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::parallel {

// Bucket cap (and first bucket) value that asks for the choice by measurement.
inline constexpr double kAuto = -1.0;

// Parameters (indices) split into buckets along `order`: a bucket is closed once it holds at least
// its cap (first_mb for the first, cap_mb after) or when the next parameter's `kind` differs (a
// bucket holds one dtype on one device).
std::vector<std::vector<size_t>> partition_buckets(const std::vector<size_t>& order, const std::vector<int64_t>& bytes,
                                                   const std::vector<int>& kind, double first_mb, double cap_mb);

// The all-reduce's time by size, from measured (bytes, seconds) points: linear between them,
// and beyond the ends along the nearest two.
struct AllReduceCost {
  std::vector<std::pair<double, double>> points;  // increasing bytes
  double seconds(double bytes) const;
};

// When each parameter's gradient became ready (seconds, any origin) and when backward ended.
struct GradientTimeline {
  std::vector<double> ready_s;
  double backward_end_s = 0;
};

// How long the last bucket's all-reduce ends after backward (0 when all are hidden).
double simulate_exposed(const std::vector<std::vector<size_t>>& buckets, const std::vector<int64_t>& bytes,
                        const GradientTimeline& timeline, const AllReduceCost& cost);

struct BucketCandidate {
  double first_mb = 0, cap_mb = 0;
  size_t buckets = 0;
  double exposed_s = 0;   // simulated
  double measured_s = 0;  // a trial's median from first gradient to averaged gradients (slowest rank)
};

struct BucketChoice {
  double first_mb = 0, cap_mb = 0;
  std::vector<BucketCandidate> candidates;  // simulated, the default first
  std::vector<BucketCandidate> measured;    // the trials, the default first
  AllReduceCost cost;
  double backward_s = 0;  // from the first gradient ready to backward's end
  // The measurements and the choice, for the log.
  std::string report() const;
};

// The candidate caps (MB): 1, 5, 10, 25, 50, 100, each with the default first bucket and with a
// first bucket of its own size; the default (default_first_mb, default_cap_mb) is taken unless a
// candidate's exposed time is under 95% of the default's and shorter by more than 0.2 ms.
BucketChoice choose_buckets(const std::vector<size_t>& order, const std::vector<int64_t>& bytes,
                            const std::vector<int>& kind, const GradientTimeline& timeline, const AllReduceCost& cost,
                            double default_first_mb, double default_cap_mb);

}  // namespace ember::parallel

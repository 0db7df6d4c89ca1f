// SequentialSampler, RandomSampler and the seeded permutation behind shuffling.
#include "data/sampler.h"

#include <numeric>
#include <utility>

#include "core/error.h"
#include "data/example_random.h"

namespace ember::data {

namespace {

// The shuffle's stream must differ from every example's transform stream, keyed by
// (seed, epoch, index) with index < 2^63, so it uses an "index" no example can have.
constexpr uint64_t kShuffleStream = ~0ull;

}  // namespace

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  EMBER_CHECK(size >= 0, "SequentialSampler: size must be >= 0, got ", size);
}

std::vector<int64_t> SequentialSampler::indices() const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

RandomSampler::RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  EMBER_CHECK(size >= 0, "RandomSampler: size must be >= 0, got ", size);
}

std::vector<int64_t> RandomSampler::indices() const { return random_permutation(size_, seed_, epoch()); }

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  EMBER_CHECK(n >= 0, "random_permutation: n must be >= 0, got ", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  ExampleRandom random(derive_key(seed, static_cast<uint64_t>(epoch), kShuffleStream));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = random.randint(0, i + 1);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace ember::data

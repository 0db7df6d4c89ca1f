// ExampleRandom streams and the samplers: determinism in (seed, epoch), permutations that hold
// every index once, and distinct orders for distinct epochs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "data/example_random.h"
#include "data/sampler.h"

using namespace ember::data;

TEST_CASE("ExampleRandom is a pure function of (seed, epoch, index)", "[random]") {
  ExampleRandom a(1, 2, 3), b(1, 2, 3);
  for (int k = 0; k < 10; ++k) REQUIRE(a.next_u32() == b.next_u32());
  std::set<uint32_t> firsts;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      for (int64_t index = 0; index < 3; ++index) firsts.insert(ExampleRandom(seed, epoch, index).next_u32());
    }
  }
  CHECK(firsts.size() == 27);  // neighbouring inputs give unrelated streams
}

TEST_CASE("ExampleRandom draws stay in range and cover it", "[random]") {
  ExampleRandom random(7, 0, 0);
  std::vector<int> counts(5, 0);
  for (int k = 0; k < 5000; ++k) {
    int64_t v = random.randint(-2, 3);
    REQUIRE(v >= -2);
    REQUIRE(v < 3);
    ++counts[static_cast<size_t>(v + 2)];
    float u = random.uniform();
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
  }
  for (int c : counts) CHECK(std::abs(c - 1000) < 150);  // about 5 standard deviations
  CHECK(random.randint(4, 5) == 4);
  CHECK_THROWS_WITH(random.randint(3, 3), Catch::Contains("expected low < high, got [3, 3)"));
  int heads = 0;
  for (int k = 0; k < 1000; ++k) heads += random.bernoulli(0.25);
  CHECK(std::abs(heads - 250) < 70);
}

TEST_CASE("SequentialSampler counts up every epoch", "[sampler]") {
  SequentialSampler sampler(4);
  CHECK(sampler.size() == 4);
  CHECK(sampler.indices() == std::vector<int64_t>{0, 1, 2, 3});
  sampler.set_epoch(5);
  CHECK(sampler.epoch() == 5);
  CHECK(sampler.indices() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(SequentialSampler(0).indices().empty());
}

TEST_CASE("RandomSampler gives a fixed permutation per (seed, epoch)", "[sampler]") {
  const int64_t n = 1000;
  RandomSampler sampler(n, /*seed=*/42);
  std::vector<int64_t> epoch0 = sampler.indices();
  CHECK(sampler.indices() == epoch0);  // same epoch, same order
  std::vector<int64_t> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(n);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(sorted == expected);  // every index exactly once
  CHECK(epoch0 != expected);

  sampler.set_epoch(1);
  std::vector<int64_t> epoch1 = sampler.indices();
  CHECK(epoch1 != epoch0);
  std::sort(epoch1.begin(), epoch1.end());
  CHECK(epoch1 == expected);

  RandomSampler again(n, 42);
  CHECK(again.indices() == epoch0);
  CHECK(RandomSampler(n, 43).indices() != epoch0);
  CHECK(random_permutation(n, 42, 0) == epoch0);
  CHECK(random_permutation(1, 42, 0) == std::vector<int64_t>{0});
  CHECK(random_permutation(0, 42, 0).empty());
}

TEST_CASE("RandomSampler moves every element about equally often", "[sampler]") {
  // Over many epochs, index 0 lands in each of 4 positions about a quarter of the time.
  std::vector<int> position_of_zero(4, 0);
  for (int64_t epoch = 0; epoch < 4000; ++epoch) {
    std::vector<int64_t> order = random_permutation(4, 9, epoch);
    ++position_of_zero[static_cast<size_t>(std::find(order.begin(), order.end(), 0) - order.begin())];
  }
  for (int count : position_of_zero) CHECK(std::abs(count - 1000) < 150);
}

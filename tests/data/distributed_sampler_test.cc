// DistributedSampler coverage: training shards are disjoint up to padding, equal in size and
// cover everything; evaluation shards cover every example exactly once; drop_last drops the
// tail; set_epoch reshuffles identically on every rank; it drives a DataLoader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "core/ember_core.h"
#include "data/data.h"

using namespace ember;
using namespace ember::data;

namespace {
std::vector<std::vector<int64_t>> shards(int64_t n, int world, DistributedSamplerOptions options, int64_t epoch = 0) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, options);
    s.set_epoch(epoch);
    out.push_back(s.indices());
    REQUIRE(static_cast<int64_t>(out.back().size()) == s.size());
  }
  return out;
}
}  // namespace

TEST_CASE("training shards: equal sizes, everything covered, padding only repeats", "[sampler][distributed]") {
  for (int64_t n : {1, 7, 10, 16, 101}) {
    for (int world : {1, 2, 3, 4}) {
      INFO("n=" << n << " world=" << world);
      auto parts = shards(n, world, DistributedSamplerOptions().seed(5));
      std::map<int64_t, int> seen;
      for (auto& p : parts) {
        REQUIRE(p.size() == parts[0].size());
        for (int64_t i : p) {
          REQUIRE((i >= 0 && i < n));
          ++seen[i];
        }
      }
      REQUIRE(static_cast<int64_t>(seen.size()) == n);  // every example at least once
      int64_t total = static_cast<int64_t>(parts[0].size()) * world;
      REQUIRE(total == (n + world - 1) / world * world);
      int64_t repeats = 0;
      for (auto& [i, count] : seen) repeats += count - 1;
      REQUIRE(repeats == total - n);  // only the padding repeats
    }
  }
}

TEST_CASE("evaluation shards count every example exactly once", "[sampler][distributed]") {
  for (int64_t n : {0, 1, 9, 10000}) {
    for (int world : {1, 2, 3, 4}) {
      INFO("n=" << n << " world=" << world);
      auto parts = shards(n, world, DistributedSamplerOptions().shuffle(false).unpadded(true));
      std::vector<int64_t> all;
      for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
      std::sort(all.begin(), all.end());
      REQUIRE(static_cast<int64_t>(all.size()) == n);
      for (int64_t i = 0; i < n; ++i) REQUIRE(all[i] == i);
    }
  }
}

TEST_CASE("drop_last drops the tail evenly", "[sampler][distributed]") {
  auto parts = shards(10, 4, DistributedSamplerOptions().drop_last(true));
  std::vector<int64_t> all;
  for (auto& p : parts) {
    REQUIRE(p.size() == 2);
    all.insert(all.end(), p.begin(), p.end());
  }
  std::sort(all.begin(), all.end());
  REQUIRE(std::adjacent_find(all.begin(), all.end()) == all.end());  // no repeats
}

TEST_CASE("set_epoch reshuffles, identically on every rank", "[sampler][distributed]") {
  auto e0 = shards(64, 2, DistributedSamplerOptions().seed(9), 0);
  auto e0_again = shards(64, 2, DistributedSamplerOptions().seed(9), 0);
  auto e1 = shards(64, 2, DistributedSamplerOptions().seed(9), 1);
  REQUIRE(e0 == e0_again);
  REQUIRE(e0 != e1);
  // The ranks' shards of one epoch interleave one global permutation: disjoint.
  std::vector<int64_t> a = e1[0], b = e1[1];
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<int64_t> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  REQUIRE(common.empty());
}

TEST_CASE("bad arguments are named", "[sampler][distributed]") {
  REQUIRE_THROWS_WITH(DistributedSampler(10, 2, 2), Catch::Contains("rank 2 is outside [0, 2)"));
  REQUIRE_THROWS_WITH(DistributedSampler(10, 0, 0), Catch::Contains("world_size must be at least 1"));
  REQUIRE_THROWS_WITH(DistributedSampler(10, 0, 2, DistributedSamplerOptions().drop_last(true).unpadded(true)),
                      Catch::Contains("choose one"));
}

TEST_CASE("a DataLoader over a DistributedSampler yields this rank's shard", "[sampler][distributed]") {
  Tensor values = arange(10).to(kFloat32).view({10, 1});
  auto dataset = std::make_shared<TensorDataset>(values, arange(10));
  std::vector<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    auto sampler = std::make_shared<DistributedSampler>(10, rank, 3, DistributedSamplerOptions().unpadded(true));
    DataLoader loader(dataset, DataLoaderOptions(2).sampler(sampler));
    for (Batch& batch : loader)
      for (int64_t v : batch.target.to_vector<int64_t>()) seen.push_back(v);
  }
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen == arange(10).to_vector<int64_t>());
}

// An epoch stopped after `steps` steps of `batch` examples per rank at `world` ranks, resumed at
// `new_world` ranks: the ranks that stopped consumed its first c = steps x batch x world examples;
// the resumed ranks get the rest, each example once, the padding (< new_world) the only repeats.
TEST_CASE("an epoch resumed at another world size sees every example once", "[sampler][distributed]") {
  const auto options = DistributedSamplerOptions().seed(11);
  for (int64_t n : {37, 100, 101}) {
    for (int world : {1, 2, 3, 4}) {
      for (int new_world : {1, 2, 3, 4}) {
        for (int64_t batch : {1, 4, 5}) {
          const int64_t steps_per_epoch = ((n + world - 1) / world + batch - 1) / batch;
          for (int64_t steps = 1; steps < steps_per_epoch && steps * batch * world < n; ++steps) {
            INFO("n=" << n << " world=" << world << " -> " << new_world << " batch=" << batch << " steps=" << steps);
            std::map<int64_t, int> seen;
            for (const auto& shard : shards(n, world, options, 3))
              for (int64_t k = 0; k < steps * batch; ++k) ++seen[shard[k]];
            const int64_t consumed = steps * batch * world;
            REQUIRE(static_cast<int64_t>(seen.size()) == consumed);  // disjoint so far
            int64_t per_rank = -1;
            std::vector<std::vector<int64_t>> resumed;
            for (int r = 0; r < new_world; ++r) {
              DistributedSampler s(n, r, new_world, options);
              s.set_epoch(3);
              s.resume_epoch_at(consumed);
              s.set_epoch(3);  // the same epoch again keeps the offset, as a loader's restart does
              resumed.push_back(s.indices());
              REQUIRE(static_cast<int64_t>(resumed.back().size()) == s.size());
              if (per_rank < 0) per_rank = s.size();
              REQUIRE(s.size() == per_rank);
              for (int64_t i : resumed.back()) ++seen[i];
            }
            REQUIRE(static_cast<int64_t>(seen.size()) == n);  // nothing skipped
            int64_t repeats = 0;
            for (auto& [i, count] : seen) repeats += count - 1;
            REQUIRE(repeats == per_rank * new_world - (n - consumed));  // only the padding
            REQUIRE(repeats < new_world);
            if (new_world == world) {  // the very batches the stopped ranks had left
              auto whole = shards(n, world, options, 3);
              for (int r = 0; r < world; ++r)
                REQUIRE(resumed[r] == std::vector<int64_t>(whole[r].begin() + steps * batch, whole[r].end()));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("the resumed offset ends with its epoch, and is checked", "[sampler][distributed]") {
  DistributedSampler s(50, 0, 2, DistributedSamplerOptions().seed(2));
  s.set_epoch(1);
  s.resume_epoch_at(20);
  REQUIRE(s.size() == 15);
  s.set_epoch(2);
  REQUIRE(s.resumed_at() == 0);
  REQUIRE(s.size() == 25);
  REQUIRE(s.indices() == shards(50, 2, DistributedSamplerOptions().seed(2), 2)[0]);
  REQUIRE_THROWS_WITH(s.resume_epoch_at(50),
                      Catch::Contains("expected a count in [0, 50) of examples consumed in epoch 2, got 50"));
  DistributedSampler eval(50, 0, 2, DistributedSamplerOptions().unpadded(true));
  REQUIRE_THROWS_WITH(eval.resume_epoch_at(4), Catch::Contains("only a padded training sampler"));
}

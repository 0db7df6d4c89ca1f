// DataLoader's worker threads under stress: destroying a loader mid-epoch (workers blocked on a
// full queue or busy in a slow transform) joins cleanly, and exceptions thrown in a worker reach
// the consumer with their message, in batch order, whatever the worker count.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/ember_core.h"
#include "data/data.h"

using namespace ember;
using namespace ember::data;

namespace {

// Copies its input, sleeping first so workers are mid-batch when the loader dies.
class SlowCopy : public Transform {
 public:
  TensorSpec output_spec(const TensorSpec& input) const override { return input; }
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom&) const override {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::memcpy(dst, src, input.nbytes());
  }
};

// Throws on the example whose data starts with the byte `bad` (the dataset below codes its index).
class FailOn : public Transform {
 public:
  explicit FailOn(uint8_t bad) : bad_(bad) {}
  TensorSpec output_spec(const TensorSpec& input) const override { return input; }
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom&) const override {
    uint8_t first = *static_cast<const uint8_t*>(src);
    if (first == bad_) throw std::runtime_error("FailOn: refusing example " + std::to_string(first));
    std::memcpy(dst, src, input.nbytes());
  }

 private:
  uint8_t bad_;
};

// A dataset whose get() throws ember::Error for one index.
class Fragile : public Dataset {
 public:
  int64_t size() const override { return 20; }
  Example get(int64_t index) const override {
    EMBER_CHECK(index != 11, "Fragile::get: example ", index, " is unreadable");
    return {full({2}, index, TensorOptions(kUInt8)), full({}, index, TensorOptions(kInt64))};
  }
};

std::shared_ptr<TensorDataset> indexed(int64_t n) {
  std::vector<uint8_t> pixels;
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) pixels.push_back(static_cast<uint8_t>(i));
  }
  return std::make_shared<TensorDataset>(tensor(pixels, {n, 1, 2, 2}), arange(n));
}

}  // namespace

TEST_CASE("Destroying a loader mid-epoch joins its workers", "[loader][workers]") {
  auto synthetic = std::make_shared<SyntheticDataset>(2000, Shape{3, 16, 16}, 10, 1);
  for (int workers : {1, 3}) {
    { DataLoader untouched(synthetic, DataLoaderOptions(16).workers(workers)); }
    {
      DataLoader started(synthetic, DataLoaderOptions(16).workers(workers).prefetch(2));
      auto it = started.begin();  // workers now fill the queue and block on it
      CHECK(it->size() == 16);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    {
      DataLoader busy(synthetic, DataLoaderOptions(8).workers(workers).transform(std::make_shared<SlowCopy>()));
      int taken = 0;
      for (Batch& batch : busy) {
        CHECK(batch.size() == 8);
        if (++taken == 3) break;  // the loader dies below while workers sleep in SlowCopy
      }
      CHECK(busy.state() == LoaderState{0, 3});
    }
  }
}

TEST_CASE("A transform's exception reaches the consumer at its batch", "[loader][errors]") {
  auto ds = indexed(30);
  for (int workers : {0, 1, 3}) {
    INFO(workers << " workers");
    DataLoader loader(ds, DataLoaderOptions(4).workers(workers).transform(std::make_shared<FailOn>(17)));
    int64_t delivered = 0;
    try {
      for (Batch& batch : loader) {
        CHECK(batch.indices.front() == 4 * delivered);
        ++delivered;
      }
      FAIL("the epoch finished without the transform's exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "FailOn: refusing example 17");
    }
    CHECK(delivered == 4);  // batches 0..3 (examples 0..15) come first; example 17 is in batch 4
    CHECK(loader.state() == LoaderState{0, 4});
    // The failure is deterministic: iterating again retries batch 4 and fails the same way.
    CHECK_THROWS_WITH(loader.begin(), "FailOn: refusing example 17");
  }
}

TEST_CASE("A dataset's exception keeps its type and message", "[loader][errors]") {
  for (int workers : {0, 2}) {
    DataLoader loader(std::make_shared<Fragile>(), DataLoaderOptions(3).workers(workers).shuffle(true).seed(1));
    CHECK_THROWS_AS(
        [&] {
          for (Batch& batch : loader) (void)batch;
        }(),
        ember::Error);
    CHECK_THROWS_WITH(loader.begin(), Catch::Contains("Fragile::get: example 11 is unreadable"));
  }
}

TEST_CASE("More workers than batches, and a queue of one", "[loader][workers]") {
  auto ds = indexed(5);
  DataLoader loader(ds, DataLoaderOptions(2).workers(8).prefetch(1));
  std::vector<int64_t> seen;
  for (Batch& batch : loader) {
    for (int64_t i : batch.indices) seen.push_back(i);
  }
  CHECK(seen == std::vector<int64_t>{0, 1, 2, 3, 4});
}

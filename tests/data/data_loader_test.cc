// DataLoader on small in-memory datasets: batch counts and drop_last, batch contents, shuffles
// that are permutations, identical epochs for 0, 1 and 3 workers, epoch roll-over, resuming
// mid-epoch, custom samplers, channels-last batches, and the errors for inconsistent examples and
// states.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "core/ember_core.h"
#include "data/data.h"

using namespace ember;
using namespace ember::data;

namespace {

// Example i: a [1, 6, 6] uint8 image whose pixel k is (i + k) % 256, and the label i.
std::shared_ptr<TensorDataset> coded_dataset(int64_t n) {
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < 36; ++k) pixels.push_back(static_cast<uint8_t>((i + k) % 256));
    labels.push_back(i);
  }
  return std::make_shared<TensorDataset>(tensor(pixels, {n, 1, 6, 6}), tensor(labels, {n}));
}

TransformPtr augmentation() {
  return std::make_shared<Compose>(RandomCrop(6, 2), RandomHorizontalFlip(), Cutout(2), ToFloat());
}

// Everything observable about a sequence of batches.
struct Epoch {
  std::vector<std::vector<int64_t>> indices;
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> targets;
  bool operator==(const Epoch& other) const {
    return indices == other.indices && data == other.data && targets == other.targets;
  }
  size_t size() const { return indices.size(); }
};

void record(Epoch& epoch, const Batch& batch) {
  epoch.indices.push_back(batch.indices);
  epoch.data.push_back(batch.data.to(kFloat32).to_vector<float>());
  epoch.targets.push_back(batch.target.to_vector<int64_t>());
}

Epoch run_epoch(DataLoader& loader) {
  Epoch epoch;
  for (Batch& batch : loader) record(epoch, batch);
  return epoch;
}

std::vector<int64_t> flat(const Epoch& epoch) {
  std::vector<int64_t> all;
  for (const auto& b : epoch.indices) all.insert(all.end(), b.begin(), b.end());
  return all;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// Every other index, rotated by the epoch: a stand-in for a DistributedSampler's shard.
class EvenSampler : public Sampler {
 public:
  explicit EvenSampler(int64_t n) : n_(n) {}
  int64_t size() const override { return n_ / 2; }
  std::vector<int64_t> indices() const override {
    std::vector<int64_t> out;
    for (int64_t k = 0; k < size(); ++k) out.push_back(2 * ((k + epoch()) % size()));
    return out;
  }

 private:
  int64_t n_;
};

}  // namespace

TEST_CASE("DataLoader batch counts, drop_last and the last partial batch", "[loader]") {
  auto ds = coded_dataset(10);
  DataLoader keep(ds, DataLoaderOptions(3));
  DataLoader drop(ds, DataLoaderOptions(3).drop_last(true));
  CHECK(keep.size() == 4);
  CHECK(drop.size() == 3);
  Epoch kept = run_epoch(keep), dropped = run_epoch(drop);
  REQUIRE(kept.size() == 4);
  REQUIRE(dropped.size() == 3);
  CHECK(kept.indices.back() == std::vector<int64_t>{9});
  CHECK(dropped.indices.back() == std::vector<int64_t>{6, 7, 8});
  CHECK(flat(kept) == iota(10));
  CHECK(DataLoader(ds, DataLoaderOptions(5).drop_last(true)).size() == 2);
  CHECK(DataLoader(ds, DataLoaderOptions(11).drop_last(true)).size() == 0);
  CHECK(DataLoader(ds, DataLoaderOptions(11)).size() == 1);
}

TEST_CASE("DataLoader batches are contiguous copies of the examples", "[loader]") {
  auto ds = coded_dataset(7);
  DataLoader loader(ds, DataLoaderOptions(3));
  int64_t batches = 0;
  for (Batch& batch : loader) {
    REQUIRE(batch.data.is_contiguous());
    REQUIRE(batch.data.sizes() == Shape{batch.size(), 1, 6, 6});
    REQUIRE(batch.data.dtype() == kUInt8);
    REQUIRE(batch.target.sizes() == Shape{batch.size()});
    REQUIRE(batch.target.to_vector<int64_t>() == batch.indices);
    for (int64_t j = 0; j < batch.size(); ++j) {
      REQUIRE(batch.data[j].to_vector<uint8_t>() == ds->get(batch.indices[j]).data.to_vector<uint8_t>());
    }
    ++batches;
  }
  CHECK(batches == 3);

  // With a transform, slot j holds transform(example) with the example's own stream.
  DataLoader augmented(ds, DataLoaderOptions(4).seed(5).transform(augmentation()));
  augmented.set_epoch(2);
  for (Batch& batch : augmented) {
    REQUIRE(batch.data.dtype() == kFloat32);
    for (int64_t j = 0; j < batch.size(); ++j) {
      int64_t i = batch.indices[j];
      REQUIRE(batch.data[j].to_vector<float>() == (*augmentation())(ds->get(i).data, 5, 2, i).to_vector<float>());
    }
  }
}

TEST_CASE("DataLoader shuffles into a permutation, new each epoch", "[loader]") {
  auto ds = coded_dataset(50);
  DataLoader loader(ds, DataLoaderOptions(8).shuffle(true).seed(3));
  Epoch e0 = run_epoch(loader);
  std::vector<int64_t> order0 = flat(e0), sorted = order0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(50));
  CHECK(order0 != iota(50));
  CHECK(order0 == random_permutation(50, 3, 0));

  loader.set_epoch(1);
  std::vector<int64_t> order1 = flat(run_epoch(loader));
  CHECK(order1 != order0);
  sorted = order1;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(50));
}

TEST_CASE("DataLoader epochs are identical for 0, 1 and 3 workers", "[loader][workers]") {
  auto ds = coded_dataset(45);
  auto make = [&](int workers) {
    return std::make_unique<DataLoader>(
        ds, DataLoaderOptions(4).shuffle(true).seed(11).workers(workers).transform(augmentation()));
  };
  auto serial = make(0);
  serial->set_epoch(4);
  Epoch reference = run_epoch(*serial);
  REQUIRE(reference.size() == 12);
  for (int workers : {1, 3}) {
    for (int prefetch : {1, 2, 5}) {
      DataLoader loader(ds, DataLoaderOptions(4).shuffle(true).seed(11).workers(workers).prefetch(prefetch).transform(
                                augmentation()));
      loader.set_epoch(4);
      INFO(workers << " workers, prefetch " << prefetch);
      CHECK(run_epoch(loader) == reference);
    }
  }
  serial->set_epoch(5);
  CHECK_FALSE(run_epoch(*serial) == reference);
}

TEST_CASE("A finished epoch rolls over to the next one", "[loader]") {
  auto ds = coded_dataset(20);
  DataLoader loader(ds, DataLoaderOptions(6).shuffle(true).seed(1).workers(1));
  Epoch first = run_epoch(loader);
  CHECK(loader.state() == LoaderState{0, 4});
  Epoch second = run_epoch(loader);
  CHECK(loader.state() == LoaderState{1, 4});
  CHECK(loader.epoch() == 1);

  DataLoader fresh(ds, DataLoaderOptions(6).shuffle(true).seed(1));
  fresh.set_epoch(1);
  CHECK(run_epoch(fresh) == second);
  CHECK_FALSE(second == first);
  loader.set_epoch(0);  // explicit set_epoch replays epoch 0
  CHECK(run_epoch(loader) == first);
}

TEST_CASE("Resuming mid-epoch yields exactly the remaining batches", "[loader][resume]") {
  auto ds = coded_dataset(37);
  auto options = [](int workers) {
    return DataLoaderOptions(5).shuffle(true).seed(8).workers(workers).transform(augmentation());
  };
  DataLoader uninterrupted(ds, options(0));
  uninterrupted.set_epoch(3);
  Epoch full = run_epoch(uninterrupted);
  REQUIRE(full.size() == 8);

  for (int workers : {0, 2}) {
    for (int64_t stop_after : {0, 1, 3, 7}) {
      INFO(workers << " workers, checkpoint after " << stop_after << " batches");
      LoaderState saved;
      Epoch before;
      {
        DataLoader first(ds, options(workers));
        first.set_epoch(3);
        if (stop_after > 0) {
          for (Batch& batch : first) {
            record(before, batch);
            if (static_cast<int64_t>(before.size()) == stop_after) {
              saved = first.state();  // taken inside the loop body, as a training step would
              break;
            }
          }
        } else {
          saved = first.state();
        }
      }  // destroyed mid-epoch, prefetched batches dropped
      CHECK(saved == LoaderState{3, stop_after});

      DataLoader resumed(ds, options(workers));
      resumed.load_state(saved);
      Epoch after = run_epoch(resumed);
      REQUIRE(before.size() + after.size() == full.size());
      for (size_t k = 0; k < full.size(); ++k) {
        const Epoch& part = k < before.size() ? before : after;
        size_t at = k < before.size() ? k : k - before.size();
        REQUIRE(part.indices[at] == full.indices[k]);
        REQUIRE(part.data[at] == full.data[k]);
      }
      CHECK(resumed.state() == LoaderState{3, 8});
    }
  }
}

TEST_CASE("Breaking out of the loop and iterating again continues the epoch", "[loader][resume]") {
  auto ds = coded_dataset(30);
  DataLoader reference(ds, DataLoaderOptions(4).shuffle(true).seed(2));
  Epoch full = run_epoch(reference);

  DataLoader loader(ds, DataLoaderOptions(4).shuffle(true).seed(2).workers(2));
  Epoch pieces;
  for (Batch& batch : loader) {
    record(pieces, batch);
    if (pieces.size() == 3) break;
  }
  for (Batch& batch : loader) record(pieces, batch);
  CHECK(pieces == full);
}

TEST_CASE("A state at the end of an epoch resumes with the next epoch", "[loader][resume]") {
  auto ds = coded_dataset(12);
  DataLoader loader(ds, DataLoaderOptions(4).shuffle(true).seed(6));
  loader.load_state({2, 3});
  CHECK(loader.state() == LoaderState{2, 3});
  loader.set_epoch(2);
  CHECK(loader.state() == LoaderState{2, 0});

  DataLoader resumed(ds, DataLoaderOptions(4).shuffle(true).seed(6));
  resumed.load_state({2, 3});
  Epoch next = run_epoch(resumed);
  CHECK(resumed.state() == LoaderState{3, 3});
  DataLoader direct(ds, DataLoaderOptions(4).shuffle(true).seed(6));
  direct.set_epoch(3);
  CHECK(run_epoch(direct) == next);
  CHECK_THROWS_WITH(resumed.load_state({0, 4}),
                    Catch::Contains("4 batches consumed, but an epoch of this loader has 3"));
}

TEST_CASE("DataLoader takes a custom sampler and tells it the epoch", "[loader][sampler]") {
  auto ds = coded_dataset(10);
  auto sampler = std::make_shared<EvenSampler>(10);
  DataLoader loader(ds, DataLoaderOptions(2).sampler(sampler).workers(1));
  CHECK(loader.size() == 3);
  CHECK(flat(run_epoch(loader)) == std::vector<int64_t>{0, 2, 4, 6, 8});
  loader.set_epoch(1);
  CHECK(sampler->epoch() == 1);
  CHECK(flat(run_epoch(loader)) == std::vector<int64_t>{2, 4, 6, 8, 0});
  CHECK_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).sampler(sampler).shuffle(true)),
                    Catch::Contains("shuffle(true) and a sampler exclude each other"));
  DataLoader too_far(coded_dataset(4), DataLoaderOptions(2).sampler(sampler));
  CHECK_THROWS_WITH(too_far.begin(), Catch::Contains("the sampler's index 4 (position 2 of epoch 0) is out of range "
                                                     "for a dataset of size 4"));
}

TEST_CASE("DataLoader rejects bad options and examples of different shapes", "[loader][errors]") {
  auto ds = coded_dataset(4);
  CHECK_THROWS_WITH(DataLoader(ds, DataLoaderOptions(0)), Catch::Contains("batch_size must be > 0, got 0"));
  CHECK_THROWS_WITH(DataLoader(ds, DataLoaderOptions(1).workers(-1)), Catch::Contains("workers must be >= 0"));
  CHECK_THROWS_WITH(DataLoader(nullptr, DataLoaderOptions(1)), Catch::Contains("the dataset is null"));

  auto small = std::make_shared<TensorDataset>(zeros({2, 3}), zeros({2}, kInt64));
  auto large = std::make_shared<TensorDataset>(zeros({2, 4}), zeros({2}, kInt64));
  auto mixed = std::make_shared<ConcatDataset>(std::vector<DatasetPtr>{small, large});
  DataLoader loader(mixed, DataLoaderOptions(4).workers(1));
  CHECK_THROWS_WITH(run_epoch(loader), Catch::Contains("example 2's data is [4] float32, but the batch's first "
                                                       "example (0) has [3] float32"));
}

TEST_CASE("Unlabeled datasets give batches without targets", "[loader]") {
  auto ds = std::make_shared<TensorDataset>(arange(0, 6, 1, TensorOptions(kFloat32)).view({6, 1}));
  DataLoader loader(ds, DataLoaderOptions(4));
  std::vector<float> seen;
  for (Batch& batch : loader) {
    CHECK_FALSE(batch.target.defined());
    for (float v : batch.data.to_vector<float>()) seen.push_back(v);
  }
  CHECK(seen == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("channels_last batches hold the same values with NHWC memory", "[loader]") {
  manual_seed(5);
  for (DType dtype : {kFloat32, kUInt8}) {
    INFO("dtype " << dtype_name(dtype));
    Tensor images = (rand({10, 3, 4, 5}) * 200).to(dtype);
    auto ds = std::make_shared<TensorDataset>(images, arange(10));
    for (int workers : {0, 2}) {
      DataLoader plain(ds, DataLoaderOptions(4).workers(workers));
      DataLoader cl(ds, DataLoaderOptions(4).workers(workers).channels_last(true));
      Epoch expected = run_epoch(plain);
      Epoch got;
      for (Batch& batch : cl) {
        const int64_t c = batch.data.size(1), w = batch.data.size(3);
        CHECK(batch.data.stride(1) == 1);
        CHECK(batch.data.stride(3) == c);
        CHECK(batch.data.stride(2) == w * c);
        record(got, batch);
      }
      CHECK(got == expected);
    }
  }
  // Batches that are not 4-D images are left as they are.
  auto flat_ds = std::make_shared<TensorDataset>(arange(12).view({6, 2}), arange(6));
  DataLoader loader(flat_ds, DataLoaderOptions(3).channels_last(true));
  for (Batch& batch : loader) CHECK(batch.data.is_contiguous());
}

TEST_CASE("pin_memory without the CUDA backend linked names what is missing", "[loader]") {
  auto ds = std::make_shared<SyntheticDataset>(8, Shape{3, 4, 4}, 10, 1);
  for (int workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions(4).workers(workers).pin_memory(true));
    CHECK_THROWS_WITH(loader.begin(), Catch::Matchers::Contains("pin_memory: pinned memory needs the CUDA backend"));
  }
}

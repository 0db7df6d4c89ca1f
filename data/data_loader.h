// DataLoader: batches of a Dataset in the order of a Sampler, assembled by worker threads into a
// bounded, in-order prefetch queue. Shuffles and augmentations depend only on (seed, epoch, index),
// so an epoch's batches are identical for any worker count, and state()/load_state() resume
// mid-epoch with exactly the batches an uninterrupted run would have produced.
//
//   auto train = std::make_shared<ember::data::FashionMNIST>();
//   ember::data::DataLoader loader(train, ember::data::DataLoaderOptions(128).shuffle(true).workers(1)
//                                             .transform(std::make_shared<ember::data::ToFloat>()));
//   for (int64_t epoch = 0; epoch < 10; ++epoch) {
//     loader.set_epoch(epoch);                     // optional: a finished epoch rolls over by itself
//     for (ember::data::Batch& batch : loader) {   // batch.data [128, 1, 28, 28] float32
//       step(batch.data, batch.target);            //   batch.target [128] int64
//     }
//   }
//
// Workers. Loader workers are std::threads that only copy and transform examples: cheap next to
// the model, which uses Ember's compute thread pool on every core. With few cores use workers(1):
// one thread assembles images far faster than a training step consumes them, so it sleeps on a
// full queue almost all the time (figures in docs/BENCHMARKS.md, data_loader). workers(0)
// assembles batches on the calling thread (no threads at all; good for tests and evaluation).
// More workers than spare cores only steal time from compute.
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transform.h"

namespace ember::data {

class DataLoaderOptions {
 public:
  explicit DataLoaderOptions(int64_t batch_size = 1) : batch_size_(batch_size) {}

  DataLoaderOptions& batch_size(int64_t value) {
    batch_size_ = value;
    return *this;
  }
  // A RandomSampler(dataset size, seed) instead of a SequentialSampler; not with sampler().
  DataLoaderOptions& shuffle(bool value) {
    shuffle_ = value;
    return *this;
  }
  // Drop the last batch when it would be smaller than batch_size.
  DataLoaderOptions& drop_last(bool value) {
    drop_last_ = value;
    return *this;
  }
  // Worker threads; 0 assembles batches on the consumer's thread.
  DataLoaderOptions& workers(int value) {
    workers_ = value;
    return *this;
  }
  // Batches in flight (being assembled or ready) at most; 0 means 2 per worker.
  DataLoaderOptions& prefetch(int value) {
    prefetch_ = value;
    return *this;
  }
  // Seeds the shuffle and the per-example transform streams.
  DataLoaderOptions& seed(uint64_t value) {
    seed_ = value;
    return *this;
  }
  DataLoaderOptions& transform(TransformPtr value) {
    transform_ = std::move(value);
    return *this;
  }
  // Overrides the built-in choice of sampler (e.g. a DistributedSampler).
  DataLoaderOptions& sampler(SamplerPtr value) {
    sampler_ = std::move(value);
    return *this;
  }
  // 4-D image batches [N, C, H, W] laid out channels-last (NHWC in memory), as a convnet's
  // activations are: the transpose happens once per batch, on the loader's thread, instead of in
  // the first convolution's forward and weight-gradient passes.
  DataLoaderOptions& channels_last(bool value) {
    channels_last_ = value;
    return *this;
  }
  // Batches in page-locked host memory (needs the CUDA backend linked), assembled on the loader's
  // threads, so that `batch.data.to(cuda, /*non_blocking=*/true)` is queued on the GPU's stream
  // without the host waiting for it. A pinned tensor is contiguous: this undoes channels_last.
  DataLoaderOptions& pin_memory(bool value) {
    pin_memory_ = value;
    return *this;
  }

  int64_t batch_size() const { return batch_size_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  int workers() const { return workers_; }
  int prefetch() const { return prefetch_; }
  uint64_t seed() const { return seed_; }
  const TransformPtr& transform() const { return transform_; }
  const SamplerPtr& sampler() const { return sampler_; }
  bool channels_last() const { return channels_last_; }
  bool pin_memory() const { return pin_memory_; }

 private:
  int64_t batch_size_;
  bool shuffle_ = false;
  bool drop_last_ = false;
  int workers_ = 0;
  int prefetch_ = 0;
  uint64_t seed_ = 0;
  TransformPtr transform_;
  SamplerPtr sampler_;
  bool channels_last_ = false;
  bool pin_memory_ = false;
};

// Where a loader stands: in `epoch`, `batches` batches have been handed to the consumer.
struct LoaderState {
  int64_t epoch = 0;
  int64_t batches = 0;
  bool operator==(const LoaderState& other) const { return epoch == other.epoch && batches == other.batches; }
};

class EpochRun;

class DataLoader {
 public:
  DataLoader(DatasetPtr dataset, DataLoaderOptions options);
  // Stops the workers and joins them, mid-epoch or not; batches in flight are dropped.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch.
  int64_t size() const;
  // Starts epoch `epoch` from its first batch (and tells the sampler).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // A checkpointable position. A batch counts as consumed once the iterator hands it out, so a
  // state saved inside the loop body resumes with the next batch.
  LoaderState state() const { return {epoch_, position_}; }
  // The next iteration continues epoch state.epoch after state.batches batches; a state at the
  // end of an epoch continues with the next epoch.
  void load_state(const LoaderState& state);

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    Iterator() = default;
    Batch& operator*() const { return *current_; }
    Batch* operator->() const { return current_; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const { return current_ == other.current_; }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader);
    DataLoader* loader_ = nullptr;
    Batch* current_ = nullptr;  // null at the end
  };

  // Continues where the loader stands: the rest of the current epoch, or the next epoch when the
  // current one is finished. Only one iteration at a time: begin() ends any earlier one (its
  // prefetched batches are dropped and assembled again).
  Iterator begin();
  Iterator end() { return Iterator(); }

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  Sampler& sampler() { return *sampler_; }

 private:
  // The next batch of the epoch, or null when the epoch is over. Rethrows a worker's exception.
  Batch* next();
  void stop_run();

  DatasetPtr dataset_;
  DataLoaderOptions options_;
  SamplerPtr sampler_;
  int64_t epoch_ = 0;
  int64_t position_ = 0;         // batches of epoch_ handed out
  bool epoch_finished_ = false;  // the last iteration reached the end of epoch_
  std::unique_ptr<EpochRun> run_;
  Batch current_;
};

}  // namespace ember::data

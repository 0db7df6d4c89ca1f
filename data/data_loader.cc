// DataLoader and EpochRun. An EpochRun owns one pass over an epoch's batches: workers claim batch
// numbers in order, assemble them outside the lock and park them in a ring of `prefetch` slots
// (slot = batch % prefetch), and the consumer takes them strictly in order. A worker may claim
// batch k only while k < delivered + prefetch, which bounds the memory held in flight.
#include "data/data_loader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/profiler.h"

namespace ember::data {

class EpochRun {
 public:
  EpochRun(DatasetPtr dataset, TransformPtr transform, uint64_t seed, int64_t epoch, std::vector<int64_t> order,
           int64_t batch_size, int64_t first_batch, int64_t end_batch, int workers, int prefetch, bool channels_last,
           bool pin_memory)
      : dataset_(std::move(dataset)),
        transform_(std::move(transform)),
        channels_last_(channels_last),
        pin_memory_(pin_memory),
        seed_(seed),
        epoch_(epoch),
        order_(std::move(order)),
        batch_size_(batch_size),
        end_batch_(end_batch),
        next_claim_(first_batch),
        next_deliver_(first_batch),
        claim_limit_(end_batch),
        ring_(static_cast<size_t>(workers > 0 ? prefetch : 0)) {
    try {
      for (int w = 0; w < workers; ++w)
        threads_.emplace_back([this, w] {
          profiler::set_thread_name("loader worker " + std::to_string(w));
          work();
        });
    } catch (...) {
      shut_down();
      throw;
    }
  }

  ~EpochRun() { shut_down(); }

  // The next batch in order, or nothing once the epoch's batches are all delivered.
  std::optional<Batch> next() {
    if (next_deliver_ >= end_batch_) return std::nullopt;
    if (threads_.empty()) {
      const profiler::Range range("data", "load batch (no workers)");
      return build(next_deliver_++);
    }
    const profiler::Range range("data", "wait for batch");
    std::unique_lock<std::mutex> lock(mutex_);
    Slot& slot = ring_[static_cast<size_t>(next_deliver_) % ring_.size()];
    ready_.wait(lock, [&] { return slot.ready; });
    Slot taken = std::move(slot);
    slot = Slot();
    ++next_deliver_;
    lock.unlock();
    space_.notify_all();
    if (taken.error) std::rethrow_exception(taken.error);
    return std::move(taken.batch);
  }

 private:
  struct Slot {
    bool ready = false;
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  Batch build(int64_t batch) const {
    size_t start = static_cast<size_t>(batch * batch_size_);
    size_t stop = std::min(order_.size(), start + static_cast<size_t>(batch_size_));
    std::vector<int64_t> indices(order_.begin() + static_cast<std::ptrdiff_t>(start),
                                 order_.begin() + static_cast<std::ptrdiff_t>(stop));
    Batch out = assemble_batch(*dataset_, std::move(indices), transform_.get(), seed_, epoch_);
    if (channels_last_ && out.data.dim() == 4) out.data = channels_last_copy(out.data);
    if (pin_memory_) {
      out.data = out.data.pin_memory();
      if (out.target.defined()) out.target = out.target.pin_memory();
    }
    return out;
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      space_.wait(lock, [&] {
        return stopping_ || next_claim_ >= claim_limit_ ||
               next_claim_ < next_deliver_ + static_cast<int64_t>(ring_.size());
      });
      if (stopping_ || next_claim_ >= claim_limit_) return;
      int64_t batch = next_claim_++;
      lock.unlock();
      Slot result;
      try {
        const profiler::Range range("data", profiler::active() ? "load batch " + std::to_string(batch) : "");
        result.batch = build(batch);
      } catch (...) {
        result.error = std::current_exception();
      }
      lock.lock();
      if (result.error && batch + 1 < claim_limit_) {
        // The consumer stops at this batch, so nothing after it is worth assembling.
        claim_limit_ = batch + 1;
        space_.notify_all();
      }
      result.ready = true;
      ring_[static_cast<size_t>(batch) % ring_.size()] = std::move(result);
      ready_.notify_all();
    }
  }

  void shut_down() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    space_.notify_all();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  const DatasetPtr dataset_;
  const TransformPtr transform_;
  const bool channels_last_;
  const bool pin_memory_;
  const uint64_t seed_;
  const int64_t epoch_;
  const std::vector<int64_t> order_;
  const int64_t batch_size_;
  const int64_t end_batch_;

  std::mutex mutex_;
  std::condition_variable space_;  // workers wait for room in the ring (or for the stop)
  std::condition_variable ready_;  // the consumer waits for its next batch
  int64_t next_claim_;
  int64_t next_deliver_;
  int64_t claim_limit_;
  bool stopping_ = false;
  std::vector<Slot> ring_;
  std::vector<std::thread> threads_;
};

DataLoader::DataLoader(DatasetPtr dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)), sampler_(options_.sampler()) {
  EMBER_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
  EMBER_CHECK(options_.batch_size() > 0, "DataLoader: batch_size must be > 0, got ", options_.batch_size());
  EMBER_CHECK(options_.workers() >= 0, "DataLoader: workers must be >= 0, got ", options_.workers());
  EMBER_CHECK(options_.prefetch() >= 0, "DataLoader: prefetch must be >= 0, got ", options_.prefetch());
  EMBER_CHECK(!(sampler_ && options_.shuffle()),
              "DataLoader: shuffle(true) and a sampler exclude each other; the sampler decides the order");
  if (!sampler_) {
    if (options_.shuffle()) {
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed());
    } else {
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
    }
  }
  sampler_->set_epoch(epoch_);
}

DataLoader::~DataLoader() { stop_run(); }

int64_t DataLoader::size() const {
  int64_t examples = sampler_->size(), batch = options_.batch_size();
  return options_.drop_last() ? examples / batch : (examples + batch - 1) / batch;
}

void DataLoader::set_epoch(int64_t epoch) {
  stop_run();
  epoch_ = epoch;
  position_ = 0;
  epoch_finished_ = false;
  sampler_->set_epoch(epoch);
}

void DataLoader::load_state(const LoaderState& state) {
  EMBER_CHECK(state.batches >= 0 && state.batches <= size(), "DataLoader::load_state: ", state.batches,
              " batches consumed, but an epoch of this loader has ", size(),
              " (was the state saved with another dataset, sampler or batch size?)");
  set_epoch(state.epoch);
  position_ = state.batches;
  epoch_finished_ = position_ == size();
}

DataLoader::Iterator DataLoader::begin() {
  stop_run();
  if (epoch_finished_) set_epoch(epoch_ + 1);
  std::vector<int64_t> order = sampler_->indices();
  EMBER_CHECK(static_cast<int64_t>(order.size()) == sampler_->size(), "DataLoader: the sampler returned ", order.size(),
              " indices for epoch ", epoch_, " but its size() is ", sampler_->size());
  const int64_t n = dataset_->size();
  for (size_t k = 0; k < order.size(); ++k) {
    EMBER_CHECK(order[k] >= 0 && order[k] < n, "DataLoader: the sampler's index ", order[k], " (position ", k,
                " of epoch ", epoch_, ") is out of range for a dataset of size ", n);
  }
  int prefetch = options_.prefetch() > 0 ? options_.prefetch() : 2 * options_.workers();
  run_ = std::make_unique<EpochRun>(dataset_, options_.transform(), options_.seed(), epoch_, std::move(order),
                                    options_.batch_size(), position_, size(), options_.workers(), prefetch,
                                    options_.channels_last(), options_.pin_memory());
  return Iterator(this);
}

Batch* DataLoader::next() {
  if (!run_) return nullptr;
  std::optional<Batch> batch;
  try {
    batch = run_->next();
  } catch (...) {
    // The run cannot go past the failed batch; a later begin() retries from it.
    stop_run();
    throw;
  }
  if (!batch) {
    epoch_finished_ = true;
    stop_run();
    return nullptr;
  }
  current_ = std::move(*batch);
  ++position_;
  return &current_;
}

void DataLoader::stop_run() { run_.reset(); }

DataLoader::Iterator::Iterator(DataLoader* loader) : loader_(loader), current_(loader->next()) {}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  current_ = loader_->next();
  return *this;
}

}  // namespace ember::data

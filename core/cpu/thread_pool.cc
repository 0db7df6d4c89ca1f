// A fixed pool of worker threads woken per parallel_for. Workers spin briefly before sleeping so
// back-to-back small kernels do not pay a futex wake each time.
#include "core/cpu/thread_pool.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ember::cpu {

namespace {

thread_local bool inside_task = false;

class Pool {
 public:
  explicit Pool(int threads) { start(threads); }
  ~Pool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int threads) {
    std::lock_guard<std::mutex> busy(busy_);
    stop();
    start(threads);
  }

  // Returns false when the pool is taken by another caller.
  bool run(int64_t begin, int64_t end, int chunks, const std::function<void(int64_t, int64_t)>& body) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    chunks = std::min(chunks, size());
    body_ = &body;
    begin_ = begin;
    end_ = end;
    chunks_ = chunks;
    error_ = nullptr;
    // Every worker acknowledges every generation, so none can lag into the next run.
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_chunk(0);
    // Wait for the workers: spin first, the chunks are usually short.
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
      if (spin > 2000) std::this_thread::yield();
    }
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void start(int threads) {
    shutdown_ = false;
    // A worker learns the current generation here, not when its thread first runs: a run() or
    // stop() that starts before then would otherwise already count as seen and never wake it.
    const uint64_t seen = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, seen] { worker(i, seen); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shutdown_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  void run_chunk(int index) {
    if (index >= chunks_) return;
    int64_t total = end_ - begin_;
    int64_t lo = begin_ + total * index / chunks_;
    int64_t hi = begin_ + total * (index + 1) / chunks_;
    bool was_inside = inside_task;
    inside_task = true;
    try {
      if (lo < hi) (*body_)(lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_task = was_inside;
  }

  void worker(int index, uint64_t seen) {
    while (true) {
      uint64_t now = seen;
      for (int spin = 0; spin < 20000; ++spin) {
        now = generation_.load(std::memory_order_acquire);
        if (now != seen) break;
      }
      if (now == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      if (shutdown_) return;
      run_chunk(index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool shutdown_ = false;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t begin_ = 0, end_ = 0;
  int chunks_ = 0;
  std::exception_ptr error_;
};

int default_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

Pool& pool() {
  static Pool instance(default_threads());
  return instance;
}

}  // namespace

int num_threads() { return pool().size(); }

void set_num_threads(int threads) { pool().resize(threads < 1 ? 1 : threads); }

bool in_parallel_region() { return inside_task; }

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  int64_t n = end - begin;
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t max_chunks = (n + grain - 1) / grain;
  if (max_chunks < 2 || inside_task || num_threads() == 1 ||
      !pool().run(begin, end, static_cast<int>(std::min<int64_t>(max_chunks, num_threads())), body)) {
    body(begin, end);
  }
}

}  // namespace ember::cpu

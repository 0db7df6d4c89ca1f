// parallel_for on OpenMP's thread team, the same team oneDNN's kernels run on: one set of threads
// for every op, so no second pool spins while a convolution wants the cores (with two pools, each
// one's spin-wait after its region stole cycles from the other's next region).
#include "core/cpu/thread_pool.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

namespace ember::cpu {

namespace {

thread_local bool inside_task = false;

int default_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

std::atomic<int>& configured_threads() {
  static std::atomic<int> threads{default_threads()};
  return threads;
}

// Held by the thread whose parallel_for owns the team; another thread calling meanwhile (a
// DataParallel replica, a loader worker) runs inline instead of doubling the threads.
std::mutex& team_busy() {
  static std::mutex busy;
  return busy;
}

}  // namespace

int num_threads() { return configured_threads().load(std::memory_order_relaxed); }

void set_num_threads(int threads) { configured_threads().store(threads < 1 ? 1 : threads); }

bool in_parallel_region() { return inside_task; }

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int chunks = static_cast<int>(std::min<int64_t>(max_chunks, num_threads()));
  std::unique_lock<std::mutex> busy(team_busy(), std::defer_lock);
  if (chunks < 2 || inside_task || omp_in_parallel() || !busy.try_lock()) {
    body(begin, end);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(chunks)
  {
    const int64_t index = omp_get_thread_num(), count = omp_get_num_threads();
    const int64_t lo = begin + n * index / count, hi = begin + n * (index + 1) / count;
    inside_task = true;
    try {
      if (lo < hi) body(lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
    inside_task = false;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace ember::cpu

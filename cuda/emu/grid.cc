// The block pool: helper threads take blocks of the newest launch with an atomic counter; the
// runner thread that runs the launch takes blocks too, then waits for the helpers inside it.
#include "cuda/emu/grid.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/emu/fiber.h"
#include "cuda/emu/memory.h"

namespace ember::emu {

namespace {

int threads_from_environment(int fallback) {
  const char* env = std::getenv("EMBER_EMU_THREADS");
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(env, &end, 10);
  EMBER_CHECK(*end == '\0' && value > 0, "EMBER_EMU_THREADS: expected a positive integer, got '", env, "'");
  return static_cast<int>(value);
}

class BlockPool {
 public:
  static BlockPool& get() {
    static BlockPool* pool = new BlockPool();  // never destroyed: helpers outlive static teardown
    return *pool;
  }
  std::string run(const KernelLaunch& launch);

 private:
  struct Job {
    const KernelLaunch* launch;
    uint64_t total;
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    int active = 0;  // helpers inside it (guarded by the pool's mutex)
    std::mutex mutex;
    std::string failure;
  };
  BlockPool();
  void help();
  static void work_on(Job& job);

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::shared_ptr<Job>> jobs_;
};

BlockPool::BlockPool() {
  const int hardware = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  const int threads = std::max(2, threads_from_environment(hardware));
  // At least one helper, so a kernel's blocks always run on two OS threads at once (atomics and
  // races between blocks are real even on one core).
  for (int i = 0; i < threads - 1; ++i) std::thread([this] { help(); }).detach();
}

void BlockPool::work_on(Job& job) {
  running_kernel = {job.launch->device, job.launch->name};
  uint64_t block;
  while (!job.failed.load(std::memory_order_relaxed) && (block = job.next.fetch_add(1)) < job.total) {
    std::string failure = run_block(*job.launch, block);
    if (failure.empty()) continue;
    std::lock_guard<std::mutex> lock(job.mutex);
    if (job.failure.empty()) job.failure = failure;
    job.failed.store(true);
  }
  running_kernel = {};
}

void BlockPool::help() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return !jobs_.empty(); });
      job = jobs_.back();
      if (job->next.load() >= job->total || job->failed.load()) {
        jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
        continue;
      }
      ++job->active;
    }
    {
      FiberFramesHiddenFromLeakCheck hidden;
      work_on(*job);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --job->active;
    }
    done_cv_.notify_all();
  }
}

std::string BlockPool::run(const KernelLaunch& launch) {
  auto job = std::make_shared<Job>();
  job->launch = &launch;
  job->total = uint64_t{launch.grid.x} * launch.grid.y * launch.grid.z;
  if (job->total > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
  }
  work_cv_.notify_all();
  work_on(*job);
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = std::find(jobs_.begin(), jobs_.end(), job);
  if (it != jobs_.end()) jobs_.erase(it);
  done_cv_.wait(lock, [&] { return job->active == 0; });
  if (job->failure.empty()) return "";
  return job->failure + " (thread orders from EMBER_EMU_SEED=" + std::to_string(thread_order_seed()) + ")";
}

}  // namespace

std::string run_grid(const KernelLaunch& launch) { return BlockPool::get().run(launch); }

}  // namespace ember::emu

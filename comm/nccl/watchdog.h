// The NCCL backend's watchdog: one thread per process that holds every in-flight collective (and
// so its tensors) until it completes, and ends the job when one fails (ncclCommGetAsyncError:
// a peer died, aborted or disagreed) or exceeds EMBER_COLLECTIVE_TIMEOUT, after aborting its
// communicator so that nothing stays blocked in NCCL. It also keeps the SIGTERM line naming
// what is in flight, for a rank that mpirun stops because another died.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_process_group.h"

namespace ember::comm::nccl {

class Watchdog {
 public:
  static Watchdog& get();
  void watch(std::shared_ptr<NcclWork> work);
  // One pass over the in-flight works: releases the completed, ends the job on a failure.
  void poll();
  // Whether some thread is inside fail_job: the job is about to end with its line.
  bool failing() const { return failing_.load(); }
  ~Watchdog();

 private:
  Watchdog();
  void loop();
  // Aborts the work's communicator, fails its works and ends the job with `why`. Only the first
  // caller ends the job; any other thread that gets here waits for it to.
  [[noreturn]] void fail_job(const NcclWork& work, const std::string& why);

  void publish();  // mutex_ held

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<NcclWork>> in_flight_;
  bool stopping_ = false;
  std::atomic<bool> failing_{false};
  std::thread thread_;
};

}  // namespace ember::comm::nccl

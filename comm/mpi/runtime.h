// The MPI runtime of one process: a communication thread that makes the MPI calls (collectives
// run there, in submission order, overlapping the caller's compute, unless the caller is already
// waiting for one, which it then runs itself; send/recv are posted there and progressed between
// collectives), a watchdog thread that ends the job when a collective or
// an in-flight send/recv exceeds EMBER_COLLECTIVE_TIMEOUT, and a SIGTERM handler that says
// which collective a rank was in when the launcher stopped it (whatever is in flight: running,
// posted and progressed by the communication thread, or waited on by a caller). The communication thread sleeps
// as SCHED_BATCH, so waking it never preempts a caller that is about to run its collective
// itself; collectives submitted inside a comm::OverlapScope (DDP's buckets) and send/recv switch
// it back first, so that they start at once.
#pragma once

#include <mpi.h>
#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/process_group.h"
#include "comm/thread_work.h"

namespace ember::comm::mpi {

class MpiWork final : public ThreadWork {
 public:
  // Runs on the communication thread; returns the requests still to complete (point-to-point),
  // or none when the work is done.
  using Start = std::function<std::vector<MPI_Request>()>;
  // Runs there once every request completed; `code` is the first failed request's MPI error code
  // (MPI_SUCCESS if none). Raising makes the work fail with that message.
  using Finish = std::function<void(int code)>;
  MpiWork(CollectiveInfo info, Start start, Finish finish, int rank);

 private:
  friend class Runtime;
  void before_wait(std::chrono::milliseconds timeout) override;
  void complete(const std::string& error);

  Start start_;
  Finish finish_;
};

class Runtime {
 public:
  // Initialises MPI on first use (on the communication thread).
  static Runtime& get();
  // Whether get() has started MPI in this process (abort_job must not start it just to abort).
  static bool started();
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // `prompt`: the caller will not wait soon (comm::OverlapScope), so the communication thread
  // starts the work at once rather than leaving it for the caller's wait().
  void submit(const std::shared_ptr<MpiWork>& work, bool prompt = false);
  // Called by a waiter: when `work` is a collective next in line and the communication thread is
  // between works, runs it on the calling thread. Submit-then-wait then costs no thread hand-off
  // (two futex wake-ups, ~13 us: a tenth of a 1 MB all-reduce here). Collectives keep their
  // submission order: the communication thread starts nothing while such a call runs.
  void run_here_if_next(const MpiWork& work);
  // Runs `task` on the communication thread and waits for it (communicator creation).
  void run_sync(const std::function<void()>& task);
  // Prints `message` prefixed with the rank and aborts the whole job.
  [[noreturn]] void abort(const std::string& message, int status = 1);
  ~Runtime();

 private:
  Runtime();
  void communication_loop();
  // Runs a work's start (and, when it leaves no requests, its finish); returns the requests still
  // to progress and the error, if any.
  std::pair<std::vector<MPI_Request>, std::string> start(MpiWork& work);
  void watchdog_loop();
  // Rewrites what the SIGTERM handler prints from current_ and posted_ (mutex_ held): called on
  // every change of either, so the message is never stale.
  void publish_in_flight();
  // Switches the communication thread between SCHED_BATCH and SCHED_OTHER (mutex_ held).
  void set_comm_thread_batch(bool batch);

  int world_rank_ = 0, world_size_ = 1;
  std::thread comm_thread_, watchdog_thread_;
  std::mutex mutex_;
  std::condition_variable cv_;           // the communication thread's: work to start, or stop
  std::condition_variable watchdog_cv_;  // separate, so per-collective wake-ups never reach it
  pthread_t comm_thread_id_{};           // set by the thread itself before ready_ (comm_thread_ may not be yet)
  bool comm_thread_batch_ = false;       // its scheduling policy is SCHED_BATCH (guarded by mutex_)
  // The last collective was a short one run by its waiter, not by the communication thread:
  // submits outside an OverlapScope then skip waking it, and it looks for work every
  // kDeferredStart instead, so a caller that computes before it waits still has its collective
  // started by then. Measured by tools/bench:allreduce: skipping the wake gains 2-5% at 1-4 MB,
  // while the polls cost 3-10% at 16-100 MB, hence the size limit.
  bool waiters_run_collectives_ = false;
  static constexpr std::chrono::milliseconds kDeferredStart{10};
  static constexpr int64_t kDeferWakeBelowBytes = 8 << 20;
  struct InFlight {
    std::shared_ptr<MpiWork> work;
    std::vector<MPI_Request> requests;  // MPI_REQUEST_NULL once completed
    int code = MPI_SUCCESS;             // the first failure
  };
  bool progress(InFlight& entry);             // true once every request completed and the work finished
  std::string finish_error(InFlight& entry);  // runs the work's finish step; its error, or ""
  void finish(InFlight& entry);

  std::deque<std::shared_ptr<MpiWork>> queue_;
  std::vector<InFlight> in_flight_;  // non-blocking operations (point-to-point, overlapped
                                     // all-reduces); comm thread only
  // What the watchdog measures and the SIGTERM handler names (guarded by mutex_): the collective
  // running on the communication thread or inline on its waiter, and every posted operation still
  // in flight (send/recv, non-blocking all-reduces), oldest first.
  std::shared_ptr<MpiWork> current_;
  std::vector<std::shared_ptr<MpiWork>> posted_;
  bool ready_ = false, stopping_ = false;
  std::string init_error_;
};

}  // namespace ember::comm::mpi

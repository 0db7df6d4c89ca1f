// The MPI runtime of one process: a communication thread that owns every MPI call (collectives
// run there, in submission order, overlapping the caller's compute), a watchdog thread that
// ends the job when a collective exceeds EMBER_COLLECTIVE_TIMEOUT, and a SIGTERM handler that
// says which collective a rank was in when the launcher stopped it.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"

namespace ember::comm::mpi {

class MpiWork final : public Work {
 public:
  // start: runs on the communication thread; returns a request still to complete
  // (point-to-point) or MPI_REQUEST_NULL when done. finish: runs there after completion.
  MpiWork(CollectiveInfo info, std::function<MPI_Request()> start, std::function<void()> finish, int rank);
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() const override;
  std::string error() const override;
  const CollectiveInfo& info() const override { return info_; }

 private:
  friend class Runtime;
  void complete(const std::string& error);

  CollectiveInfo info_;
  std::function<MPI_Request()> start_;
  std::function<void()> finish_;
  int rank_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::string error_;
  std::chrono::steady_clock::time_point started_;
};

class Runtime {
 public:
  // Initialises MPI on first use (on the communication thread).
  static Runtime& get();
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  void submit(const std::shared_ptr<MpiWork>& work);
  // Runs `task` on the communication thread and waits for it (communicator creation).
  void run_sync(const std::function<void()>& task);
  // Prints `message` prefixed with the rank and aborts the whole job.
  [[noreturn]] void abort(const std::string& message);
  ~Runtime();

 private:
  Runtime();
  void communication_loop();
  void watchdog_loop();
  void set_current(const MpiWork* work);

  int world_rank_ = 0, world_size_ = 1;
  std::thread comm_thread_, watchdog_thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<MpiWork>> queue_;
  std::vector<std::pair<std::shared_ptr<MpiWork>, MPI_Request>> in_flight_;  // comm thread only
  std::shared_ptr<MpiWork> current_;  // guarded by mutex_; what the watchdog measures
  bool ready_ = false, stopping_ = false;
  std::string init_error_;
};

}  // namespace ember::comm::mpi

// A Work that a backend's own thread completes (the MPI and Gloo backends): waiting for it, its
// error, and the error of a bounded wait that ran out, the same in every such backend.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "comm/process_group.h"

namespace ember::comm {

class ThreadWork : public Work {
 public:
  ThreadWork(CollectiveInfo info, int rank);
  // Unbounded, waits until the backend completes the work (its watchdog names one that never
  // does, for the whole job); bounded, gives up with an error naming it. Raises the work's error.
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() const override;
  std::string error() const override;
  const CollectiveInfo& info() const override { return info_; }
  // info().describe(), made once: backends name in-flight work often.
  const std::string& description() const { return description_; }

 protected:
  // Ends the work (empty `error`: success) and wakes its waiters.
  void mark_done(const std::string& error);
  // Runs in wait() before it blocks (the MPI backend may run the work on the waiting thread).
  virtual void before_wait(std::chrono::milliseconds /*timeout*/) {}

  CollectiveInfo info_;
  std::string description_;
  int rank_;
  mutable std::mutex mutex_;
  // When the backend started running it (its watchdog times it from here), and when it was issued;
  // with the profiler's tag of the issuing thread, they make the work's profiler event.
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point issued_;
  std::string profiler_tag_;

 private:
  std::condition_variable done_cv_;
  bool done_ = false;
  std::string error_;
};

}  // namespace ember::comm

// Emulated streams and events. A stream is a queue of operations run in order by its own worker
// thread, never inline in the call that queues them; a kernel is handed to its device's runner
// process (runner.h), and the worker waits for it. An event marks a point in a stream's queue; a
// stream waiting on an event holds its later operations until that point has run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cuda/emu/cuda_runtime.h"

namespace ember::emu {

// A point in a stream's queue; done once every operation before it has run.
struct Mark {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::chrono::steady_clock::time_point time;
  void complete();
  void wait();
};

class Stream {
 public:
  explicit Stream(int device);
  ~Stream();  // runs what is queued, then stops the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // `op` returns "" or a failure, which becomes the device's sticky error.
  void enqueue(std::function<std::string()> op);
  // The emulator's own bookkeeping (the checking mode's guards), which stands for no GPU work: in
  // order with the rest, but not delayed.
  void enqueue_bookkeeping(std::function<std::string()> step);
  std::shared_ptr<Mark> mark();  // a mark at the current end of the queue
  void synchronize();
  bool idle();
  int device() const { return device_; }

 private:
  void work();

  int device_;
  std::mutex mutex_;
  std::condition_variable cv_, drained_cv_;
  struct Op {
    std::function<std::string()> run;
    bool bookkeeping;
  };

  std::deque<Op> queue_;
  bool running_op_ = false, stopping_ = false;
  std::thread worker_;
};

class Event {
 public:
  explicit Event(unsigned flags) : flags_(flags) {}
  void record(Stream& stream);
  std::shared_ptr<Mark> last() const;
  unsigned flags() const { return flags_; }

 private:
  unsigned flags_;
  mutable std::mutex mutex_;
  std::shared_ptr<Mark> mark_;  // null until recorded
};

}  // namespace ember::emu

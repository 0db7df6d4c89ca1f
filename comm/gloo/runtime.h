// What the Gloo process groups of one process share: a watchdog that ends the job when a collective or a posted send/recv outlives
// EMBER_COLLECTIVE_TIMEOUT (naming it, as the MPI backend's does), and the line the SIGTERM handler
// prints about what was in flight. Each group runs its collectives in submission order on a worker
// thread of its own (GlooWorker); send/recv are posted at once and their completions waited for by
// a small pool of threads (P2pWaiters), so a recv that waits for its peer never holds up a
// collective behind it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "comm/thread_work.h"

namespace ember::comm::gloo_backend {

class GlooWorker;

class GlooWork final : public ThreadWork {
 public:
  // `worker`: the group's, which a waiter may run the work on its own thread through (collectives);
  // null for send/recv.
  GlooWork(CollectiveInfo info, int rank, std::weak_ptr<GlooWorker> worker = {})
      : ThreadWork(std::move(info), rank), worker_(std::move(worker)) {}
  // Registers it with the runtime, which times it from now (a collective when it starts to run,
  // a send/recv when it is posted).
  void start();
  // Ends the work (empty `error`: success), unregisters it and wakes its waiters.
  void complete(const std::string& error);
  std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  friend class Runtime;  // sets started_ as it registers the work
  void before_wait(std::chrono::milliseconds timeout) override;
  std::weak_ptr<GlooWorker> worker_;
};

class Runtime {
 public:
  static Runtime& get();
  void set_world_rank(int rank) { world_rank_ = rank; }
  int world_rank() const { return world_rank_; }
  void track(GlooWork* work);
  void untrack(GlooWork* work);

 private:
  Runtime();
  void watchdog_loop();
  void publish_in_flight();  // mutex_ held

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<GlooWork*> in_flight_;  // started and not completed, oldest first; each removes itself
  int world_rank_ = 0;
  std::thread watchdog_;
};

// A thread that runs one group's collectives in order. A caller waiting on the collective next in
// line while the thread is between works runs it itself: submit-then-wait then costs no hand-off
// between threads (on a 2-core VM two of them took ~0.8 ms of a 4 KB all-reduce's 1.1 ms). While
// waiters do that, submits outside an OverlapScope do not wake the thread; it looks for work every
// kDeferredStart instead, so a caller that computes before it waits still has it started by then.
class GlooWorker {
 public:
  GlooWorker();
  ~GlooWorker();
  // `run` raises to fail the work (gloo's exceptions become messages naming the collective).
  // `prompt`: the caller will not wait soon (OverlapScope), so the thread starts it at once.
  void submit(std::shared_ptr<GlooWork> work, std::function<void()> run, bool prompt);
  void run_here_if_next(const GlooWork& work);

 private:
  using Entry = std::pair<std::shared_ptr<GlooWork>, std::function<void()>>;
  void loop();
  void run_entry(Entry& entry);
  static constexpr std::chrono::milliseconds kDeferredStart{10};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  bool busy_ = false;         // a work is running (on the thread or on a waiter)
  bool waiters_run_ = false;  // the last work ran on its waiter
  bool stopping_ = false;
  std::thread thread_;
};

// Threads that wait for posted point-to-point transfers, each on one transfer: as many as are
// waiting at once, kept for reuse.
class P2pWaiters {
 public:
  ~P2pWaiters();
  void submit(std::shared_ptr<GlooWork> work, std::function<void()> wait);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<GlooWork>, std::function<void()>>> queue_;
  int idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Runs `body`, turning what it raises into the work's failure text.
void run_work(GlooWork& work, const std::function<void()>& body);

}  // namespace ember::comm::gloo_backend

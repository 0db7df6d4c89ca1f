#include "comm/gloo/runtime.h"

#include <algorithm>

#include "comm/init.h"
#include "comm/terminate_message.h"
#include "core/error.h"

namespace ember::comm::gloo_backend {

void GlooWork::start() { Runtime::get().track(this); }

void GlooWork::before_wait(std::chrono::milliseconds timeout) {
  // A wait that may give up before the watchdog would must not be running the work itself.
  if (timeout.count() > 0 && timeout < collective_timeout()) return;
  if (auto worker = worker_.lock()) worker->run_here_if_next(*this);
}

void GlooWork::complete(const std::string& error) {
  Runtime::get().untrack(this);
  mark_done(error);
}

void run_work(GlooWork& work, const std::function<void()>& body) {
  std::string error;
  try {
    body();
  } catch (const std::exception& e) {
    error = e.what();
  }
  work.complete(error);
}

Runtime& Runtime::get() {
  // Never destroyed: groups released during static destruction still complete their works here,
  // and the device outlives every group's connections.
  static Runtime* runtime = new Runtime;
  return *runtime;
}

Runtime::Runtime() {
  watchdog_ = std::thread([this] { watchdog_loop(); });
  install_terminate_handler();
}

void Runtime::track(GlooWork* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  work->started_ = std::chrono::steady_clock::now();  // under the lock: in_flight_ stays oldest first
  in_flight_.push_back(work);
  publish_in_flight();
}

void Runtime::untrack(GlooWork* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find(in_flight_.begin(), in_flight_.end(), work);
  if (it == in_flight_.end()) return;  // never started (failed before it was queued)
  in_flight_.erase(it);
  publish_in_flight();
}

void Runtime::publish_in_flight() {
  if (in_flight_.empty()) {
    publish_terminate_message(TerminateSource::Gloo, "");
    return;
  }
  std::vector<std::string> newer;
  for (size_t i = 1; i < in_flight_.size(); ++i) newer.push_back(in_flight_[i]->description());
  publish_terminate_message(TerminateSource::Gloo,
                            terminated_message(world_rank_, in_flight_[0]->description(), newer));
}

void Runtime::watchdog_loop() {
  const auto timeout = collective_timeout();
  const auto period =
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000), timeout / 4 + std::chrono::milliseconds(1));
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait_for(lock, period);
    // Oldest first: only the first can be late.
    if (in_flight_.empty() || std::chrono::steady_clock::now() - in_flight_[0]->started() <= timeout) continue;
    const std::string what = timed_out_message(in_flight_[0]->info(), timeout);
    lock.unlock();
    abort_job(what);  // Gloo has no job-wide abort: the peers see this process's connections close
  }
}

GlooWorker::GlooWorker() : thread_([this] { loop(); }) {}

GlooWorker::~GlooWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GlooWorker::submit(std::shared_ptr<GlooWork> work, std::function<void()> run, bool prompt) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(std::move(work), std::move(run));
    wake = prompt || !waiters_run_;
  }
  if (wake) cv_.notify_one();
}

void GlooWorker::run_here_if_next(const GlooWork& work) {
  Entry mine;
  bool switched = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_ || queue_.empty() || queue_.front().first.get() != &work) return;
    mine = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    switched = !waiters_run_;
    waiters_run_ = true;
  }
  // From now on submits do not wake the thread: it must poll, and learns so by this one wake-up.
  if (switched) cv_.notify_one();
  run_entry(mine);
  bool more;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    more = !queue_.empty();
  }
  if (more) cv_.notify_one();  // what was queued behind it (a wake-up per collective costs as much as a small one)
}

void GlooWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto ready = [&] { return stopping_ || (!queue_.empty() && !busy_); };
    if (waiters_run_)
      cv_.wait_for(lock, kDeferredStart, ready);
    else  // until there is work, or a waiter ran one (this thread must poll from then on)
      cv_.wait(lock, [&] { return ready() || waiters_run_; });
    if (stopping_ && queue_.empty()) return;
    if (queue_.empty() || busy_) continue;
    Entry entry = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    waiters_run_ = false;
    lock.unlock();
    run_entry(entry);
    lock.lock();
    busy_ = false;
  }
}

void GlooWorker::run_entry(Entry& entry) {
  entry.first->start();
  run_work(*entry.first, entry.second);
  entry.second = nullptr;  // drops the tensors it held before the next wait
}

P2pWaiters::~P2pWaiters() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void P2pWaiters::submit(std::shared_ptr<GlooWork> work, std::function<void()> wait) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(std::move(work), std::move(wait));
    if (idle_ < static_cast<int>(queue_.size())) threads_.emplace_back([this] { loop(); });
  }
  cv_.notify_one();
}

void P2pWaiters::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;
    auto [work, wait] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    run_work(*work, wait);
    wait = nullptr;
    lock.lock();
  }
}

}  // namespace ember::comm::gloo_backend

#include "parallel/replica_threads.h"

#include <exception>
#include <optional>

#include "core/runtime.h"
#include "core/error.h"
#include "core/grad_mode.h"

namespace ember::parallel {

namespace {
thread_local const ReplicaContext* this_replica = nullptr;
}  // namespace

const ReplicaContext* current_replica() { return this_replica; }

void ReplicaRendezvous::reset(size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  count_ = count;
  arrived_ = 0;
  slots_.assign(count, Contribution());
  result_.clear();
  aborted_.clear();
  departed_.clear();
}

std::vector<Contribution> ReplicaRendezvous::exchange(size_t replica, Contribution mine, const char* what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_.empty() && !departed_.empty()) aborted_ = departed_;
  EMBER_CHECK(aborted_.empty(), what, ": replica ", replica, " cannot meet the others: ", aborted_);
  EMBER_CHECK(replica < count_, what, ": replica ", replica, " of a run of ", count_);
  const uint64_t round = round_;
  slots_[replica] = std::move(mine);
  if (++arrived_ == count_) {
    // The next round cannot complete before every replica has read this one's result: each
    // must arrive there first.
    result_ = std::move(slots_);
    slots_.assign(count_, Contribution());
    arrived_ = 0;
    ++round_;
    arrived_cv_.notify_all();
    return result_;
  }
  arrived_cv_.wait(lock, [&] { return round_ != round || !aborted_.empty(); });
  EMBER_CHECK(round_ != round, what, ": replica ", replica, " stopped waiting for the others: ", aborted_);
  return result_;
}

void ReplicaRendezvous::finished(size_t replica, Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.empty()) return;
  departed_ = detail::concat("replica ", replica, " on ", device, " finished without joining this meeting (",
                             "every replica must run the same SyncBatchNorm layers in the same order)");
  if (arrived_ > 0) {
    aborted_ = departed_;
    arrived_cv_.notify_all();
  }
}

void ReplicaRendezvous::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.empty()) aborted_ = reason;
  }
  arrived_cv_.notify_all();
}

ReplicaThreads::ReplicaThreads(std::vector<Device> devices, std::string owner)
    : devices_(std::move(devices)), owner_(std::move(owner)) {
  for (size_t k = 1; k < devices_.size(); ++k) threads_.emplace_back([this, k] { work(k); });
}

ReplicaThreads::ReplicaThreads(std::vector<Device> devices, std::string owner, StageThreads)
    : devices_(std::move(devices)), owner_(std::move(owner)), unit_("stage"), caller_runs_first_(false) {
  for (size_t k = 0; k < devices_.size(); ++k) threads_.emplace_back([this, k] { work(k); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ReplicaThreads::run(size_t count, const std::vector<Device>& stream_devices,
                         const std::function<void(size_t)>& fn) {
  EMBER_CHECK(count >= 1 && count <= devices_.size(), owner_, ": asked to run ", count, " replicas on ",
              devices_.size(), " devices");
  Task task;
  task.fn = &fn;
  task.grad_enabled = GradMode::is_enabled();
  task.autocast = autocast::capture();
  task.count = count;
  for (const Device& d : stream_devices) {
    Stream stream = current_stream(d);
    if (stream.defined()) task.streams.push_back(std::move(stream));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_CHECK(!running_, owner_,
                ": its replicas are already running (a second forward or backward from another "
                "thread at the same time, or from inside a replica); one run at a time");
    running_ = true;
    task_ = std::move(task);
    first_failed_ = -1;
    failure_.clear();
    rendezvous_.reset(count);
    pending_ = caller_runs_first_ ? count - 1 : count;
    ++generation_;
  }
  start_cv_.notify_all();
  if (caller_runs_first_) run_one(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  task_ = Task();
  running_ = false;
  if (first_failed_ >= 0) {
    EMBER_FAIL(owner_, ": ", unit_, " ", first_failed_, " on ", devices_[static_cast<size_t>(first_failed_)],
               " failed: ", failure_);
  }
}

void ReplicaThreads::work(size_t replica) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (replica >= task_.count) continue;  // fewer replicas than devices this time
    }
    run_one(replica);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

void ReplicaThreads::run_one(size_t replica) {
  const Device device = devices_[replica];
  ReplicaContext context{replica, task_.count, device, &rendezvous_};
  const ReplicaContext* outer = this_replica;
  if (caller_runs_first_) this_replica = &context;
  std::optional<autocast::StateGuard> caller_autocast;
  try {
    if (replica != 0 || !caller_runs_first_) {
      GradMode::set_enabled(task_.grad_enabled);
      caller_autocast.emplace(task_.autocast);  // autocast is per thread, like grad mode
      // The replica's own device last: set_current_stream also makes its device current.
      for (int own = 0; own < 2; ++own) {
        for (const Stream& stream : task_.streams)
          if ((stream.device() == device) == (own == 1)) set_current_stream(stream);
      }
    }
    (*task_.fn)(replica);
    rendezvous_.finished(replica, device);
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (first_failed_ < 0) {
        first_failed_ = static_cast<int>(replica);
        failure_ = e.what();
      }
    }
    rendezvous_.abort(detail::concat(unit_, " ", replica, " on ", device, " failed"));
  }
  this_replica = outer;
}

}  // namespace ember::parallel

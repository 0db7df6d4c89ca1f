#include "comm/nccl/watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "comm/init.h"
#include "comm/terminate_message.h"

namespace ember::comm::nccl {

namespace {

// Short enough that a completed collective releases its tensors promptly, long enough to cost
// nothing next to a training step.
constexpr std::chrono::milliseconds kPoll{5};

// For a thread that must not end the process because another is already ending it. Bounded, so
// that a stuck exit still ends in the caller's abort rather than a hang.
void wait_for_exit() { std::this_thread::sleep_for(std::chrono::seconds(30)); }

}  // namespace

Watchdog& Watchdog::get() {
  static Watchdog watchdog;
  return watchdog;
}

namespace {
std::terminate_handler previous_terminate = nullptr;

// A collective's failure often reaches the caller first, as a sticky CUDA error from its next
// synchronising call that nothing catches: the job should still end with the watchdog's line
// naming the collective, not only with the CUDA error's text.
[[noreturn]] void on_terminate() {
  Watchdog::get().poll();  // ends the job itself when a communicator failed
  // The watchdog thread's abort is what woke this thread with a CUDA error: aborting here would
  // end the process before the watchdog's line is written.
  if (Watchdog::get().failing()) wait_for_exit();
  if (previous_terminate != nullptr) previous_terminate();
  std::abort();
}
}  // namespace

Watchdog::Watchdog() {
  install_terminate_handler();
  previous_terminate = std::set_terminate(&on_terminate);
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::watch(std::shared_ptr<NcclWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back(std::move(work));
    publish();
  }
  cv_.notify_all();
}

void Watchdog::publish() {
  if (in_flight_.empty()) {
    publish_terminate_message(TerminateSource::Nccl, "");
    return;
  }
  // The oldest is what every later one waits behind (works are appended in submission order).
  const NcclWork& oldest = *in_flight_.front();
  std::string text = "[rank " + std::to_string(oldest.communicator()->rank) + "] ember: terminated while in " +
                     oldest.description() + " (NCCL, " + oldest.communicator()->where() + ")";
  if (in_flight_.size() > 1) text += ", with " + std::to_string(in_flight_.size() - 1) + " more queued behind it";
  publish_terminate_message(TerminateSource::Nccl,
                            text + "; another rank probably failed or exited early (see its output)\n");
}

void Watchdog::fail_job(const NcclWork& work, const std::string& why) {
  if (failing_.exchange(true)) {
    wait_for_exit();
    std::abort();
  }
  const auto& comm = work.communicator();
  comm->abort();
  const std::string message = work.description() + " " + why + " (NCCL, " + comm->where() +
                              "; the communicator "
                              "was aborted)";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : in_flight_)
      if (w->communicator() == comm) w->fail(message);
  }
  abort_job(message);
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait_for(lock, kPoll, [&] { return stopping_; });
    if (stopping_) return;
    if (in_flight_.empty()) continue;
    lock.unlock();
    poll();
    lock.lock();
  }
}

void Watchdog::poll() {
  std::vector<std::shared_ptr<NcclWork>> works;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    works = in_flight_;
  }
  std::vector<const NcclWork*> finished;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& w : works) {
    const auto& comm = w->communicator();
    ncclResult_t async = ncclSuccess;
    if (!comm->aborted.load() && ncclCommGetAsyncError(comm->comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      fail_job(*w, std::string("failed: ") + ncclGetErrorString(async) + ": " + ncclGetLastError(comm->comm));
    }
    // The raw query: cuda::Event::query would also raise deferred kernel checks, which belong
    // to the caller's next synchronisation, not to this thread.
    const cudaError_t state = cudaEventQuery(w->end_event());
    if (state == cudaSuccess) {
      w->complete();
      finished.push_back(w.get());
      continue;
    }
    if (state != cudaErrorNotReady) {
      cudaGetLastError();
      fail_job(*w, std::string("failed on its stream: ") + cudaGetErrorString(state));
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - w->started());
    if (elapsed > collective_timeout()) {
      fail_job(*w, "did not complete within " + format_seconds(collective_timeout()) +
                       " (EMBER_COLLECTIVE_TIMEOUT): a rank may have stopped issuing collectives, issued them in "
                       "a different order, or died; run with EMBER_DISTRIBUTED_DEBUG=1 to compare the ranks' "
                       "collectives");
    }
  }
  works.clear();
  if (finished.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<NcclWork>> still;
  for (auto& w : in_flight_) {
    bool done = false;
    for (const NcclWork* f : finished) done = done || f == w.get();
    if (!done) still.push_back(std::move(w));
  }
  in_flight_.swap(still);
  publish();
}

}  // namespace ember::comm::nccl

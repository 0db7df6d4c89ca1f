#include "comm/thread_work.h"

#include "core/error.h"
#include "core/profiler.h"

namespace ember::comm {

ThreadWork::ThreadWork(CollectiveInfo info, int rank)
    : info_(std::move(info)), description_(info_.describe()), rank_(rank) {
  if (profiler::active()) {
    issued_ = std::chrono::steady_clock::now();
    profiler_tag_ = profiler::current_tag();
  }
}

void ThreadWork::wait(std::chrono::milliseconds timeout) {
  before_wait(timeout);
  const bool bounded = timeout.count() > 0;
  std::unique_lock<std::mutex> lock(mutex_);
  bool finished = true;
  // Unbounded, the watchdog is what ends a collective that never completes: it names it and ends
  // the whole job. A waiter timing out at the same moment would race it and raise instead, from
  // wherever it waits (inside a DDP backward, say), with no rank-prefixed line on stderr.
  if (bounded)
    finished = done_cv_.wait_for(lock, timeout, [&] { return done_; });
  else
    done_cv_.wait(lock, [&] { return done_; });
  const bool p2p = info_.kind == CollectiveKind::Send || info_.kind == CollectiveKind::Recv;
  EMBER_CHECK(finished, "rank ", rank_, ": ", description_, " did not complete within ", format_seconds(timeout),
              p2p ? " (the peer has not posted the matching " +
                        std::string(info_.kind == CollectiveKind::Send ? "recv" : "send") +
                        " with this tag, or is gone)"
                  : " (a rank may have stopped issuing collectives, or issued them in a different order; run with "
                    "EMBER_DISTRIBUTED_DEBUG=1 to compare the ranks' collectives)");
  EMBER_CHECK(error_.empty(), error_);
}

bool ThreadWork::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

std::string ThreadWork::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void ThreadWork::mark_done(const std::string& error) {
  if (profiler::active() && issued_.time_since_epoch().count() != 0) {
    // Recorded once done: the async pair spans the time the backend ran it, and says how long it
    // queued behind earlier work after it was issued.
    const auto done = std::chrono::steady_clock::now();
    const auto start = started_ < issued_ ? issued_ : started_;
    const std::string name = profiler_tag_.empty() ? description_ : profiler_tag_ + ": " + description_;
    const auto queued = std::chrono::duration_cast<std::chrono::microseconds>(start - issued_).count();
    const uint64_t id = profiler::next_async_id();
    profiler::async_begin("comm", name, id, start, {{"queued_us", std::to_string(queued)}});
    profiler::async_end("comm", name, id, done, error.empty() ? profiler::Args{} : profiler::Args{{"error", error}});
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = error;
  }
  done_cv_.notify_all();
}

}  // namespace ember::comm

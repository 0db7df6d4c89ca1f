#include "comm/thread_work.h"

#include "core/error.h"

namespace ember::comm {

ThreadWork::ThreadWork(CollectiveInfo info, int rank)
    : info_(std::move(info)), description_(info_.describe()), rank_(rank) {}

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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = error;
  }
  done_cv_.notify_all();
}

}  // namespace ember::comm

// The built-in communication hooks and the continuation Work they use.
#include "parallel/comm_hooks.h"

#include <mutex>

#include "core/error.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::parallel {

namespace {

// Complete once `continuation_` ran too: whichever thread first waits, or polls is_completed()
// after the inner work completed, runs it (once). A continuation that throws is this Work's error.
class ContinuationWork final : public comm::Work {
 public:
  ContinuationWork(comm::WorkPtr inner, std::function<void()> continuation)
      : inner_(std::move(inner)), continuation_(std::move(continuation)) {}
  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    run_continuation();
    std::string failure = error();
    EMBER_CHECK(failure.empty(), failure);
  }
  bool is_completed() const override {
    if (!inner_->is_completed()) return false;
    if (inner_->error().empty()) run_continuation();
    return true;
  }
  std::string error() const override {
    std::string inner = inner_->error();
    if (!inner.empty()) return inner;
    std::lock_guard<std::mutex> lock(mutex_);
    return continuation_error_;
  }
  const comm::CollectiveInfo& info() const override { return inner_->info(); }

 private:
  void run_continuation() const {
    std::call_once(once_, [&] {
      try {
        continuation_();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        continuation_error_ = "after " + info().describe() + ": " + e.what();
      }
    });
  }

  comm::WorkPtr inner_;
  std::function<void()> continuation_;
  mutable std::once_flag once_;
  mutable std::mutex mutex_;
  mutable std::string continuation_error_;
};

comm::WorkPtr compressed(comm::ProcessGroup& group, GradBucket& bucket, DType wire) {
  Tensor wire_buffer;
  {
    NoGradGuard no_grad;
    // Dividing first keeps the 16-bit sum in range.
    wire_buffer = (bucket.buffer / static_cast<double>(group.size())).to(wire);
  }
  comm::WorkPtr work = group.all_reduce(wire_buffer, comm::ReduceOp::Sum);
  Tensor destination = bucket.buffer;
  return then(work, [destination, wire_buffer] {
    NoGradGuard no_grad;
    copy_into(destination, wire_buffer);
  });
}

}  // namespace

comm::WorkPtr then(comm::WorkPtr inner, std::function<void()> continuation) {
  return std::make_shared<ContinuationWork>(std::move(inner), std::move(continuation));
}

comm::WorkPtr allreduce_hook(comm::ProcessGroup& group, GradBucket& bucket) {
  return group.all_reduce(bucket.buffer, comm::ReduceOp::Avg);
}

comm::WorkPtr fp16_compress_hook(comm::ProcessGroup& group, GradBucket& bucket) {
  return compressed(group, bucket, kFloat16);
}

comm::WorkPtr bf16_compress_hook(comm::ProcessGroup& group, GradBucket& bucket) {
  return compressed(group, bucket, kBFloat16);
}

}  // namespace ember::parallel

// Stream workers. In delay mode every operation waits before it runs, so the host runs ahead of
// the device as it would with a busy GPU.
#include "cuda/emu/stream.h"

#include "cuda/emu/device.h"
#include "cuda/emu/emu.h"

namespace ember::emu {

void Mark::complete() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    time = std::chrono::steady_clock::now();
  }
  cv.notify_all();
}

void Mark::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return done; });
}

Stream::Stream(int device) : device_(device) {
  worker_ = std::thread([this] { work(); });
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void Stream::enqueue(std::function<std::string()> op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(op), false});
  }
  cv_.notify_one();
}

void Stream::enqueue_bookkeeping(std::function<std::string()> step) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(step), true});
  }
  cv_.notify_one();
}

std::shared_ptr<Mark> Stream::mark() {
  auto m = std::make_shared<Mark>();
  enqueue([m] {
    m->complete();
    return std::string();
  });
  return m;
}

void Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_cv_.wait(lock, [&] { return queue_.empty() && !running_op_; });
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && !running_op_;
}

void Stream::work() {
  while (true) {
    Op op;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      op = std::move(queue_.front());
      queue_.pop_front();
      running_op_ = true;
    }
    if (int ms = delay_ms(); ms > 0 && !op.bookkeeping) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::string failure = op.run();
    if (!failure.empty()) record_failure(device_, failure);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_op_ = false;
    }
    drained_cv_.notify_all();
  }
}

void Event::record(Stream& stream) {
  std::shared_ptr<Mark> m = stream.mark();
  std::lock_guard<std::mutex> lock(mutex_);
  mark_ = std::move(m);
}

std::shared_ptr<Mark> Event::last() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mark_;
}

}  // namespace ember::emu

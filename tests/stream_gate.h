// Holds a CUDA stream (cudaLaunchHostFunc) until released, as a busy GPU would: tests use it to
// prove that a call did not wait for the device, or that work is ordered after the held stream.
#pragma once

#include <condition_variable>
#include <mutex>

namespace ember::testing {

struct StreamGate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  // The host function: enqueue with cudaLaunchHostFunc(stream, &StreamGate::hold, &gate).
  static void hold(void* self) {
    auto* g = static_cast<StreamGate*>(self);
    std::unique_lock<std::mutex> lock(g->mutex);
    g->cv.wait(lock, [&] { return g->open; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
};

}  // namespace ember::testing

// Ember's CUDA API: devices, streams and events, memory statistics. Shaped like PyTorch's
// torch.cuda: each device has a default stream, and each thread a current stream per device,
// on which every kernel and copy for that device is queued.
//
//   if (ember::cuda::is_available()) {
//     ember::cuda::DeviceGuard on(1);                       // cuda:1 is current in this scope
//     ember::cuda::Stream side = ember::cuda::Stream::create();
//     {
//       ember::cuda::StreamGuard use(side);                 // work below queues on `side`
//       y = x.to(Device::cuda(1), /*non_blocking=*/true);
//     }
//     ember::cuda::Event done;
//     done.record(side);
//     ember::cuda::current_stream().wait(done);             // later work waits for the copy
//   }
//
// The same code runs on real GPUs (--config=cuda) and on devices emulated by cuda/emu
// (EMBER_EMULATED_GPUS=N).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "cuda/caching_allocator.h"
#include "cuda/lang.h"

namespace ember::cuda {

int device_count();
// Whether this process has called into the CUDA runtime yet (see DeviceRuntime::runtime_started).
bool runtime_started();
bool is_available();
int current_device();
void set_device(int device);
// Waits for all work on `device` (-1: the current device).
void synchronize(int device = -1);

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

class Event;

// A handle to a CUDA stream; copies share it, and a created stream lives while a copy does.
class Stream {
 public:
  // The default stream of `device` (-1: current).
  static Stream default_stream(int device = -1);
  // A new stream on `device` (-1: current).
  static Stream create(int device = -1);

  int device() const { return device_; }
  cudaStream_t handle() const { return handle_; }
  bool is_default() const { return handle_ == nullptr; }
  void synchronize() const;
  bool query() const;  // whether all work queued so far has finished
  // Work queued on this stream after the call waits until `event` has passed.
  void wait(const Event& event) const;
  bool operator==(const Stream& other) const { return device_ == other.device_ && handle_ == other.handle_; }
  bool operator!=(const Stream& other) const { return !(*this == other); }

 private:
  Stream(int device, cudaStream_t handle, std::shared_ptr<void> owner)
      : device_(device), handle_(handle), owner_(std::move(owner)) {}
  int device_;
  cudaStream_t handle_;
  std::shared_ptr<void> owner_;
};

// This thread's current stream on `device` (-1: current device); the default stream until set.
Stream current_stream(int device = -1);
void set_current_stream(const Stream& stream);

// Makes `stream` (and its device) current for the scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_stream_;
  int previous_device_;
};

// A point in a stream's work. Created on its first record, on the recording stream's device.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  void record();  // on the current stream
  void record(const Stream& stream);
  void wait(const Stream& stream) const { stream.wait(*this); }
  bool query() const;        // whether the recorded work has finished (true if never recorded)
  void synchronize() const;  // blocks the host until then
  // Milliseconds from this event to `end`; both recorded with enable_timing.
  float elapsed_ms(const Event& end) const;
  bool recorded() const;
  cudaEvent_t handle() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The caching allocator's view of `device` (-1: current): allocated, reserved, peaks, counts.
MemoryStats memory_stats(int device = -1);
void reset_peak_memory_stats(int device = -1);
// Returns cached, unused device memory to the driver (all devices).
void empty_cache();
// `tensor`'s memory is used by work on `stream` too: when freed, it is not reused until that
// stream's work queued so far has finished.
void record_stream(const Tensor& tensor, const Stream& stream);

}  // namespace ember::cuda

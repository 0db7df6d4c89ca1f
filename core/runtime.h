// The device runtime: what a backend provides besides its kernels (core/backend.h): memory,
// copies, streams and events, synchronisation, the device count. autograd, parallel/ and comm/
// order work across devices through the typed Stream and Event below and the free functions at
// the end; a backend's own stream type stays behind Stream::Impl, seen only by that backend.
//
// Host-ordered backends (the CPU) have no streams: their work finishes before a call returns,
// current_stream() gives an undefined Stream there, and every ordering call is a no-op on one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/storage.h"

namespace ember {

class Tensor;

// A queue of work on one device. Copies share it; a stream the backend created lives while a
// copy does. Two Streams are equal when they name the same queue.
class Stream {
 public:
  // The backend's own handle, kept alive by the Streams that share it.
  struct Impl {
    virtual ~Impl() = default;
  };

  Stream() = default;  // none: the device runs its work in order on the host
  Stream(Device device, uintptr_t id, std::shared_ptr<const Impl> impl)
      : device_(device), id_(id), impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  Device device() const { return device_; }
  // The backend's name for the queue, unique among the device's live streams.
  uintptr_t id() const { return id_; }
  const Impl& impl() const { return *impl_; }

  bool operator==(const Stream& other) const {
    return defined() == other.defined() && (!defined() || (device_ == other.device_ && id_ == other.id_));
  }
  bool operator!=(const Stream& other) const { return !(*this == other); }

 private:
  Device device_;
  uintptr_t id_ = 0;
  std::shared_ptr<const Impl> impl_;
};

// A point in one stream's work, recorded by record_event.
class Event {
 public:
  struct Impl {
    virtual ~Impl() = default;
  };

  Event() = default;
  explicit Event(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  bool defined() const { return impl_ != nullptr; }
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

struct DeviceRuntime {
  const char* name = "?";
  // Devices of this type; the registry rejects an index beyond it.
  int (*device_count)() = nullptr;
  // Whether this process has started the device runtime (a CUDA context): a forked copy of the
  // process could not use it, so multiprocessing refuses to fork then. Null: never.
  bool (*runtime_started)() = nullptr;
  // Memory of device `device_index`. A CUDA allocation belongs to the stream current when it was
  // made: freeing it makes it reusable for that stream's later work at once.
  Allocator* (*allocator)(int device_index) = nullptr;
  // Bytes the allocator has handed out on the device and not taken back (its reuse cache not
  // counted), and the most at once since the last reset: for measuring what a computation holds
  // (the pipeline's Schedule::kAuto). Null: not counted. The CPU counts all its memory as one.
  int64_t (*allocated_bytes)(int device_index) = nullptr;
  int64_t (*peak_allocated_bytes)(int device_index) = nullptr;
  void (*reset_peak_allocated)(int device_index) = nullptr;
  // Page-locked host memory that this backend's copies can read and write asynchronously
  // (Tensor::pin_memory); null when the backend has none.
  Allocator* (*pinned_allocator)() = nullptr;
  // Waits until everything queued on the device has finished.
  void (*synchronize)(Device device) = nullptr;
  // Copies nbytes of contiguous memory to or from a device of this backend's type: host to
  // device, device to host, or between two devices of this type (directly, peer to peer).
  // Between devices it never blocks the host; to or from the host it returns once the host memory
  // may be reused or read, unless `non_blocking` and the host memory is pinned (then the copy is
  // ordered on the device's current stream only).
  void (*memcpy_device)(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                        bool non_blocking) = nullptr;

  // ---- streams; all null on host-ordered backends ----
  // This thread's current stream on `device`: where the kernels it calls are queued.
  Stream (*current_stream)(Device device) = nullptr;
  // Makes `stream` this thread's current stream on its device, and that device the current one.
  void (*set_current_stream)(const Stream& stream) = nullptr;
  Stream (*new_stream)(Device device) = nullptr;
  Event (*record_event)(const Stream& stream) = nullptr;
  // Work queued on `stream` after the call waits until `event` has passed.
  void (*wait_event)(const Stream& stream, const Event& event) = nullptr;
  // The tensor's memory is used on `stream` too: it is not reused, once freed, before the work
  // queued on that stream by then has passed.
  void (*record_stream)(const Tensor& tensor, const Stream& stream) = nullptr;

  // ---- the profiler's device times (core/profiler.h); null on host-ordered backends ----
  // An event with timing enabled, recorded on `stream`: it marks when the device got there.
  Event (*record_timing_event)(const Stream& stream) = nullptr;
  // Milliseconds from `start` to `end`, two such events; the host waits for `end` to pass.
  double (*elapsed_ms)(const Event& start, const Event& end) = nullptr;
};

void register_runtime(DeviceType type, const DeviceRuntime* runtime);
// The runtime for `device`, or an Error naming `op` when no backend is registered for its type
// or the device does not exist.
const DeviceRuntime& runtime_for(Device device, const char* op);
// The registered runtime for `type`, or null.
const DeviceRuntime* find_runtime(DeviceType type);
bool has_backend(DeviceType type);
// Devices of `type` this process can use (0 when no backend for it is linked).
int device_count(DeviceType type);

// ---- the stream rules' vocabulary (docs/ARCHITECTURE.md, "Streams"). Each call takes a device
// or a stream; on a device without streams it does nothing (or returns an undefined Stream). ----
Stream current_stream(Device device);
// Makes `stream` current on its device and that device current; nothing for an undefined one.
void set_current_stream(const Stream& stream);
// A new stream on `device`; undefined on a device without streams.
Stream new_stream(Device device);
// Later work on `consumer` waits for the work queued on `producer` so far (an event between
// them). Nothing when either is undefined or they are the same queue; returns whether it waited.
bool stream_wait(const Stream& consumer, const Stream& producer);
// stream_wait from the current stream of `producer`'s device.
bool wait_for_stream(const Stream& producer);
// See DeviceRuntime::record_stream; nothing for an undefined stream.
void record_stream(const Tensor& tensor, const Stream& stream);

}  // namespace ember

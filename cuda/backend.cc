// Registers the CUDA backend for kCUDA (this library is alwayslink): its runtime (device memory
// from the caching allocator on the current stream, pinned host memory, copies, streams and
// events) and every compute-table entry. Whether any device exists is asked only when a CUDA
// tensor is first made.
#include <map>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "cuda/api.h"
#include "cuda/check.h"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

// Device memory of one device, allocated for the current stream (its block is reusable as soon
// as it is freed, for that stream's later work: see CachingAllocator).
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  // Whole 32-bit words: 8- and 16-bit atomics (scatter_add's) swap the aligned word holding their
  // element, so the word holding a storage's last byte must be part of it (on a GPU the caching
  // allocator's 512-byte rounding hid this; the emulator's checking mode guards every byte past).
  void* allocate(size_t nbytes) override {
    return caching_allocator().allocate(device_, (nbytes + 3) / 4 * 4, current_stream(device_).handle());
  }
  void deallocate(void* ptr, size_t) override { caching_allocator().free(ptr); }

 private:
  int device_;
};

Allocator* device_allocator(int device) {
  // Never destroyed: tensors in static storage may free their memory after main returns.
  static const std::vector<DeviceAllocator>* allocators = [] {
    auto* all = new std::vector<DeviceAllocator>();
    for (int d = 0; d < device_count(); ++d) all->emplace_back(d);
    return all;
  }();
  EMBER_CHECK(device >= 0 && device < static_cast<int>(allocators->size()), "empty: device cuda:", device,
              " does not exist");
  return const_cast<DeviceAllocator*>(&(*allocators)[static_cast<size_t>(device)]);
}

// Page-locked host memory. A block that asynchronous copies still use when its tensor dies is
// freed only once those copies have finished (events recorded at each copy), because freeing
// page-locked memory under a running DMA corrupts whatever reuses it.
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    release_finished();
    void* ptr = nullptr;
    check(cudaMallocHost(&ptr, nbytes), "pin_memory");
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_[static_cast<char*>(ptr)] = Block{nbytes, {}};
    return ptr;
  }

  void deallocate(void* ptr, size_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(static_cast<char*>(ptr));
    if (it == blocks_.end()) return;
    if (it->second.uses.empty()) {
      cudaFreeHost(ptr);
    } else {
      dying_.push_back({ptr, std::move(it->second.uses)});
    }
    blocks_.erase(it);
  }

  bool pinned() const override { return true; }

  // An asynchronous copy on `stream` reads or writes `ptr` (anywhere inside a pinned block).
  void record_use(const void* ptr, const Stream& stream) {
    Event done;
    done.record(stream);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(static_cast<const char*>(ptr));
    if (it == blocks_.begin()) return;
    --it;
    if (static_cast<const char*>(ptr) < it->first + it->second.bytes) it->second.uses.push_back(done);
  }

 private:
  struct Block {
    size_t bytes;
    std::vector<Event> uses;
  };
  struct Dying {
    void* ptr;
    std::vector<Event> uses;
  };

  void release_finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < dying_.size();) {
      bool done = true;
      for (const Event& e : dying_[i].uses) done = done && e.query();
      if (done) {
        cudaFreeHost(dying_[i].ptr);
        dying_[i] = std::move(dying_.back());
        dying_.pop_back();
      } else {
        ++i;
      }
    }
  }

  std::mutex mutex_;
  std::map<const char*, Block> blocks_;
  std::vector<Dying> dying_;
};

PinnedAllocator& pinned_allocator() {
  static PinnedAllocator* allocator = new PinnedAllocator();  // outlives every pinned tensor
  return *allocator;
}

void memcpy_device(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes, bool non_blocking) {
  if (nbytes == 0) return;
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    // Peer copy on the source's current stream, ordered after the work already queued for the
    // destination, and before the destination's later work: no host synchronisation.
    const Stream src_stream = current_stream(src_device.index), dst_stream = current_stream(dst_device.index);
    Event dst_ready, copied;
    dst_ready.record(dst_stream);
    src_stream.wait(dst_ready);
    {
      DeviceGuard guard(src_device.index);
      check(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, src_stream.handle()), "copy_");
    }
    copied.record(src_stream);
    dst_stream.wait(copied);
    return;
  }
  const bool to_device = dst_device.is_cuda();
  const int device = to_device ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  const Stream stream = current_stream(device);
  check(cudaMemcpyAsync(dst, src, nbytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream.handle()),
        "copy_");
  if (non_blocking) {
    pinned_allocator().record_use(to_device ? src : dst, stream);
  } else {
    stream.synchronize();
  }
}

// core's Stream and Event (core/runtime.h) around this backend's own: only this file unwraps them.
struct StreamHandle final : ember::Stream::Impl {
  explicit StreamHandle(Stream s) : stream(std::move(s)) {}
  Stream stream;
};
struct EventHandle final : ember::Event::Impl {
  Event event;
};

ember::Stream wrap(const Stream& stream) {
  return ember::Stream(Device::cuda(stream.device()), reinterpret_cast<uintptr_t>(stream.handle()),
                       std::make_shared<const StreamHandle>(stream));
}

const Stream& unwrap(const ember::Stream& stream) { return static_cast<const StreamHandle&>(stream.impl()).stream; }

// Every op recorded on a GPU asks for its stream (autograd keeps it with the node), so a thread
// reuses its wrapper while its current stream stays the same: no allocation per op.
ember::Stream current_stream_of(Device device) {
  thread_local std::vector<ember::Stream> wrapped;
  if (wrapped.size() <= static_cast<size_t>(device.index)) wrapped.resize(device.index + 1);
  ember::Stream& cached = wrapped[device.index];
  const Stream current = current_stream(device.index);
  if (!cached.defined() || unwrap(cached) != current) cached = wrap(current);
  return cached;
}

void set_current(const ember::Stream& stream) {
  const Stream& s = unwrap(stream);
  set_current_stream(s);
  set_device(s.device());
}

ember::Event record_event(const ember::Stream& stream) {
  auto handle = std::make_shared<EventHandle>();
  handle->event.record(unwrap(stream));
  return ember::Event(std::move(handle));
}

ember::Event record_timing_event(const ember::Stream& stream) {
  auto handle = std::make_shared<EventHandle>();
  handle->event = Event(true);
  handle->event.record(unwrap(stream));
  return ember::Event(std::move(handle));
}

double elapsed_ms(const ember::Event& start, const ember::Event& end) {
  const Event& last = static_cast<const EventHandle&>(end.impl()).event;
  last.synchronize();
  return static_cast<const EventHandle&>(start.impl()).event.elapsed_ms(last);
}

void wait_event(const ember::Stream& stream, const ember::Event& event) {
  unwrap(stream).wait(static_cast<const EventHandle&>(event.impl()).event);
}

const DeviceRuntime& cuda_runtime() {
  static const DeviceRuntime runtime = [] {
    DeviceRuntime r;
    r.name = "cuda";
    r.device_count = &device_count;
    r.runtime_started = &runtime_started;
    r.allocator = &device_allocator;
    r.allocated_bytes = [](int device_index) { return cuda::memory_stats(device_index).allocated_bytes; };
    r.peak_allocated_bytes = [](int device_index) { return cuda::memory_stats(device_index).peak_allocated_bytes; };
    r.reset_peak_allocated = [](int device_index) { cuda::reset_peak_memory_stats(device_index); };
    r.pinned_allocator = [] { return static_cast<Allocator*>(&pinned_allocator()); };
    r.synchronize = [](Device device) { cuda::synchronize(device.index); };
    r.memcpy_device = &memcpy_device;
    r.current_stream = &current_stream_of;
    r.set_current_stream = &set_current;
    r.new_stream = [](Device device) { return wrap(Stream::create(device.index)); };
    r.record_event = &record_event;
    r.record_timing_event = &record_timing_event;
    r.elapsed_ms = &elapsed_ms;
    r.wait_event = &wait_event;
    r.record_stream = [](const Tensor& tensor, const ember::Stream& stream) { record_stream(tensor, unwrap(stream)); };
    return r;
  }();
  return runtime;
}

const KernelTable& cuda_table() {
  static const KernelTable table = [] {
    KernelTable t;
    t.name = "cuda";
#define EMBER_KERNEL(name, result, params) t.name = &name##_kernel;
#include "core/kernel_entries.inc"
#undef EMBER_KERNEL
    return t;
  }();
  return table;
}

const bool registered = [] {
  register_runtime(kCUDA, &cuda_runtime());
  register_kernels(kCUDA, &cuda_table());
  return true;
}();

}  // namespace

}  // namespace ember::cuda

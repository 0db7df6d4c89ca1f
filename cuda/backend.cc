// Registers the CUDA kernel table for kCUDA (this library is alwayslink): device memory from the
// caching allocator on the current stream, pinned host memory, copies, and the kernels of
// cuda/kernels. Whether any device exists is asked only when a CUDA tensor is first made.
#include <map>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "cuda/api.h"
#include "cuda/blas.h"
#include "cuda/conv.h"
#include "cuda/check.h"
#include "cuda/kernels/batch_norm.cuh"
#include "cuda/kernels/binary.cuh"
#include "cuda/kernels/copy.cuh"
#include "cuda/kernels/index.cuh"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/kernels/pool.cuh"
#include "cuda/kernels/random.cuh"
#include "cuda/kernels/reduce.cuh"
#include "cuda/kernels/softmax.cuh"
#include "cuda/kernels/unary.cuh"

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

void memcpy_device(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                   bool non_blocking) {
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
  check(cudaMemcpyAsync(dst, src, nbytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                        stream.handle()),
        "copy_");
  if (non_blocking) {
    pinned_allocator().record_use(to_device ? src : dst, stream);
  } else {
    stream.synchronize();
  }
}

// The stream a node's forward ran on, kept alive with the node (a created stream lives while a
// copy of its handle does). Every op recorded on a GPU asks, so a thread reuses its token while
// its current stream stays the same: no allocation per op.
std::shared_ptr<void> capture_stream(Device device) {
  thread_local std::vector<std::shared_ptr<Stream>> tokens;
  if (tokens.size() <= static_cast<size_t>(device.index)) tokens.resize(device.index + 1);
  std::shared_ptr<Stream>& token = tokens[device.index];
  const Stream current = current_stream(device.index);
  if (!token || *token != current) token = std::make_shared<Stream>(current);
  return token;
}

bool wait_for_captured(const std::shared_ptr<void>& captured) {
  const Stream& producer = *static_cast<const Stream*>(captured.get());
  const Stream consumer = current_stream(producer.device());
  if (consumer == producer) return false;
  Event done;
  done.record(producer);
  consumer.wait(done);
  return true;
}

void make_current(const std::shared_ptr<void>& captured) {
  const Stream& stream = *static_cast<const Stream*>(captured.get());
  set_current_stream(stream);
  set_device(stream.device());
}

std::shared_ptr<void> new_stream(Device device) { return std::make_shared<Stream>(Stream::create(device.index)); }

void record_stream_captured(const Tensor& tensor, const std::shared_ptr<void>& captured) {
  record_stream(tensor, *static_cast<const Stream*>(captured.get()));
}

const KernelTable& cuda_table() {
  static const KernelTable table = [] {
    KernelTable t;
    t.name = "cuda";
    t.device_count = &device_count;
    t.runtime_started = &runtime_started;
    t.allocator = &device_allocator;
    t.pinned_allocator = [] { return static_cast<Allocator*>(&pinned_allocator()); };
    t.synchronize = [](Device device) { cuda::synchronize(device.index); };
    t.memcpy_device = &memcpy_device;
    t.copy = &copy_kernel;
    t.fill = &fill_kernel;
    t.unary = &unary_kernel;
    t.unary_backward = &unary_backward_kernel;
    t.binary = &binary_kernel;
    t.compare = &compare_kernel;
    t.where = &where_kernel;
    t.reduce = &reduce_kernel;
    t.arg_reduce = &arg_reduce_kernel;
    t.random = &random_kernel;
    t.sgd_update = &sgd_update_kernel;
    t.adam_update = &adam_update_kernel;
    t.capture_stream = &capture_stream;
    t.wait_for_captured = &wait_for_captured;
    t.make_current = &make_current;
    t.new_stream = &new_stream;
    t.record_stream = &record_stream_captured;
    t.gemm = &gemm;
    t.conv2d = &conv2d;
    t.conv2d_backward_input = &conv2d_backward_input;
    t.conv2d_backward_weight = &conv2d_backward_weight;
    t.max_pool2d = &max_pool2d_kernel;
    t.max_pool2d_backward = &max_pool2d_backward_kernel;
    t.avg_pool2d = &avg_pool2d_kernel;
    t.avg_pool2d_backward = &avg_pool2d_backward_kernel;
    t.adaptive_avg_pool2d = &adaptive_avg_pool2d_kernel;
    t.adaptive_avg_pool2d_backward = &adaptive_avg_pool2d_backward_kernel;
    t.batch_norm_stats = &batch_norm_stats_kernel;
    t.batch_norm_apply = &batch_norm_apply_kernel;
    t.batch_norm_backward_reduce = &batch_norm_backward_reduce_kernel;
    t.batch_norm_backward_input = &batch_norm_backward_input_kernel;
    t.softmax = &softmax_kernel;
    t.softmax_backward = &softmax_backward_kernel;
    t.gather = &gather_kernel;
    t.scatter_add = &scatter_add_kernel;
    return t;
  }();
  return table;
}

const bool registered = [] {
  register_backend(kCUDA, &cuda_table());
  return true;
}();

}  // namespace

}  // namespace ember::cuda

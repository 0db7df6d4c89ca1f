// Storage: one refcounted buffer on one device, shared by a tensor and all its views.
// It also carries the version counter that in-place ops bump: views share it, like PyTorch's.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "core/device.h"

namespace ember {

namespace shm {
class Segment;
}

// Owns device memory. A backend registers one per device type (see backend.h);
// implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  // Page-locked host memory (see DeviceRuntime::pinned_allocator).
  virtual bool pinned() const { return false; }
};

class StorageImpl {
 public:
  // Allocates nbytes with `allocator`, which must outlive the storage.
  StorageImpl(size_t nbytes, Device device, Allocator* allocator);
  // Wraps memory owned elsewhere; `deleter` (may be empty) runs when the storage dies.
  StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_pinned() const { return allocator_ != nullptr && allocator_->pinned(); }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Frees the bytes but keeps this storage, and every tensor and saved reference on it, alive;
  // materialize() brings back fresh (uninitialised) bytes of the same size from the same
  // allocator. Fully sharded data parallelism frees a gathered parameter between uses this way,
  // as PyTorch's FSDP does with storage().resize_(0) and resize_(n). A tensor on a released
  // storage raises when its data is asked for. Allocator-owned storage only.
  void release_bytes();
  void materialize();
  bool released() const { return released_; }

  // Shared memory (core/shared_memory.h): the segment holding the bytes, null when private.
  const std::shared_ptr<shm::Segment>& shared_segment() const { return segment_; }
  size_t shared_offset() const { return segment_offset_; }
  // Copies the bytes to `segment` at `offset` and frees the old memory: every tensor on this
  // storage uses the shared copy from now on.
  void adopt_shared(std::shared_ptr<shm::Segment> segment, size_t offset);
  // A storage over memory of `segment` that another process filled.
  static std::shared_ptr<StorageImpl> in_segment(std::shared_ptr<shm::Segment> segment, size_t offset, size_t nbytes);

 private:
  void release();

  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* allocator_;
  std::function<void(void*)> deleter_;
  std::shared_ptr<shm::Segment> segment_;
  size_t segment_offset_ = 0;
  bool released_ = false;
  std::atomic<uint32_t> version_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace ember

// Storage lifetime: memory goes back to the allocator (or the external deleter) with the last reference.
#include "core/storage.h"

#include <cstring>

#include "core/error.h"
#include "core/shared_memory.h"

namespace ember {

StorageImpl::StorageImpl(size_t nbytes, Device device, Allocator* allocator)
    : data_(nullptr), nbytes_(nbytes), device_(device), allocator_(allocator) {
  if (nbytes_ > 0) data_ = allocator_->allocate(nbytes_);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), allocator_(nullptr), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() { release(); }

void StorageImpl::release() {
  if (allocator_ != nullptr) {
    if (data_ != nullptr) allocator_->deallocate(data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
  allocator_ = nullptr;
  deleter_ = nullptr;
  segment_.reset();
}

void StorageImpl::release_bytes() {
  EMBER_CHECK(allocator_ != nullptr && segment_ == nullptr, "release_bytes: only storage from an allocator can ",
              "release its bytes (not shared, wrapped or already freed memory)");
  if (released_) return;
  if (data_ != nullptr) allocator_->deallocate(data_, nbytes_);
  data_ = nullptr;
  released_ = true;
}

void StorageImpl::materialize() {
  if (!released_) return;
  if (nbytes_ > 0) data_ = allocator_->allocate(nbytes_);
  released_ = false;
}

void StorageImpl::adopt_shared(std::shared_ptr<shm::Segment> segment, size_t offset) {
  char* target = segment->base() + offset;
  if (nbytes_ > 0) std::memcpy(target, data_, nbytes_);
  release();
  data_ = target;
  segment_ = std::move(segment);
  segment_offset_ = offset;
}

std::shared_ptr<StorageImpl> StorageImpl::in_segment(std::shared_ptr<shm::Segment> segment, size_t offset,
                                                     size_t nbytes) {
  auto storage = std::make_shared<StorageImpl>(segment->base() + offset, nbytes, Device(kCPU), nullptr);
  storage->segment_ = std::move(segment);
  storage->segment_offset_ = offset;
  return storage;
}

}  // namespace ember

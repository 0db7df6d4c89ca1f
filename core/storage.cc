// Storage lifetime: memory goes back to the allocator (or the external deleter) with the last reference.
#include "core/storage.h"

#include "core/error.h"

namespace ember {

StorageImpl::StorageImpl(size_t nbytes, Device device, Allocator* allocator)
    : data_(nullptr), nbytes_(nbytes), device_(device), allocator_(allocator) {
  if (nbytes_ > 0) data_ = allocator_->allocate(nbytes_);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), allocator_(nullptr), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() {
  if (allocator_ != nullptr) {
    if (data_ != nullptr) allocator_->deallocate(data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace ember

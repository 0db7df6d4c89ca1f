// Shared memory that cannot leak: anonymous memfd segments, mapped MAP_SHARED, that the kernel
// frees when the last process holding a descriptor or a mapping exits (kill -9 included). There
// is no name in /dev/shm to clean up. Tensors are packed into few segments, so sharing thousands
// of parameters costs a handful of file descriptors, and every segment's pages are reserved up
// front (fallocate), so a full machine is an Error at share time, never a SIGBUS on first touch.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/storage.h"

namespace ember::shm {

class Segment {
 public:
  // A new zero-filled segment of at least `nbytes`; errors name `op`, the size and the cause.
  static std::shared_ptr<Segment> create(size_t nbytes, const char* op);
  // Maps a segment received from another process (taking ownership of `fd`). A segment this
  // process already maps comes back as the same object, so a tensor sent twice is one mapping.
  static std::shared_ptr<Segment> attach(int fd, const char* op);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int fd() const { return fd_; }
  char* base() const { return base_; }
  size_t size() const { return size_; }
  // Identifies the segment across processes (the memfd's inode).
  uint64_t id() const { return id_; }

 private:
  Segment(int fd, char* base, size_t size, uint64_t id) : fd_(fd), base_(base), size_(size), id_(id) {}
  int fd_;
  char* base_;
  size_t size_;
  uint64_t id_;
};

// Moves `storage`'s bytes into shared memory in place: every tensor and view on it sees the
// shared copy from now on. A no-op for a storage that already is shared. CPU storages only.
void move_to_shared(StorageImpl& storage, const char* op);
// The same for many storages at once, packed into one segment.
void move_to_shared(const std::vector<StorageImpl*>& storages, const char* op);

// A storage over bytes [offset, offset + nbytes) of `segment`. Storages handed out for the same
// place share one StorageImpl while it lives, so views sent separately stay views of one storage.
Storage storage_in(const std::shared_ptr<Segment>& segment, size_t offset, size_t nbytes);

// Segments this process holds: the count a test compares with the descriptor limit.
size_t live_segments();

}  // namespace ember::shm

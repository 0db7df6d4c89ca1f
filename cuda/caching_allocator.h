// The CUDA caching allocator: device memory is taken from cudaMalloc in segments and kept for
// reuse, because cudaMalloc and cudaFree synchronise the device.
//
//   void* p = cuda::caching_allocator().allocate(0, bytes, stream);   // cuda:0, used on `stream`
//   cuda::caching_allocator().record_stream(p, other);   // `other` uses it too
//   cuda::caching_allocator().free(p);   // reused once `stream` and `other` have passed this point
//
// Blocks of up to 1 MB are carved from 2 MB segments, larger ones get segments of their own (2 MB
// multiples), and a cached block may be split and is merged again with free neighbours. Each
// block belongs to the stream it was allocated on: work queued on that stream runs in order, so
// the block can be handed out again at once when freed. A block also used on other streams
// (record_stream) waits until each of them has passed an event recorded at the free. When
// cudaMalloc fails, the allocator frees its unused segments and tries once more; then it raises
// an ember::Error naming the device, the request, and what is allocated and reserved. In the
// emulator's checking mode (EMBER_EMU_CHECK=1) a block holds block_guard_bytes() more, and the
// emulator guards it from the requested end on: a kernel writing past a tensor is reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuda/lang.h"

namespace ember::cuda {

struct MemoryStats {
  int64_t allocated_bytes = 0;  // handed out and not freed
  int64_t reserved_bytes = 0;   // held from cudaMalloc (allocated + cached)
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t allocations = 0;   // allocate() calls
  int64_t frees = 0;         // free() calls
  int64_t segments = 0;      // cudaMalloc'd segments held now
  int64_t cuda_mallocs = 0;  // cudaMalloc calls made
};

class CachingAllocator {
 public:
  CachingAllocator();
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `stream` null: the device's default (null) stream. Zero bytes gives a null pointer.
  void* allocate(int device, size_t bytes, cudaStream_t stream);
  void free(void* ptr);
  // `ptr` (a pointer allocate returned) is used on `stream` too.
  void record_stream(void* ptr, cudaStream_t stream);
  // Returns every unused segment to the device (all devices).
  void empty_cache();
  MemoryStats stats(int device) const;
  void reset_peak_stats(int device);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

CachingAllocator& caching_allocator();  // the process's allocator

// What a block holds beyond its request before rounding to 512 bytes: at least the emulator's
// guard in its checking mode, else nothing.
size_t block_guard_bytes();

}  // namespace ember::cuda

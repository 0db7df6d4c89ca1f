// Pools of free blocks ordered by (device, stream, size, address), so a best fit on the right
// stream is one lower_bound; segments keep their blocks in address order for merging.
#include "cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/error.h"

#if !defined(EMBER_CUDA)
#include "cuda/emu/check_mode.h"
#include "cuda/emu/guards.h"
#endif

namespace ember::cuda {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;  // blocks up to this come from small segments
constexpr size_t kSmallSegment = size_t{2} << 20;
constexpr size_t kRounding = 512;
constexpr size_t kSegmentRounding = size_t{2} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The emulator's checking mode guards every block from the requested end on (cuda/emu/guards.h);
// under --config=cuda compute-sanitizer does that job.
bool guarding() {
#if defined(EMBER_CUDA)
  return false;
#else
  return emu::checking();
#endif
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

struct Block {
  int device;
  cudaStream_t stream;
  size_t size;
  char* ptr;
  bool small = false;
  bool allocated = false;
  bool in_pool = false;
  bool guarded = false;   // while allocated: the emulator guards [ptr + requested, ptr + size)
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::vector<cudaStream_t> used_on;  // streams besides `stream` (record_stream)
};

struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->device != b->device) return a->device < b->device;
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

// Makes `device` current for its lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

}  // namespace

struct CachingAllocator::State {
  mutable std::mutex mutex;
  std::set<Block*, BlockOrder> small_pool, large_pool;
  std::unordered_map<void*, Block*> live;
  struct PendingFree {
    Block* block;
    std::vector<cudaEvent_t> events;
  };
  std::vector<PendingFree> pending;
  std::vector<MemoryStats> stats;

  MemoryStats& stats_of(int device) {
    if (static_cast<size_t>(device) >= stats.size()) stats.resize(static_cast<size_t>(device) + 1);
    return stats[static_cast<size_t>(device)];
  }
  std::set<Block*, BlockOrder>& pool_of(const Block* b) { return b->small ? small_pool : large_pool; }

  void insert_free(Block* b) {
    b->allocated = false;
    // Merge with free neighbours of the same segment (they are in the pool).
    for (Block* n : {b->prev, b->next}) {
      if (n == nullptr || n->allocated || !n->in_pool) continue;
      pool_of(n).erase(n);
      n->in_pool = false;
      Block* first = n == b->prev ? n : b;
      Block* second = n == b->prev ? b : n;
      first->size += second->size;
      first->next = second->next;
      if (second->next) second->next->prev = first;
      delete second;
      b = first;
    }
    b->in_pool = true;
    pool_of(b).insert(b);
  }

  // Blocks whose other streams have all passed the events recorded at their free become free.
  void process_pending() {
    for (size_t i = 0; i < pending.size();) {
      PendingFree& p = pending[i];
      bool done = true;
      for (cudaEvent_t e : p.events) done = done && cudaEventQuery(e) == cudaSuccess;
      cudaGetLastError();  // "not ready" is an answer, not an error to leave for the caller
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : p.events) cudaEventDestroy(e);
      insert_free(p.block);
      pending.erase(pending.begin() + static_cast<long>(i));
    }
  }

  // Gives unused whole segments back to the devices; returns the bytes released.
  size_t release_cached_segments() {
    size_t released = 0;
    for (auto* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev != nullptr || b->next != nullptr) {
          ++it;
          continue;
        }
        it = pool->erase(it);
        {
          DeviceGuard guard(b->device);
          cudaFree(b->ptr);
        }
        MemoryStats& s = stats_of(b->device);
        s.reserved_bytes -= static_cast<int64_t>(b->size);
        --s.segments;
        released += b->size;
        delete b;
      }
    }
    return released;
  }
};

CachingAllocator::CachingAllocator() : state_(std::make_unique<State>()) {}

CachingAllocator::~CachingAllocator() = default;  // process exit: the driver reclaims the memory

void* CachingAllocator::allocate(int device, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return nullptr;
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mutex);
  st.process_pending();
  const bool small = bytes <= kSmallLimit;
  const bool guarded = guarding();
  const size_t size = round_up(bytes + (guarded ? block_guard_bytes() : 0), kRounding);
  auto& pool = small ? st.small_pool : st.large_pool;
  Block key{device, stream, size, nullptr};
  auto it = pool.lower_bound(&key);
  Block* b = nullptr;
  if (it != pool.end() && (*it)->device == device && (*it)->stream == stream) {
    b = *it;
    pool.erase(it);
    b->in_pool = false;
  } else {
    const size_t segment = small ? kSmallSegment : round_up(size, kSegmentRounding);
    void* ptr = nullptr;
    cudaError_t e;
    {
      DeviceGuard guard(device);
      e = cudaMalloc(&ptr, segment);
      if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        st.process_pending();
        st.release_cached_segments();
        e = cudaMalloc(&ptr, segment);
      }
    }
    MemoryStats& s = st.stats_of(device);
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      {
        DeviceGuard guard(device);
        cudaMemGetInfo(&free_bytes, &total_bytes);
      }
      EMBER_FAIL("CUDA out of memory on cuda:", device, ": tried to allocate ", mib(static_cast<int64_t>(bytes)),
                 "; Ember's caching allocator has ", mib(s.allocated_bytes), " allocated and ", mib(s.reserved_bytes),
                 " reserved on this device, which has ", mib(static_cast<int64_t>(free_bytes)), " free of ",
                 mib(static_cast<int64_t>(total_bytes)), " (", cudaGetErrorString(e),
                 "). Free tensors you no longer need, use a smaller batch, or call cuda::empty_cache() to return "
                 "cached blocks");
    }
    ++s.cuda_mallocs;
    ++s.segments;
    s.reserved_bytes += static_cast<int64_t>(segment);
    s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, s.reserved_bytes);
    b = new Block{device, stream, segment, static_cast<char*>(ptr), small};
  }
  // Split off what this request does not need, when the rest is worth keeping.
  const size_t rest = b->size - size;
  if (small ? rest >= kRounding : rest > kSmallLimit) {
    Block* tail = new Block{device, stream, rest, b->ptr + size, small};
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    tail->in_pool = true;
    pool.insert(tail);
  }
  b->allocated = true;
  b->guarded = guarded;
#if !defined(EMBER_CUDA)
  if (guarded) emu::guard(device, stream, b->ptr, bytes, b->size);
#endif
  st.live[b->ptr] = b;
  MemoryStats& s = st.stats_of(device);
  s.allocated_bytes += static_cast<int64_t>(b->size);
  s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, s.allocated_bytes);
  ++s.allocations;
  return b->ptr;
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.live.find(ptr);
  EMBER_CHECK(it != st.live.end(), "cuda caching allocator: free of a pointer it did not allocate (or freed twice)");
  Block* b = it->second;
  st.live.erase(it);
  MemoryStats& s = st.stats_of(b->device);
  s.allocated_bytes -= static_cast<int64_t>(b->size);
  ++s.frees;
#if !defined(EMBER_CUDA)
  if (b->guarded) emu::unguard(b->device, b->stream, b->ptr, b->size);
#endif
  b->guarded = false;
  if (b->used_on.empty()) {
    st.insert_free(b);  // its own stream runs in order: later work there comes after any use
    return;
  }
  State::PendingFree p{b, {}};
  DeviceGuard guard(b->device);
  for (cudaStream_t other : b->used_on) {
    cudaEvent_t e = nullptr;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, other);
    p.events.push_back(e);
  }
  b->used_on.clear();
  b->allocated = false;
  st.pending.push_back(std::move(p));
}

void CachingAllocator::record_stream(void* ptr, cudaStream_t stream) {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.live.find(ptr);
  EMBER_CHECK(it != st.live.end(), "cuda caching allocator: record_stream on a pointer it did not allocate");
  Block* b = it->second;
  if (stream != b->stream && std::find(b->used_on.begin(), b->used_on.end(), stream) == b->used_on.end())
    b->used_on.push_back(stream);
}

void CachingAllocator::empty_cache() {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mutex);
  st.process_pending();
  st.release_cached_segments();
}

MemoryStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return static_cast<size_t>(device) < state_->stats.size() ? state_->stats[static_cast<size_t>(device)]
                                                            : MemoryStats{};
}

void CachingAllocator::reset_peak_stats(int device) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  MemoryStats& s = state_->stats_of(device);
  s.peak_allocated_bytes = s.allocated_bytes;
  s.peak_reserved_bytes = s.reserved_bytes;
}

size_t block_guard_bytes() {
#if defined(EMBER_CUDA)
  return 0;
#else
  return guarding() ? emu::kGuardBytes : 0;
#endif
}

CachingAllocator& caching_allocator() {
  static CachingAllocator* allocator = new CachingAllocator();  // outlives static teardown
  return *allocator;
}

}  // namespace ember::cuda

// CPU allocator: 64-byte aligned blocks (one cache line, one AVX-512 vector). Blocks of 256 KB and
// more are kept on free lists by size class when released and handed out again, because each
// fresh large block costs the kernel a page fault per 4 KB page (a 75 MB matmul output took longer
// to fault in than to compute). The cache holds at most EMBER_CPU_CACHE_MB (default 2048) MB;
// under AddressSanitizer it is off, so use-after-free stays detectable. Thread-safe.
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMBER_CPU_CACHE_DEFAULT_MB 0
#else
#define EMBER_CPU_CACHE_DEFAULT_MB 2048
#endif

namespace ember::cpu {

namespace {

constexpr size_t kSmallestCached = size_t(256) << 10;

// Four classes per doubling: a request is rounded up by at most a quarter of its power of two.
size_t size_class(size_t nbytes) {
  size_t power = kSmallestCached;
  while (power * 2 <= nbytes) power *= 2;
  const size_t step = power / 4;
  return (nbytes + step - 1) / step * step;
}

size_t cache_limit_bytes() {
  size_t megabytes = EMBER_CPU_CACHE_DEFAULT_MB;
  if (const char* env = std::getenv("EMBER_CPU_CACHE_MB")) megabytes = std::strtoull(env, nullptr, 10);
  return megabytes << 20;
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) & ~size_t(63);
    if (rounded >= kSmallestCached && limit_ > 0) {
      rounded = size_class(rounded);
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = free_.find(rounded);
      if (found != free_.end() && !found->second.empty()) {
        void* ptr = found->second.back();
        found->second.pop_back();
        cached_ -= rounded;
        return ptr;
      }
    }
    void* ptr = std::aligned_alloc(64, rounded);
    EMBER_CHECK(ptr != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    size_t rounded = (nbytes + 63) & ~size_t(63);
    if (rounded >= kSmallestCached && limit_ > 0) {
      rounded = size_class(rounded);
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + rounded <= limit_) {
        free_[rounded].push_back(ptr);
        cached_ += rounded;
        return;
      }
    }
    std::free(ptr);
  }

  size_t release_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t released = cached_;
    for (auto& [size, blocks] : free_)
      for (void* ptr : blocks) std::free(ptr);
    free_.clear();
    cached_ = 0;
    return released;
  }

 private:
  const size_t limit_ = cache_limit_bytes();
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

CpuAllocator& allocator() {
  static CpuAllocator* instance = new CpuAllocator();  // never destroyed: storages may outlive statics
  return *instance;
}

}  // namespace

Allocator* cpu_allocator(int) { return &allocator(); }

size_t release_cached_cpu_memory() { return allocator().release_cached(); }

}  // namespace ember::cpu

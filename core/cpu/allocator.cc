// CPU allocator: 64-byte aligned blocks (one cache line, one AVX-512 vector). Blocks of 256 KB and
// more are kept on free lists by size class when released and handed out again, because each
// fresh large block costs the kernel a page fault per 4 KB page (a 75 MB matmul output took longer
// to fault in than to compute). The cache holds at most EMBER_CPU_CACHE_MB (default 2048) MB;
// under AddressSanitizer it is off, so use-after-free stays detectable. It counts the bytes it
// hands out (and their peak), and can cap them (EMBER_CPU_MEMORY_LIMIT). Thread-safe.
#include <atomic>
#include <cstdlib>
#include <map>
#include <string>
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

int64_t limit_from_environment() {
  const char* env = std::getenv("EMBER_CPU_MEMORY_LIMIT");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  double value = std::strtod(env, &end);
  int64_t scale = 1;
  std::string suffix = end;
  if (suffix == "K" || suffix == "k")
    scale = int64_t(1) << 10;
  else if (suffix == "M" || suffix == "m")
    scale = int64_t(1) << 20;
  else if (suffix == "G" || suffix == "g")
    scale = int64_t(1) << 30;
  else
    EMBER_CHECK(suffix.empty(), "EMBER_CPU_MEMORY_LIMIT: expected bytes with an optional K, M or G suffix, got '", env,
                "'");
  EMBER_CHECK(value >= 0, "EMBER_CPU_MEMORY_LIMIT: expected a size of at least 0, got '", env, "'");
  return static_cast<int64_t>(value * static_cast<double>(scale));
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    count_allocation(nbytes);
    try {
      return take(nbytes);
    } catch (...) {
      allocated_ -= static_cast<int64_t>(nbytes);
      throw;
    }
  }

  void deallocate(void* ptr, size_t nbytes) override {
    allocated_ -= static_cast<int64_t>(nbytes);
    give_back(ptr, nbytes);
  }

  CpuMemoryStats stats() const { return {allocated_.load(), peak_.load(), cap_.load()}; }
  void reset_peak() { peak_.store(allocated_.load()); }
  void set_cap(int64_t bytes) { cap_.store(bytes); }

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
  void count_allocation(size_t nbytes) {
    const int64_t now = allocated_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
    const int64_t cap = cap_.load();
    if (cap > 0 && now > cap) {
      allocated_ -= static_cast<int64_t>(nbytes);
      EMBER_FAIL("CPU allocator: out of memory: ", nbytes, " bytes requested with ", now - static_cast<int64_t>(nbytes),
                 " in use would pass the limit of ", cap, " bytes (EMBER_CPU_MEMORY_LIMIT / set_cpu_memory_limit)");
    }
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }

  void* take(size_t nbytes) {
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

  void give_back(void* ptr, size_t nbytes) {
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

  const size_t limit_ = cache_limit_bytes();
  std::atomic<int64_t> allocated_{0}, peak_{0}, cap_{limit_from_environment()};
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

CpuMemoryStats cpu_memory_stats() { return allocator().stats(); }

void reset_cpu_peak_memory() { allocator().reset_peak(); }

void set_cpu_memory_limit(int64_t bytes) {
  EMBER_CHECK(bytes >= 0, "set_cpu_memory_limit: expected a limit of at least 0 bytes, got ", bytes);
  allocator().set_cap(bytes);
}

}  // namespace ember::cpu

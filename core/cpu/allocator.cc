// CPU allocator: 64-byte aligned blocks (one cache line, one AVX-512 vector).
#include <cstdlib>
#include <new>

#include "core/cpu/kernels.h"
#include "core/error.h"

namespace ember::cpu {

namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) & ~size_t(63);
    void* ptr = std::aligned_alloc(64, rounded);
    EMBER_CHECK(ptr != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    return ptr;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

}  // namespace

Allocator* cpu_allocator(int) {
  static CpuAllocator allocator;
  return &allocator;
}

}  // namespace ember::cpu

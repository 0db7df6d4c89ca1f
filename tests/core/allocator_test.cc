// The CPU allocator's cache of large blocks: a released block of the same size class comes back,
// small blocks and differently sized ones do not alias live memory, and release frees the cache.
// (Under AddressSanitizer the cache is off, so only the aliasing checks apply there.) And a
// storage releasing its bytes while its tensors live on (fully sharded parameters between uses).
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/ember_core.h"

using namespace ember;

TEST_CASE("large CPU blocks are reused by size class", "[allocator]") {
  Allocator* allocator = cpu::cpu_allocator(0);
  cpu::release_cached_cpu_memory();
  const size_t big = size_t(8) << 20;
  void* first = allocator->allocate(big);
  std::memset(first, 1, big);  // the whole block is usable
  allocator->deallocate(first, big);
  // A request a few bytes smaller falls in the same class.
  void* second = allocator->allocate(big - 100);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(second == first);
#endif
  // Live blocks never alias, whatever their sizes.
  std::set<void*> live = {second};
  const size_t sizes[] = {size_t(300) << 10, big, big + (size_t(3) << 20), size_t(64)};
  std::vector<void*> blocks;
  for (size_t size : sizes) {
    blocks.push_back(allocator->allocate(size));
    std::memset(blocks.back(), 2, size);
    CHECK(live.insert(blocks.back()).second);
  }
  for (size_t i = 0; i < blocks.size(); ++i) allocator->deallocate(blocks[i], sizes[i]);
  allocator->deallocate(second, big - 100);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(cpu::release_cached_cpu_memory() >= 2 * big);
#endif
  CHECK(cpu::release_cached_cpu_memory() == 0);
}

TEST_CASE("a storage releases its bytes and materializes them again; tensors on it raise meanwhile",
          "[allocator][release]") {
  Tensor t = full({5, 7}, 2.0);
  Tensor view = t.narrow(0, 1, 2);
  const Storage& storage = t.storage();
  storage->release_bytes();
  REQUIRE(storage->released());
  REQUIRE(storage->nbytes() == 5 * 7 * 4);
  REQUIRE_THROWS_WITH(t.sum(), Catch::Contains("was released") && Catch::Contains("[5, 7]"));
  REQUIRE_THROWS_WITH(view.data_ptr(), Catch::Contains("was released"));
  storage->materialize();
  REQUIRE(!storage->released());
  t.fill_(3.0);
  REQUIRE(view.sum().item<double>() == 3.0 * 14);
  // Memory the storage does not own from an allocator cannot be released.
  float outside[4] = {0, 0, 0, 0};
  auto wrapped = std::make_shared<StorageImpl>(outside, sizeof(outside), Device(kCPU), nullptr);
  REQUIRE_THROWS_WITH(wrapped->release_bytes(), Catch::Contains("only storage from an allocator"));
}

TEST_CASE("the CPU allocator counts its bytes and their peak, and a limit raises instead of allocating",
          "[allocator][limit]") {
  cpu::reset_cpu_peak_memory();
  const int64_t base = cpu::cpu_memory_stats().allocated_bytes;
  {
    Tensor big = empty({1 << 20});  // 4 MiB
    REQUIRE(cpu::cpu_memory_stats().allocated_bytes - base >= 4 << 20);
  }
  REQUIRE(cpu::cpu_memory_stats().allocated_bytes == base);
  REQUIRE(cpu::cpu_memory_stats().peak_allocated_bytes - base >= 4 << 20);
  cpu::set_cpu_memory_limit(base + (1 << 20));
  REQUIRE_THROWS_WITH(empty({1 << 20}), Catch::Contains("out of memory") &&
                                            Catch::Contains("4194304 bytes requested") &&
                                            Catch::Contains("EMBER_CPU_MEMORY_LIMIT"));
  REQUIRE(cpu::cpu_memory_stats().allocated_bytes == base);  // the refused request is not counted
  Tensor small = empty({1000});                              // under the limit still works
  cpu::set_cpu_memory_limit(0);
  REQUIRE_THROWS_WITH(cpu::set_cpu_memory_limit(-1), Catch::Contains("at least 0"));
}

// The CUDA caching allocator (cuda/caching_allocator.h), on emulated devices and (the _gpu target)
// on a real one: reuse on the same stream, splitting and merging within a segment, no reuse
// across streams, large blocks, statistics, empty_cache, an out-of-memory error that names the
// device and the sizes, and a block used on a second stream (record_stream) that is not handed
// out again before that stream's work on it has run.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "cuda/caching_allocator.h"
#include "tests/cuda/test_kernels.h"

using namespace ember;
using namespace ember::testing;

namespace {

#define REQUIRE_CUDA(call) REQUIRE((call) == cudaSuccess)

constexpr size_t kMiB = size_t{1} << 20;

// The bytes a request takes: rounded up to 512, after the emulator's guard in its checking mode
// (EMBER_EMU_CHECK=1; none otherwise).
size_t block_bytes(size_t request) { return (request + cuda::block_guard_bytes() + 511) / 512 * 512; }

}  // namespace

TEST_CASE("a freed block is handed out again on its stream, split and merged within its segment", "[cuda][allocator]") {
  cuda::CachingAllocator alloc;
  void* a = alloc.allocate(0, 1000, nullptr);
  cuda::MemoryStats s = alloc.stats(0);
  CHECK(s.allocated_bytes == static_cast<int64_t>(block_bytes(1000)));
  if (cuda::block_guard_bytes() == 0) CHECK(s.allocated_bytes == 1024);  // rounded to 512 bytes
  CHECK(s.reserved_bytes == static_cast<int64_t>(2 * kMiB));             // one small segment
  CHECK(s.cuda_mallocs == 1);
  alloc.free(a);
  void* again = alloc.allocate(0, 900, nullptr);
  CHECK(again == a);  // best fit on the same stream: the same block
  // Three neighbours; freeing the middle one and then the first merges them into one block.
  void* b = alloc.allocate(0, 4096, nullptr);
  void* c = alloc.allocate(0, 4096, nullptr);
  // As integers: Catch would print a failing char* as a string, reading device memory.
  CHECK(reinterpret_cast<uintptr_t>(b) == reinterpret_cast<uintptr_t>(again) + block_bytes(900));
  CHECK(reinterpret_cast<uintptr_t>(c) == reinterpret_cast<uintptr_t>(b) + block_bytes(4096));
  alloc.free(b);
  alloc.free(again);
  void* merged = alloc.allocate(0, 1024 + 4096, nullptr);
  CHECK(merged == again);
  CHECK(alloc.stats(0).cuda_mallocs == 1);  // all from the one segment
  alloc.free(merged);
  alloc.free(c);
  s = alloc.stats(0);
  CHECK(s.allocated_bytes == 0);
  CHECK(s.allocations == 4 + 1);
  CHECK(s.frees == 5);
  CHECK(s.peak_allocated_bytes == static_cast<int64_t>(block_bytes(900) + 2 * block_bytes(4096)));
  alloc.empty_cache();
  CHECK(alloc.stats(0).reserved_bytes == 0);
  CHECK(alloc.stats(0).segments == 0);
}

TEST_CASE("blocks are not shared between streams; large blocks get segments of their own", "[cuda][allocator]") {
  cuda::CachingAllocator alloc;
  cudaStream_t other;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  void* a = alloc.allocate(0, 8192, nullptr);
  alloc.free(a);
  void* b = alloc.allocate(0, 8192, other);
  CHECK(b != a);  // a block freed on one stream is not handed to another without an event
  void* big = alloc.allocate(0, 5 * kMiB + 1, nullptr);
  CHECK(alloc.stats(0).reserved_bytes == static_cast<int64_t>(2 * kMiB + 2 * kMiB + 6 * kMiB));
  alloc.free(big);
  void* part = alloc.allocate(0, 3 * kMiB, nullptr);  // split from the cached 6 MiB block
  CHECK(part == big);
  CHECK(alloc.stats(0).cuda_mallocs == 3);
  alloc.free(part);
  alloc.free(b);
  alloc.empty_cache();
  CHECK(alloc.stats(0).reserved_bytes == 0);
  REQUIRE_CUDA(cudaStreamDestroy(other));
}

TEST_CASE("out of memory names the device, the request and the allocator's holdings", "[cuda][allocator][errors]") {
  cuda::CachingAllocator alloc;
  size_t free_bytes = 0, total = 0;
  REQUIRE_CUDA(cudaMemGetInfo(&free_bytes, &total));
  void* held = alloc.allocate(0, 3 * kMiB, nullptr);  // its 4 MiB segment, whole (a 1 MiB rest is not split off)
  REQUIRE_THROWS_WITH(alloc.allocate(0, total + kMiB, nullptr),
                      Catch::StartsWith("CUDA out of memory on cuda:0: tried to allocate ") &&
                          Catch::Contains("caching allocator has 4.00 MiB allocated and 4.00 MiB reserved") &&
                          Catch::Contains("call cuda::empty_cache()"));
  CHECK(cudaGetLastError() == cudaSuccess);  // the failed cudaMalloc is not left behind
  alloc.free(held);
  alloc.empty_cache();
}

TEST_CASE("a block used on another stream is not reused before that stream's work on it ran", "[cuda][allocator]") {
  const int n = 1 << 16;
  cuda::CachingAllocator alloc;
  cudaStream_t consumer;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  int* flag = nullptr;
  REQUIRE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&flag), sizeof(int)));
  *flag = 0;
  std::vector<float> ones(n, 1.0f);
  auto* x = static_cast<float*>(alloc.allocate(0, n * sizeof(float), nullptr));
  auto* y = static_cast<float*>(alloc.allocate(0, n * sizeof(float), consumer));
  REQUIRE_CUDA(cudaMemcpy(x, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t ready;
  REQUIRE_CUDA(cudaEventCreate(&ready));
  REQUIRE_CUDA(cudaEventRecord(ready, nullptr));
  REQUIRE_CUDA(cudaStreamWaitEvent(consumer, ready, 0));
  // Launched once before the consumer is held: a kernel's first launch may wait for the device's
  // running work (CUDA's lazy loading, the default since CUDA 12.2). A real H100 hung here without it.
  REQUIRE_CUDA(scale(y, y, 1.0f, n, consumer));
  // The consumer reads x only once the host lets it, long after x is freed.
  REQUIRE_CUDA(wait_for_host_flag(flag, consumer));
  REQUIRE_CUDA(scale(x, y, 2.0f, n, consumer));
  alloc.record_stream(x, consumer);
  alloc.free(x);
  // A new block on x's own stream, the size of x, overwritten at once: it must not be x.
  auto* z = static_cast<float*>(alloc.allocate(0, n * sizeof(float), nullptr));
  CHECK(z != x);
  REQUIRE_CUDA(cudaMemsetAsync(z, 0, n * sizeof(float), nullptr));
  REQUIRE_CUDA(cudaStreamSynchronize(nullptr));
  __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
  REQUIRE_CUDA(cudaStreamSynchronize(consumer));
  std::vector<float> got(n);
  REQUIRE_CUDA(cudaMemcpy(got.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(std::count(got.begin(), got.end(), 2.0f) == n);
  // Once the consumer has passed the free, x's block is free again.
  auto* w = static_cast<float*>(alloc.allocate(0, n * sizeof(float), nullptr));
  CHECK(w == x);
  for (float* p : {y, z, w}) alloc.free(p);
  alloc.empty_cache();
  REQUIRE_CUDA(cudaEventDestroy(ready));
  REQUIRE_CUDA(cudaStreamDestroy(consumer));
  REQUIRE_CUDA(cudaFreeHost(flag));
}

TEST_CASE("freeing a pointer the allocator did not give out raises", "[cuda][allocator][errors]") {
  cuda::CachingAllocator alloc;
  int local = 0;
  REQUIRE_THROWS_WITH(alloc.free(&local), Catch::Contains("free of a pointer it did not allocate"));
}

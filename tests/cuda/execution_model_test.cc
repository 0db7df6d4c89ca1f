// The CUDA execution model and runtime, checked the same way on emulated devices (CI) and on a
// real GPU (the _gpu target): block reductions with shared memory and shuffles, dynamic shared
// memory, warp operations' exact semantics, atomics across blocks, copies, and two streams
// ordered by an event. Every result is compared with a float64 or integer reference on the host.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "tests/cuda/device_buffer.h"
#include "tests/cuda/test_kernels.h"

using namespace ember::testing;

namespace {

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST_CASE("a block reduction through shared memory and warp shuffles sums like float64", "[cuda][emu]") {
  for (int n : {1, 31, 1000, 65537}) {
    for (int threads : {32, 128, 1024}) {
      std::vector<float> x = random_floats(static_cast<size_t>(n), static_cast<unsigned>(n + threads));
      DeviceBuffer<float> dx(x);
      DeviceBuffer<float> sum(std::vector<float>{0.0f});
      REQUIRE_CUDA(block_reduce_sum(dx.ptr, n, sum.ptr, 7, threads, nullptr));
      REQUIRE_CUDA(cudaDeviceSynchronize());
      const double expected = std::accumulate(x.begin(), x.end(), 0.0);
      INFO("n " << n << ", threads " << threads);
      CHECK(std::abs(sum.read()[0] - expected) <= 1e-4 * std::sqrt(n) + 1e-5);
    }
  }
}

TEST_CASE("with its barrier, a block's neighbour exchange through shared memory is exact", "[cuda][emu]") {
  const int n = 1000, threads = 128;
  std::vector<float> x = random_floats(n, 3);
  DeviceBuffer<float> in(x), out(static_cast<size_t>(n));
  REQUIRE_CUDA(shift_in_block(in.ptr, out.ptr, n, threads, true, nullptr));
  std::vector<float> got = out.read();
  for (int i = 0; i < n; ++i) {
    INFO("element " << i);
    REQUIRE(got[static_cast<size_t>(i)] == (i % threads == 0 ? 0.0f : x[static_cast<size_t>(i - 1)]));
  }
}

TEST_CASE("dynamic shared memory holds the launch's bytes", "[cuda][emu]") {
  for (int n : {5, 256, 1000}) {
    const int threads = 256;
    std::vector<float> x = random_floats(static_cast<size_t>(n), 11);
    DeviceBuffer<float> in(x), out(static_cast<size_t>(n));
    REQUIRE_CUDA(reverse_chunks(in.ptr, out.ptr, n, threads, threads, false, nullptr));
    std::vector<float> got = out.read();
    for (int i = 0; i < n; ++i) {
      const int base = i / threads * threads, count = std::min(threads, n - base);
      INFO("n " << n << ", element " << i);
      REQUIRE(got[static_cast<size_t>(i)] == x[static_cast<size_t>(base + count - 1 - (i - base))]);
    }
  }
}

TEST_CASE("warp shuffles and votes follow CUDA's rules for every width", "[cuda][emu]") {
  std::vector<int> in(64);
  for (int i = 0; i < 64; ++i) in[static_cast<size_t>(i)] = (i * 37 + 11) % 97;
  in[45] = 40;  // one lane of the second warp votes true in __any_sync
  DeviceBuffer<int> din(in), dout(64 * 8);
  for (int width : {32, 16, 8, 4}) {
    REQUIRE_CUDA(warp_operations(din.ptr, dout.ptr, width, nullptr));
    std::vector<int> out = dout.read();
    for (int t = 0; t < 64; ++t) {
      const int warp = t / 32 * 32, lane = t % 32, segment = lane / width * width;
      auto value = [&](int l) { return in[static_cast<size_t>(warp + l)]; };
      const int* o = &out[static_cast<size_t>(t) * 8];
      INFO("width " << width << ", thread " << t);
      CHECK(o[0] == value(segment + 3 % width));
      CHECK(o[1] == value(segment + (lane + 5) % width));
      CHECK(o[2] == (lane - 2 >= segment ? value(lane - 2) : value(lane)));
      CHECK(o[3] == (lane + 3 < segment + width ? value(lane + 3) : value(lane)));
      CHECK(o[4] == ((lane ^ 9) < segment + width ? value(lane ^ 9) : value(lane)));
      unsigned ballot = 0;
      bool any = false;
      for (int l = 0; l < 32; ++l) {
        if (value(l) % 3 == 0) ballot |= 1u << l;
        any = any || value(l) == 40;
      }
      CHECK(static_cast<unsigned>(o[5]) == ballot);
      CHECK(o[6] == (any ? 1 : 0));
      CHECK(o[7] == 1);
    }
  }
}

TEST_CASE("atomics count every thread of blocks running at once", "[cuda][emu]") {
  DeviceBuffer<unsigned> counter(std::vector<unsigned>{0});
  DeviceBuffer<int> max(std::vector<int>{-1});
  const int blocks = 97, threads = 256;
  for (int round = 0; round < 3; ++round) REQUIRE_CUDA(count_threads(counter.ptr, max.ptr, blocks, threads, nullptr));
  CHECK(counter.read()[0] == 3u * blocks * threads);
  CHECK(max.read()[0] == blocks * threads - 1);
}

TEST_CASE("two streams ordered by an event; without the wait the second runs first", "[cuda][emu]") {
  const int n = 4096;
  DeviceBuffer<float> x(std::vector<float>(n, 0.0f)), y(std::vector<float>(n, -1.0f));
  std::vector<float> ones(n, 1.0f);
  DeviceBuffer<float> source(ones);
  int* flag = nullptr;
  REQUIRE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&flag), sizeof(int)));
  cudaStream_t producer, consumer;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  cudaEvent_t produced;
  REQUIRE_CUDA(cudaEventCreate(&produced));
  // Launched once before any stream is held: a kernel's first launch may wait for the device's
  // running work (CUDA's lazy loading, the default since CUDA 12.2), which the held producer never
  // finishes. A real H100 hung here without it.
  REQUIRE_CUDA(scale(x.ptr, y.ptr, 1.0f, n, consumer));
  REQUIRE_CUDA(cudaStreamSynchronize(consumer));
  for (bool wait : {false, true}) {
    REQUIRE_CUDA(cudaMemset(x.ptr, 0, n * sizeof(float)));
    *flag = 0;
    // The producer is held until the host lets it go, so the order is certain, not a race.
    REQUIRE_CUDA(wait_for_host_flag(flag, producer));
    REQUIRE_CUDA(cudaMemcpyAsync(x.ptr, source.ptr, n * sizeof(float), cudaMemcpyDeviceToDevice, producer));
    REQUIRE_CUDA(cudaEventRecord(produced, producer));
    if (wait) REQUIRE_CUDA(cudaStreamWaitEvent(consumer, produced, 0));
    REQUIRE_CUDA(scale(x.ptr, y.ptr, 2.0f, n, consumer));
    if (!wait) REQUIRE_CUDA(cudaStreamSynchronize(consumer));  // it ran, reading the zeros
    CHECK(cudaEventQuery(produced) == cudaErrorNotReady);
    __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
    REQUIRE_CUDA(cudaStreamSynchronize(producer));
    REQUIRE_CUDA(cudaStreamSynchronize(consumer));
    CHECK(cudaEventQuery(produced) == cudaSuccess);
    std::vector<float> got = y.read();
    const float expected = wait ? 2.0f : 0.0f;
    CHECK(std::count(got.begin(), got.end(), expected) == n);
  }
  float ms = -1;
  cudaEvent_t start;
  REQUIRE_CUDA(cudaEventCreate(&start));
  REQUIRE_CUDA(cudaEventRecord(start, producer));
  REQUIRE_CUDA(scale(x.ptr, y.ptr, 3.0f, n, producer));
  REQUIRE_CUDA(cudaEventRecord(produced, producer));
  REQUIRE_CUDA(cudaEventSynchronize(produced));
  REQUIRE_CUDA(cudaEventElapsedTime(&ms, start, produced));
  CHECK(ms >= 0.0f);
  REQUIRE_CUDA(cudaEventDestroy(start));
  REQUIRE_CUDA(cudaEventDestroy(produced));
  REQUIRE_CUDA(cudaStreamDestroy(producer));
  REQUIRE_CUDA(cudaStreamDestroy(consumer));
  REQUIRE_CUDA(cudaFreeHost(flag));
}

TEST_CASE("cudaFree waits for the device's work on every stream, as CUDA's does", "[cuda][emu]") {
  const int n = 1024;
  float* x = nullptr;
  REQUIRE_CUDA(cudaMalloc(reinterpret_cast<void**>(&x), n * sizeof(float)));
  DeviceBuffer<float> source(std::vector<float>(n, 1.0f));
  int* flag = nullptr;
  REQUIRE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&flag), sizeof(int)));
  *flag = 0;
  cudaStream_t side;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  REQUIRE_CUDA(scale(source.ptr, x, 1.0f, n, side));  // loaded before the side stream is held
  REQUIRE_CUDA(cudaStreamSynchronize(side));
  // The side stream writes x once the host lets it go, 200 ms after cudaFree is called.
  REQUIRE_CUDA(wait_for_host_flag(flag, side));
  REQUIRE_CUDA(scale(source.ptr, x, 2.0f, n, side));
  std::thread release([flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
  });
  REQUIRE_CUDA(cudaFree(x));
  CHECK(cudaStreamQuery(side) == cudaSuccess);  // not freed under the running kernel
  release.join();
  REQUIRE_CUDA(cudaStreamDestroy(side));
  REQUIRE_CUDA(cudaFreeHost(flag));
}

TEST_CASE("copies between the host and two devices, direct between peers", "[cuda][emu]") {
  int count = 0;
  REQUIRE_CUDA(cudaGetDeviceCount(&count));
  REQUIRE(count >= 2);
  const size_t n = 3001;
  std::vector<float> x = random_floats(n, 5);
  REQUIRE_CUDA(cudaSetDevice(0));
  DeviceBuffer<float> on0(x);
  REQUIRE_CUDA(cudaSetDevice(1));
  DeviceBuffer<float> on1(n);
  REQUIRE_CUDA(cudaMemcpyPeer(on1.ptr, 1, on0.ptr, 0, n * sizeof(float)));
  CHECK(on1.read() == x);
  DeviceBuffer<float> doubled(n);
  REQUIRE_CUDA(scale(on1.ptr, doubled.ptr, 2.0f, static_cast<int>(n), nullptr));
  std::vector<float> got = doubled.read();
  for (size_t i = 0; i < n; ++i) REQUIRE(got[i] == 2.0f * x[i]);
  REQUIRE_CUDA(cudaSetDevice(0));
}

TEST_CASE("bad launches and copies return CUDA's error codes", "[cuda][emu][errors]") {
  DeviceBuffer<float> x(16);
  REQUIRE(scale(x.ptr, x.ptr, 1.0f, 0, nullptr) == cudaErrorInvalidConfiguration);  // a grid of 0 blocks
  CHECK(cudaGetLastError() == cudaSuccess);                                         // reading it cleared it
  std::vector<float> host(16);
  CHECK(cudaMemcpy(x.ptr, host.data(), 16 * sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaGetLastError() == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice);
  cudaGetLastError();
}

// Shared-memory races on emulated devices: in checking mode (EMBER_EMU_CHECK=1) a race is a launch
// failure naming the kernel, the block, both threads and both source lines, whatever the thread
// order; outside it, every thread order gives a tree reduction without its barrier wrong results.
// Each case sets the mode it tests, so the file passes with EMBER_EMU_CHECK set either way. Under
// AddressSanitizer the kernels have no race-checking copy (tools/build/cuda.bzl), and checking
// mode does the other checks only.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "cuda/emu/check_mode.h"
#include "cuda/emu/emu.h"
#include "tests/cuda/device_buffer.h"
#include "tests/cuda/test_kernels.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr emu::ThreadOrder kOrders[] = {emu::ThreadOrder::Natural, emu::ThreadOrder::Reversed,
                                        emu::ThreadOrder::Shuffled, emu::ThreadOrder::Random};

const char* order_name(emu::ThreadOrder order) {
  switch (order) {
    case emu::ThreadOrder::Natural:
      return "natural";
    case emu::ThreadOrder::Reversed:
      return "reversed";
    case emu::ThreadOrder::Shuffled:
      return "shuffled";
    case emu::ThreadOrder::Random:
      return "random";
  }
  return "?";
}

// The failure of a launch that `launch` queues with buffers of its own (freed when it returns,
// before the reset, which frees every allocation of the device): the error the next
// synchronisation returns, and the emulator's description.
template <class Launch>
std::string failure_of(Launch&& launch) {
  launch();
  REQUIRE(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  cudaGetLastError();
  std::string message = emu::failure_message();
  REQUIRE_CUDA(cudaDeviceReset());  // clears the sticky error for the next case
  return message;
}

// The failure of one block of 64 threads running a racy SharedAccess pattern.
[[maybe_unused]] std::string shared_access_failure(SharedAccess pattern) {
  return failure_of([pattern] {
    DeviceBuffer<int> out(64);
    REQUIRE_CUDA(shared_access(pattern, out.ptr, 64, nullptr));
    REQUIRE(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  });
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string line(int number) { return "tests/cuda/test_kernels.cu:" + std::to_string(number); }

constexpr int kThreads = 256;

// Small integers: every partial sum is exact in float, whatever order the tree adds in.
struct TreeInput {
  std::vector<float> x;
  std::vector<float> sums;
  explicit TreeInput(int blocks) : x(size_t(blocks) * kThreads), sums(size_t(blocks), 0.0f) {
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i % 7 + 1);
      sums[i / kThreads] += x[i];
    }
  }
};

// Runs the tree reduction once; true if every block's sum is right.
bool tree_sums_right(const TreeInput& input, bool with_barrier) {
  const int blocks = static_cast<int>(input.sums.size());
  DeviceBuffer<float> x(input.x.size()), out(input.sums.size());
  x.write(input.x);
  REQUIRE_CUDA(tree_reduce(x.ptr, out.ptr, blocks, kThreads, with_barrier, nullptr));
  return out.read() == input.sums;
}

struct ModeGuard {  // restores the default modes after a case
  ~ModeGuard() {
    emu::set_checking(false);
    emu::set_thread_order(emu::ThreadOrder::Shuffled);
  }
};

// Runs `body(order)` in every thread order, checking mode on or off.
template <class Body>
void in_every_order(bool checking, Body&& body) {
  ModeGuard guard;
  emu::set_checking(checking);
  for (emu::ThreadOrder order : kOrders) {
    emu::set_thread_order(order);
    INFO(order_name(order) << " order");
    body(order);
  }
}

// Runs `body` on the tree reduction's input of 1 block and of 64, in every thread order.
template <class Body>
void in_every_order_and_grid(bool checking, Body&& body) {
  in_every_order(checking, [&](emu::ThreadOrder order) {
    for (int blocks : {1, 64}) {
      INFO(blocks << " blocks");
      body(order, TreeInput(blocks));
    }
  });
}

}  // namespace

#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("racecheck reports a tree reduction missing its barrier, 1 block and 64 blocks, in every thread order",
          "[emu][racecheck]") {
  in_every_order_and_grid(true, [](emu::ThreadOrder, const TreeInput& input) {
    const int blocks = static_cast<int>(input.sums.size());
    const std::string message = failure_of([&] {
      DeviceBuffer<float> x(input.x.size()), out(input.sums.size());
      x.write(input.x);
      REQUIRE_CUDA(tree_reduce(x.ptr, out.ptr, blocks, kThreads, false, nullptr));
      REQUIRE(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    });
    INFO(message);
    CHECK_THAT(message, Catch::Contains("kernel 'tree_reduce_kernel' on cuda:0, block (") &&
                            Catch::Contains(": shared-memory race: thread (") &&
                            Catch::Contains("a __shared__ variable that thread (") &&
                            Catch::Contains("with no __syncthreads between them") &&
                            Catch::Contains("(thread orders from EMBER_EMU_SEED="));
    // Both accesses are the step's: one thread's read of a partial sum another wrote.
    CHECK(count(message, line(tree_reduce_step_line())) == 2);
    // The correct twin is not reported, and sums right.
    CHECK(tree_sums_right(input, true));
  });
}

#else
TEST_CASE("under AddressSanitizer, checking mode does not look for races", "[emu][racecheck]") {
  ModeGuard guard;
  emu::set_checking(true);
  emu::set_thread_order(emu::ThreadOrder::Natural);
  TreeInput input(1);
  CHECK_FALSE(tree_sums_right(input, false));  // wrong, but not a launch failure
  REQUIRE_CUDA(cudaDeviceSynchronize());
}
#endif

TEST_CASE("outside checking mode, a tree reduction missing its barrier is wrong in every thread order",
          "[emu][racecheck]") {
  in_every_order_and_grid(false, [](emu::ThreadOrder order, const TreeInput& input) {
    // Orders are drawn per launch in the shuffled and random modes: one launch right by chance
    // is allowed, all eight is not (a 1-block shuffled launch is wrong in each direction).
    int wrong = 0;
    for (int launch = 0; launch < 8; ++launch) wrong += tree_sums_right(input, false) ? 0 : 1;
    CHECK(wrong > 0);
    if (order == emu::ThreadOrder::Natural || order == emu::ThreadOrder::Reversed) CHECK(wrong == 8);
    CHECK(tree_sums_right(input, true));
  });
}

TEST_CASE("each launch draws its thread order: one block's wrong results differ between launches", "[emu][racecheck]") {
  ModeGuard guard;
  emu::set_checking(false);
  emu::set_thread_order(emu::ThreadOrder::Shuffled);
  TreeInput input(1);
  DeviceBuffer<float> x(input.x.size()), out(1);
  x.write(input.x);
  std::set<float> results;
  // Forwards or backwards at random per launch: 16 launches all alike has probability 2^-15.
  for (int launch = 0; launch < 16; ++launch) {
    REQUIRE_CUDA(tree_reduce(x.ptr, out.ptr, 1, kThreads, false, nullptr));
    results.insert(out.read()[0]);
  }
  CHECK(results.size() > 1);
}

#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("racecheck reports a write/write and a read/write race on one shared word, naming both lines",
          "[emu][racecheck]") {
  in_every_order(true, [](emu::ThreadOrder) {
    std::string message = shared_access_failure(SharedAccess::WriteWrite);
    INFO(message);
    CHECK_THAT(message, Catch::Contains("kernel 'shared_access_kernel' on cuda:0, block (0, 0, 0): shared-memory race: "
                                        "thread (") &&
                            Catch::Contains(" wrote at ") && Catch::Contains(" that thread ("));
    CHECK(count(message, " wrote at " + line(shared_store_line())) == 2);

    message = shared_access_failure(SharedAccess::ReadWrite);
    INFO(message);
    CHECK_THAT(message, Catch::Contains("thread (0, 0, 0) wrote at " + line(shared_store_line())) &&
                            Catch::Contains(" read at " + line(shared_load_line())));

    // The twin with a barrier between the store and the loads.
    DeviceBuffer<int> out(64);
    REQUIRE_CUDA(shared_access(SharedAccess::ReadAfterBarrier, out.ptr, 64, nullptr));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    CHECK(out.read() == std::vector<int>(64, 7));
  });
}

TEST_CASE("racecheck: lanes ordered by __syncwarp and atomics on shared memory are not races; unordered lanes are",
          "[emu][racecheck]") {
  in_every_order(true, [](emu::ThreadOrder) {
    {
      DeviceBuffer<int> out(64);
      REQUIRE_CUDA(shared_access(SharedAccess::WarpSynchronous, out.ptr, 64, nullptr));
      REQUIRE_CUDA(cudaDeviceSynchronize());
      std::vector<int> expected(64);
      for (int t = 0; t < 64; ++t) expected[size_t(t)] = t / 32 + 1;
      CHECK(out.read() == expected);

      REQUIRE_CUDA(shared_access(SharedAccess::Atomic, out.ptr, 64, nullptr));
      REQUIRE_CUDA(cudaDeviceSynchronize());
      CHECK(out.read()[0] == 64);
    }
    const std::string message = shared_access_failure(SharedAccess::WarpUnsynchronised);
    INFO(message);
    CHECK_THAT(message, Catch::Contains("shared-memory race: thread (") && Catch::Contains(line(shared_store_line())) &&
                            Catch::Contains(line(shared_load_line())));
  });
}
#endif

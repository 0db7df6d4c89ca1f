// Running one block of a kernel launch on the calling OS thread: its threads as plain calls until
// one reaches a barrier or warp operation, as fibers from then on. Between barriers the threads run
// in a non-natural order (a missing __syncthreads gives wrong results), and a barrier or warp
// operation that not every thread it names reaches is an error naming the kernel and the block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/emu/lang.h"

namespace ember::emu {

// The order a block's threads run in between barriers. Natural: thread 0 first. Reversed: the
// warps last to first, each warp's lanes first to last (so a tree reduction without its barrier
// reads partial sums that a lane of its own warp has yet to add). Shuffled (the default, which
// tests run with) swaps neighbours in pairs and runs the block forwards or backwards, drawn per
// launch, block and barrier phase, keeping a warp's memory accesses close in time; Random is a
// full shuffle, drawn likewise, and slower.
enum class ThreadOrder { Natural, Reversed, Shuffled, Random };
// EMBER_EMU_THREAD_ORDER=natural|reversed|shuffled|random, or set_thread_order.
ThreadOrder thread_order();
void set_thread_order(ThreadOrder order);
// Each launch draws its orders from the process's seed and its own number in the process: random
// per process, or EMBER_EMU_SEED=<n>, which replays a run whose launches are queued in the same
// order. Failure reports name the seed.
uint64_t thread_order_seed();
uint64_t draw_launch_order_seed();

// A kernel's arguments at most (CUDA's limit): they travel by value to the device's runner.
constexpr size_t kKernelArgumentBytes = 4096;

struct KernelLaunch {
  const char* name = "";
  dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  int device = 0;
  // Runs the kernel for each thread that begin_next_thread() hands out, until it hands out none:
  //   while (begin_next_thread()) { kernel(args...); end_thread(); }
  // One loop per launch, with the kernel inlined into it, keeps a barrier-free thread to a few ns.
  void (*run_threads)(const void* args) = nullptr;
  // The same loop compiled for race detection (racecheck.h), which checking mode runs; null where
  // there is none (AddressSanitizer builds).
  void (*run_threads_checked)(const void* args) = nullptr;
  const void* args = nullptr;  // trivially copyable, `args_bytes` long
  size_t args_bytes = 0;
  // The settings in force when it was queued (the runner runs several launches at once).
  uint64_t order_seed = 0;  // draw_launch_order_seed(), per launch
  ThreadOrder order = ThreadOrder::Shuffled;
  bool checking = false;
};

// A block's thread as the plain-call loop sees it (the scheduler keeps more per thread).
enum ThreadState : uint8_t { kNotStarted, kRunning, kWaiting, kReleased, kExited };
struct ThreadSlot : ThreadContext {
  ThreadState state = kNotStarted;
  void* fiber = nullptr;  // its own fiber, once it has waited somewhere
};

// The plain-call loop over a block's threads, shared by every fiber that runs it: a thread that
// waits keeps the fiber it started on, and a new fiber picks the loop up at `next`.
struct PlainCallLoop {
  size_t next = 0;
  unsigned count = 0;
  const unsigned* order = nullptr;  // thread indices in the order they start
  char* slots = nullptr;            // ThreadSlot-derived records, `stride` bytes apart
  size_t stride = 0;
  dim3 block;
  ThreadSlot* running = nullptr;
};
extern thread_local PlainCallLoop plain_calls;

// The loop's steps (KernelLaunch::run_threads), inline: a barrier-free thread costs a few ns.
inline bool begin_next_thread() {
  PlainCallLoop& loop = plain_calls;
  if (loop.next >= loop.count) return false;
  const unsigned i = loop.order[loop.next++];
  auto* t = reinterpret_cast<ThreadSlot*>(loop.slots + size_t{i} * loop.stride);
  const dim3 b = loop.block;
  t->thread_idx = b.y == 1 && b.z == 1 ? uint3{i, 0, 0} : uint3{i % b.x, i / b.x % b.y, i / (b.x * b.y)};
  t->state = kRunning;
  loop.running = t;
  current_thread = t;
  return true;
}

inline void end_thread() {
  // Back on the fiber that started it: the thread ran to its end (it may have waited, and been
  // resumed, in between; `running` is it again then).
  ThreadSlot* t = plain_calls.running;
  t->state = kExited;
  t->fiber = nullptr;
}

// Runs block `block_linear` of `launch`; returns "" or what went wrong (a divergent barrier, a
// warp operation whose mask names a lane that did not take part, an overrun of the dynamic
// shared memory).
std::string run_block(const KernelLaunch& launch, uint64_t block_linear);

}  // namespace ember::emu

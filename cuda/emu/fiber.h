// Fibers for the threads of an emulated block: a stack each and a register-only switch
// (switch_x86_64.S, ~6 ns). Switches tell AddressSanitizer about each stack change, or it
// reports false stack errors and misses real ones. Not thread-safe: a pool belongs to one OS thread.
#pragma once

#include <cstddef>
#include <vector>

#if !defined(__x86_64__)
#include <boost/context/detail/fcontext.hpp>
#endif

namespace ember::emu {

// On x86-64 Ember's own switch (switch_x86_64.S), elsewhere Boost.Context's fcontext: the same
// shape, a context and a word handed across.
#if defined(__x86_64__)
using fcontext_t = void*;
struct transfer_t {
  fcontext_t fctx;
  void* data;
};
#else
using boost::context::detail::fcontext_t;
using boost::context::detail::transfer_t;
#endif

struct FiberStack {
  void* base = nullptr;  // lowest address: a guard page, then the usable stack
  size_t size = 0;       // including the guard page
  // Under AddressSanitizer, the fake stack (detect_stack_use_after_return) of the fibers that run
  // on this stack, one after another: kept with the stack for the next fiber, because making one
  // per fiber (an mmap, and its shadow cleared on release) cost more than the kernels themselves.
  // Copies of a FiberStack share the slot; null without ASan.
  void** fake_stack = nullptr;
  void* top() const { return static_cast<char*>(base) + size; }
  size_t usable() const;
};

// Stacks are kept for reuse: a block of 1024 threads that all reach a barrier needs 1024 at once.
class StackPool {
 public:
  ~StackPool();
  FiberStack take();
  void give_back(const FiberStack& stack) { free_.push_back(stack); }

 private:
  std::vector<FiberStack> free_;
};

// Starts `entry` on `stack`; its first switch in delivers the data in transfer_t::data.
fcontext_t make_fiber(const FiberStack& stack, void (*entry)(transfer_t));

// The scheduler runs on the OS thread's own stack. It enters a fiber, and fibers switch back to it
// or hand over to one another directly (one jump per thread at a barrier instead of two).
// The scheduler's side: runs fiber `to` (on `stack`) until some fiber switches back.
transfer_t enter_fiber(fcontext_t to, void* data, const FiberStack& stack);
// The fiber's side: its first action on a new fiber on `stack`, a switch back that it will return
// from (`fake_stack_slot`: its stack's FiberStack::fake_stack), and its last switch, which leaves
// the fiber's fake stack with `stack` for the next fiber there.
void arrived_on_fiber(const FiberStack& stack);
transfer_t leave_fiber(fcontext_t scheduler, void* data, void** fake_stack_slot);
// A fiber's direct switch to fiber `to` (on `to_stack`), which it will return from.
transfer_t hand_over(fcontext_t to, void* data, const FiberStack& to_stack, void** fake_stack_slot);
[[noreturn]] void leave_fiber_for_good(fcontext_t scheduler, void* data, const FiberStack& stack);

// While a fiber runs, AddressSanitizer knows only the fiber's stack, and the frames below it live in
// a detached fake stack (detect_stack_use_after_return): LeakSanitizer sees neither. A process that
// exits while a stream thread runs a kernel would report that launch's own bookkeeping as leaked.
// Allocations made under this guard (by its thread) are exempt from the exit-time leak check.
class FiberFramesHiddenFromLeakCheck {
 public:
  FiberFramesHiddenFromLeakCheck();
  ~FiberFramesHiddenFromLeakCheck();
  FiberFramesHiddenFromLeakCheck(const FiberFramesHiddenFromLeakCheck&) = delete;
  FiberFramesHiddenFromLeakCheck& operator=(const FiberFramesHiddenFromLeakCheck&) = delete;
};

}  // namespace ember::emu

// Fiber stacks (mmap'd, with a guard page below each so an overflow faults) and the switch.
#include "cuda/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#define EMBER_EMU_ASAN 1
#endif

#if defined(__x86_64__)
extern "C" ember::emu::transfer_t ember_emu_jump(void* to, void* data);
extern "C" void ember_emu_fiber_start();
#endif

namespace ember::emu {

namespace {

#if defined(__x86_64__)
transfer_t jump(fcontext_t to, void* data) { return ember_emu_jump(to, data); }
#else
transfer_t jump(fcontext_t to, void* data) { return boost::context::detail::jump_fcontext(to, data); }
#endif

#ifdef EMBER_EMU_ASAN
// AddressSanitizer frames are several times larger.
constexpr size_t kStackBytes = 512 << 10;
#else
constexpr size_t kStackBytes = 128 << 10;
#endif

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

size_t FiberStack::usable() const { return size - page_size(); }

FiberStack StackPool::take() {
  if (!free_.empty()) {
    FiberStack s = free_.back();
    free_.pop_back();
    return s;
  }
  FiberStack s;
  s.size = kStackBytes + page_size();
  s.base = ::mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  EMBER_CHECK(s.base != MAP_FAILED, "cuda emulator: cannot map a ", s.size,
              "-byte fiber stack: ", std::strerror(errno));
  ::mprotect(s.base, page_size(), PROT_NONE);  // guard page: a stack overflow faults
#ifdef EMBER_EMU_ASAN
  s.fake_stack = new void*(nullptr);
#endif
  return s;
}

fcontext_t make_fiber(const FiberStack& stack, void (*entry)(transfer_t)) {
#if defined(__x86_64__)
  // What ember_emu_jump pops: r12 (the entry), r13, r14, r15, rbx, rbp, then the return address
  // (ember_emu_fiber_start), after which the stack pointer is 16-byte aligned for its call.
  void** aligned = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(stack.top()) & ~uintptr_t{15}) - 2;
  void** context = aligned - 7;
  for (int i = 0; i < 6; ++i) context[i] = nullptr;
  context[0] = reinterpret_cast<void*>(entry);
  context[6] = reinterpret_cast<void*>(&ember_emu_fiber_start);
  return context;
#else
  return boost::context::detail::make_fcontext(stack.top(), stack.usable(), entry);
#endif
}

#ifdef EMBER_EMU_ASAN
namespace {
// The OS thread's own stack, learnt on arrival at a fiber (the only stack fibers return to).
thread_local const void* scheduler_stack_bottom = nullptr;
thread_local size_t scheduler_stack_size = 0;

// AddressSanitizer releases a fake stack only as the current one of a fiber that ends, so this
// thread adopts it for a moment (a "switch" to its own stack) and ends as such a fiber would.
void release_fake_stack(void* fake_stack) {
  if (fake_stack == nullptr) return;
  void* own = nullptr;
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_start_switch_fiber(&own, scheduler_stack_bottom, scheduler_stack_size);
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  __sanitizer_start_switch_fiber(nullptr, bottom, size);
  __sanitizer_finish_switch_fiber(own, nullptr, nullptr);
}
}  // namespace
#endif

StackPool::~StackPool() {
  for (const FiberStack& s : free_) {
    ::munmap(s.base, s.size);
#ifdef EMBER_EMU_ASAN
    release_fake_stack(*s.fake_stack);
    delete s.fake_stack;
#endif
  }
}

transfer_t enter_fiber(fcontext_t to, void* data, const FiberStack& stack) {
#ifdef EMBER_EMU_ASAN
  void* saved = nullptr;
  __sanitizer_start_switch_fiber(&saved, static_cast<char*>(stack.base) + page_size(), stack.usable());
  transfer_t back = jump(to, data);
  __sanitizer_finish_switch_fiber(saved, nullptr, nullptr);
  return back;
#else
  (void)stack;
  return jump(to, data);
#endif
}

void arrived_on_fiber(const FiberStack& stack) {
#ifdef EMBER_EMU_ASAN
  // The fake stack the stack's last fiber left (null at first: ASan makes one on first use).
  __sanitizer_finish_switch_fiber(*stack.fake_stack, &scheduler_stack_bottom, &scheduler_stack_size);
#else
  (void)stack;
#endif
}

transfer_t leave_fiber(fcontext_t scheduler, void* data, void** fake_stack_slot) {
#ifdef EMBER_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_slot, scheduler_stack_bottom, scheduler_stack_size);
  transfer_t back = jump(scheduler, data);
  // Resumed by the scheduler or by another fiber: either way the scheduler's stack, learnt on
  // arrival, stays what it was.
  __sanitizer_finish_switch_fiber(*fake_stack_slot, nullptr, nullptr);
  return back;
#else
  (void)fake_stack_slot;
  return jump(scheduler, data);
#endif
}

transfer_t hand_over(fcontext_t to, void* data, const FiberStack& to_stack, void** fake_stack_slot) {
#ifdef EMBER_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_slot, static_cast<char*>(to_stack.base) + page_size(), to_stack.usable());
  transfer_t back = jump(to, data);
  __sanitizer_finish_switch_fiber(*fake_stack_slot, nullptr, nullptr);
  return back;
#else
  (void)to_stack;
  (void)fake_stack_slot;
  return jump(to, data);
#endif
}

void leave_fiber_for_good(fcontext_t scheduler, void* data, const FiberStack& stack) {
#ifdef EMBER_EMU_ASAN
  __sanitizer_start_switch_fiber(stack.fake_stack, scheduler_stack_bottom, scheduler_stack_size);
#else
  (void)stack;
#endif
  jump(scheduler, data);
  __builtin_unreachable();
}

#ifdef EMBER_EMU_ASAN
FiberFramesHiddenFromLeakCheck::FiberFramesHiddenFromLeakCheck() { __lsan_disable(); }
FiberFramesHiddenFromLeakCheck::~FiberFramesHiddenFromLeakCheck() { __lsan_enable(); }
#else
FiberFramesHiddenFromLeakCheck::FiberFramesHiddenFromLeakCheck() = default;
FiberFramesHiddenFromLeakCheck::~FiberFramesHiddenFromLeakCheck() = default;
#endif

}  // namespace ember::emu

// Fiber stacks (mmap'd, with a guard page below each so an overflow faults) and the switch.
#include "cuda/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMBER_EMU_ASAN 1
#endif

namespace ember::emu {

namespace {

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

StackPool::~StackPool() {
  for (const FiberStack& s : free_) ::munmap(s.base, s.size);
}

FiberStack StackPool::take() {
  if (!free_.empty()) {
    FiberStack s = free_.back();
    free_.pop_back();
    return s;
  }
  FiberStack s;
  s.size = kStackBytes + page_size();
  s.base = ::mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  EMBER_CHECK(s.base != MAP_FAILED, "cuda emulator: cannot map a ", s.size, "-byte fiber stack: ", std::strerror(errno));
  ::mprotect(s.base, page_size(), PROT_NONE);  // guard page: a stack overflow faults
  return s;
}

fcontext_t make_fiber(const FiberStack& stack, void (*entry)(transfer_t)) {
  return boost::context::detail::make_fcontext(stack.top(), stack.usable(), entry);
}

#ifdef EMBER_EMU_ASAN
namespace {
// The OS thread's own stack, learnt on arrival at a fiber (the only stack fibers return to).
thread_local const void* scheduler_stack_bottom = nullptr;
thread_local size_t scheduler_stack_size = 0;
}  // namespace
#endif

transfer_t enter_fiber(fcontext_t to, void* data, const FiberStack& stack) {
#ifdef EMBER_EMU_ASAN
  void* saved = nullptr;
  __sanitizer_start_switch_fiber(&saved, static_cast<char*>(stack.base) + page_size(), stack.usable());
  transfer_t back = boost::context::detail::jump_fcontext(to, data);
  __sanitizer_finish_switch_fiber(saved, nullptr, nullptr);
  return back;
#else
  (void)stack;
  return boost::context::detail::jump_fcontext(to, data);
#endif
}

void arrived_on_fiber() {
#ifdef EMBER_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
}

transfer_t leave_fiber(fcontext_t scheduler, void* data, void** fake_stack_slot) {
#ifdef EMBER_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_slot, scheduler_stack_bottom, scheduler_stack_size);
  transfer_t back = boost::context::detail::jump_fcontext(scheduler, data);
  __sanitizer_finish_switch_fiber(*fake_stack_slot, &scheduler_stack_bottom, &scheduler_stack_size);
  return back;
#else
  (void)fake_stack_slot;
  return boost::context::detail::jump_fcontext(scheduler, data);
#endif
}

void leave_fiber_for_good(fcontext_t scheduler, void* data) {
#ifdef EMBER_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, scheduler_stack_bottom, scheduler_stack_size);
#endif
  boost::context::detail::jump_fcontext(scheduler, data);
  __builtin_unreachable();
}

}  // namespace ember::emu

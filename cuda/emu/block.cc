// The block scheduler. A "loop fiber" starts the block's threads one after another as plain calls;
// a thread that reaches a barrier or warp operation keeps that fiber (its frames live on it) and a
// new loop fiber starts the rest. So a kernel without barriers costs one fiber per block, and one
// with barriers costs one per thread. When every thread has exited or waits, pending warp
// operations complete first, then the block barrier, and the waiting threads resume in a new order:
// each one that waits again hands over straight to the next (one jump, not two via the scheduler).
#include "cuda/emu/block.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "cuda/emu/fiber.h"
#include "cuda/emu/racecheck.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace ember::emu {

thread_local ThreadContext* current_thread = nullptr;
thread_local PlainCallLoop plain_calls;
thread_local const BlockDims* current_block = nullptr;

namespace {

std::atomic<int> order_setting{-1};

ThreadOrder order_from_environment() {
  const char* env = std::getenv("EMBER_EMU_THREAD_ORDER");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "shuffled") == 0) return ThreadOrder::Shuffled;
  if (std::strcmp(env, "natural") == 0) return ThreadOrder::Natural;
  if (std::strcmp(env, "reversed") == 0) return ThreadOrder::Reversed;
  if (std::strcmp(env, "random") == 0) return ThreadOrder::Random;
  EMBER_FAIL("EMBER_EMU_THREAD_ORDER: expected natural, reversed, shuffled or random, got '", env, "'");
}

uint64_t seed_from_environment() {
  const char* env = std::getenv("EMBER_EMU_SEED");
  if (env == nullptr || *env == '\0') {
    std::random_device device;
    return uint64_t{device()} << 32 | device();
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(env, &end, 10);
  EMBER_CHECK(*end == '\0' && errno == 0 && env[0] != '-', "EMBER_EMU_SEED: expected a non-negative integer, got '",
              env, "'");
  return value;
}

const char* warp_op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Shfl:
      return "__shfl_sync";
    case WarpOp::ShflUp:
      return "__shfl_up_sync";
    case WarpOp::ShflDown:
      return "__shfl_down_sync";
    case WarpOp::ShflXor:
      return "__shfl_xor_sync";
    case WarpOp::Ballot:
      return "__ballot_sync";
    case WarpOp::Any:
      return "__any_sync";
    case WarpOp::All:
      return "__all_sync";
    case WarpOp::Sync:
      return "__syncwarp";
  }
  return "?";
}

enum Signal : uintptr_t { kFinished = 1, kBlocked = 2, kFailed = 3 };

struct EmuThread : ThreadSlot {
  FiberStack stack{};  // the stack of `fiber`
  // Where it waits: a barrier (warp_op false) or a warp operation.
  bool warp_op = false;
  WarpOp op = WarpOp::Sync;
  const char* site = "";
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t value = 0, result = 0;
};

constexpr unsigned char kCanary = 0xA5;
constexpr size_t kCanaryBytes = 64;

class BlockScheduler {
 public:
  ~BlockScheduler() { std::free(dynamic_); }
  std::string run(const KernelLaunch& launch, uint64_t block_linear);
  void wait_at_barrier(const char* site);
  uint64_t wait_in_warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* site);
  void* dynamic_shared() const { return dynamic_; }

 private:
  static void loop_entry(transfer_t from);
  void start_remaining();
  void suspend_current();
  EmuThread* next_released();  // in the release pass, the next thread to resume, or null
  void make_running(EmuThread& t);
  void resumed(transfer_t back);
  [[noreturn]] void fail_current(const std::string& what);
  void handle(transfer_t back);
  bool resolve();  // false once the block is done or failed
  bool resolve_warp_group(EmuThread& first);
  void new_order();
  std::string where() const;
  std::string describe(const EmuThread& t) const;
  std::string describe(const racecheck::Race& race) const;
  EmuThread& running() const { return *static_cast<EmuThread*>(plain_calls.running); }

  const KernelLaunch* launch_ = nullptr;
  BlockDims dims_;
  uint64_t block_linear_ = 0;
  std::vector<EmuThread> threads_;  // the first count_ are this block's (kept between blocks)
  unsigned count_ = 0;
  std::vector<unsigned> order_;
  unsigned waiting_ = 0;      // threads suspended and not yet released (none after a pass: done)
  unsigned in_warp_ops_ = 0;  // of those, the ones in a warp operation
  uint64_t phase_ = 0;
  bool releasing_ = false;          // in the pass that resumes released threads
  unsigned release_pos_ = 0;        // that pass's position in order_
  fcontext_t scheduler_ = nullptr;  // where the running fiber jumps back to
  FiberStack running_stack_{};
  StackPool stacks_;
  std::string failure_;
  bool race_checking_ = false;  // this block runs the launch's race-checking copy
  unsigned char* dynamic_ = nullptr;
  size_t dynamic_capacity_ = 0;
};

thread_local BlockScheduler scheduler;

uint64_t mix(uint64_t x) {  // splitmix64: a well-spread seed per block and phase
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

ThreadOrder thread_order() {
  int setting = order_setting.load();
  if (setting < 0) {
    setting = static_cast<int>(order_from_environment());
    order_setting.store(setting);
  }
  return static_cast<ThreadOrder>(setting);
}

void set_thread_order(ThreadOrder order) { order_setting.store(static_cast<int>(order)); }

uint64_t thread_order_seed() {
  static const uint64_t seed = seed_from_environment();
  return seed;
}

uint64_t draw_launch_order_seed() {
  static std::atomic<uint64_t> launches{0};
  return mix(thread_order_seed() ^ mix(launches.fetch_add(1)));
}

void BlockScheduler::new_order() {
  const unsigned n = count_;
  order_.resize(n);
  plain_calls.order = order_.data();
  const ThreadOrder mode = launch_->order;
  uint64_t state = mix(launch_->order_seed ^ mix(block_linear_ * 1315423911ull + phase_));
  const bool backward = mode == ThreadOrder::Shuffled && (state & 1);
  for (unsigned i = 0; i < n; ++i) order_[i] = backward ? n - 1 - i : i;
  if (mode == ThreadOrder::Reversed) {
    // Warps last to first, lanes in order: reversing lanes too would be a valid schedule for a
    // tree reduction with no barrier between its steps (each thread's partner would be done).
    unsigned k = 0;
    for (unsigned warp = (n + 31) / 32; warp-- > 0;)
      for (unsigned i = warp * 32; i < n && i < warp * 32 + 32; ++i) order_[k++] = i;
  } else if (mode == ThreadOrder::Shuffled) {
    // Neighbours swapped in pairs, the whole block forwards or backwards at random (per launch,
    // block and barrier phase): every thread has a neighbour on each side that runs after it in some block,
    // so reading a neighbour's store without a barrier gives wrong results. Threads that run close
    // in time still touch nearby memory, as a warp's coalesced accesses do on a GPU: a random
    // shuffle defeats the CPU's prefetchers (a barrier-free elementwise kernel ran 2x slower).
    for (unsigned i = 0; i + 1 < n; i += 2) std::swap(order_[i], order_[i + 1]);
  } else if (mode == ThreadOrder::Random) {
    for (unsigned i = n; i > 1; --i) {
      state = mix(state);
      std::swap(order_[i - 1], order_[state % i]);
    }
  }
}

std::string BlockScheduler::where() const {
  std::ostringstream out;
  out << "kernel '" << launch_->name << "' on cuda:" << launch_->device << ", block (" << dims_.block_idx.x << ", "
      << dims_.block_idx.y << ", " << dims_.block_idx.z << ")";
  return out.str();
}

std::string BlockScheduler::describe(const EmuThread& t) const {
  std::ostringstream out;
  out << "thread (" << t.thread_idx.x << ", " << t.thread_idx.y << ", " << t.thread_idx.z << ")";
  return out.str();
}

std::string BlockScheduler::describe(const racecheck::Race& race) const {
  auto access = [](bool wrote) { return wrote ? "wrote" : "read"; };
  std::ostringstream out;
  out << where() << ": shared-memory race: " << describe(threads_[race.later_thread]) << " " << access(race.later_wrote)
      << " at " << racecheck::source_line(race.later_site) << " ";
  if (race.dynamic_shared)
    out << "byte " << race.dynamic_offset << " of the dynamic shared memory";
  else
    out << "a __shared__ variable";
  out << " that " << describe(threads_[race.earlier_thread]) << " " << access(race.earlier_wrote) << " at "
      << racecheck::source_line(race.earlier_site)
      << ", with no __syncthreads between them (nor, in one warp, a warp operation of both)";
  return out.str();
}

std::string BlockScheduler::run(const KernelLaunch& launch, uint64_t block_linear) {
  launch_ = &launch;
  block_linear_ = block_linear;
  const dim3 g = launch.grid, b = launch.block;
  dims_.grid_dim = g;
  dims_.block_dim = b;
  dims_.block_idx = {static_cast<unsigned>(block_linear % g.x), static_cast<unsigned>(block_linear / g.x % g.y),
                     static_cast<unsigned>(block_linear / (uint64_t{g.x} * g.y))};
  const unsigned n = b.x * b.y * b.z;
  count_ = n;
  if (threads_.size() < n) threads_.resize(n);
  PlainCallLoop& loop = plain_calls;
  loop.count = n;
  loop.next = 0;
  loop.slots = reinterpret_cast<char*>(threads_.data());
  loop.stride = sizeof(EmuThread);
  loop.block = b;
  // Only the state: a thread's index is set when it starts, the rest when it waits, and fibers are
  // cleared as threads end (a full reset cost more than a barrier-free thread's whole run).
  for (unsigned i = 0; i < n; ++i) threads_[i].state = kNotStarted;
  waiting_ = 0;
  in_warp_ops_ = 0;
  // Exactly the launch's bytes (AddressSanitizer sees an overrun), then a canary checked at the end.
  const size_t need = launch.dynamic_shared_bytes + kCanaryBytes;
  if (need > dynamic_capacity_) {
    std::free(dynamic_);
    dynamic_ = static_cast<unsigned char*>(std::malloc(need));
    dynamic_capacity_ = need;
  }
  std::memset(dynamic_ + launch.dynamic_shared_bytes, kCanary, kCanaryBytes);
#if defined(__SANITIZE_ADDRESS__)
  ASAN_POISON_MEMORY_REGION(dynamic_ + launch.dynamic_shared_bytes, dynamic_capacity_ - launch.dynamic_shared_bytes);
#endif
  failure_.clear();
  phase_ = 0;
  new_order();
  current_block = &dims_;
  // The launch's race-checking copy (none under AddressSanitizer, whose instrumentation cannot be
  // combined with ThreadSanitizer's) records this block's shared-memory accesses.
  race_checking_ = launch.run_threads_checked != nullptr && launch.checking;
  if (race_checking_) racecheck::begin_block(n, dynamic_, launch.dynamic_shared_bytes);

  while (true) {
    while (loop.next < n && failure_.empty()) {
      FiberStack stack = stacks_.take();
      running_stack_ = stack;
      loop.running = nullptr;
      handle(enter_fiber(make_fiber(stack, &loop_entry), this, stack));
    }
    releasing_ = true;
    release_pos_ = 0;
    while (EmuThread* t = next_released()) {
      make_running(*t);
      handle(enter_fiber(t->fiber, this, t->stack));
    }
    releasing_ = false;
    if (!failure_.empty() || !resolve()) break;
  }

  const racecheck::Race race = racecheck::end_block();
  if (race.found && failure_.empty()) failure_ = describe(race);

  // After a failure, threads still waiting leave their fibers behind.
  for (unsigned i = 0; i < count_; ++i) {
    EmuThread& t = threads_[i];
    if (t.fiber == nullptr) continue;
#if defined(__SANITIZE_ADDRESS__)
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(t.stack.top()) - t.stack.usable(), t.stack.usable());
#endif
    stacks_.give_back(t.stack);
    t.fiber = nullptr;
  }
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(dynamic_ + launch.dynamic_shared_bytes, dynamic_capacity_ - launch.dynamic_shared_bytes);
#endif
  for (size_t i = 0; i < kCanaryBytes && failure_.empty(); ++i) {
    if (dynamic_[launch.dynamic_shared_bytes + i] != kCanary)
      failure_ = where() + " wrote past its " + std::to_string(launch.dynamic_shared_bytes) +
                 " bytes of dynamic shared memory (the launch's shared-memory size)";
  }
  current_block = nullptr;
  current_thread = nullptr;
  return failure_;
}

void BlockScheduler::loop_entry(transfer_t from) {
  // No local here may have its address taken: its frame would be AddressSanitizer's fake frame
  // on the fake stack that the next fiber on this stack inherits, never returned.
  auto* self = static_cast<BlockScheduler*>(from.data);
  arrived_on_fiber(self->running_stack_);
  self->scheduler_ = from.fctx;
  self->start_remaining();
  // running_stack_ is the running fiber's, which is this one.
  leave_fiber_for_good(self->scheduler_, reinterpret_cast<void*>(kFinished), self->running_stack_);
}

void BlockScheduler::start_remaining() {
  (race_checking_ ? launch_->run_threads_checked : launch_->run_threads)(launch_->args);
}

void BlockScheduler::handle(transfer_t back) {
  // The fiber that came back may not be the one entered: released threads hand over directly.
  const FiberStack stack = running_stack_;
  switch (reinterpret_cast<uintptr_t>(back.data)) {
    case kFinished:
      stacks_.give_back(stack);
      break;
    case kBlocked:
      running().fiber = back.fctx;
      running().stack = stack;
      break;
    case kFailed:
      // The failing fiber is abandoned with its frames: its stack's shadow must be cleared.
#if defined(__SANITIZE_ADDRESS__)
      ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(stack.top()) - stack.usable(), stack.usable());
#endif
      stacks_.give_back(stack);
      if (plain_calls.running) plain_calls.running->fiber = nullptr;
      break;
  }
}

EmuThread* BlockScheduler::next_released() {
  while (release_pos_ < order_.size() && failure_.empty()) {
    EmuThread& t = threads_[order_[release_pos_++]];
    if (t.state == kReleased) return &t;
  }
  return nullptr;
}

void BlockScheduler::make_running(EmuThread& t) {
  t.state = kRunning;
  plain_calls.running = &t;
  running_stack_ = t.stack;
  current_thread = &t;
}

void BlockScheduler::resumed(transfer_t back) {
  // From the scheduler (which passes itself) or from a thread that handed over (which passes
  // itself): the context to keep is the scheduler's, or that thread's fiber.
  if (back.data == this)
    scheduler_ = back.fctx;
  else
    static_cast<EmuThread*>(back.data)->fiber = back.fctx;
}

void BlockScheduler::suspend_current() {
  EmuThread& t = running();
  t.state = kWaiting;
  ++waiting_;
  void** fake_stack = running_stack_.fake_stack;  // this fiber's stack's, kept there while it waits
  EmuThread* next = releasing_ ? next_released() : nullptr;
  if (next == nullptr) {
    resumed(leave_fiber(scheduler_, reinterpret_cast<void*>(kBlocked), fake_stack));
    return;
  }
  make_running(*next);
  resumed(hand_over(next->fiber, &t, next->stack, fake_stack));
}

void BlockScheduler::fail_current(const std::string& what) {
  if (failure_.empty()) failure_ = what;
  leave_fiber(scheduler_, reinterpret_cast<void*>(kFailed), running_stack_.fake_stack);
  __builtin_unreachable();  // never resumed
}

void BlockScheduler::wait_at_barrier(const char* site) {
  EmuThread& t = running();
  t.warp_op = false;
  t.site = site;
  suspend_current();
}

uint64_t BlockScheduler::wait_in_warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                                         const char* site) {
  EmuThread& t = running();
  const unsigned lane = static_cast<unsigned>(&t - threads_.data()) % 32;
  if (!(mask >> lane & 1u)) {
    std::ostringstream out;
    out << where() << ": " << describe(t) << " (lane " << lane << ") called " << warp_op_name(op) << " at " << site
        << " with mask 0x" << std::hex << mask << ", which leaves the calling lane out";
    fail_current(out.str());
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    fail_current(where() + ": " + warp_op_name(op) + " at " + site + ": width must be a power of two up to 32, got " +
                 std::to_string(width));
  t.warp_op = true;
  ++in_warp_ops_;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  t.width = width;
  t.site = site;
  suspend_current();
  return t.result;
}

bool BlockScheduler::resolve_warp_group(EmuThread& first) {
  const unsigned base = static_cast<unsigned>(&first - threads_.data()) / 32 * 32;
  const unsigned lanes = std::min(32u, count_ - base);  // a block's last warp may be partial
  auto lane_thread = [&](unsigned lane) -> EmuThread& { return threads_[base + lane]; };
  // Every existing lane the mask names must wait in the same operation, at the same place.
  for (unsigned lane = 0; lane < lanes; ++lane) {
    if (!(first.mask >> lane & 1u)) continue;
    EmuThread& t = lane_thread(lane);
    const bool same = t.state == kWaiting && t.warp_op && t.op == first.op && t.mask == first.mask &&
                      std::strcmp(t.site, first.site) == 0;
    if (same) continue;
    std::ostringstream out;
    out << where() << ": " << warp_op_name(first.op) << " at " << first.site << " with mask 0x" << std::hex
        << first.mask << std::dec << " names lane " << lane << " (" << describe(t) << "), which ";
    if (t.state == kExited)
      out << "exited without reaching it";
    else if (!t.warp_op)
      out << "waits at __syncthreads at " << t.site;
    else if (t.op != first.op || std::strcmp(t.site, first.site) != 0)
      out << "waits in " << warp_op_name(t.op) << " at " << t.site;
    else
      out << "passed the mask 0x" << std::hex << t.mask;
    failure_ = out.str();
    return false;
  }
  uint64_t ballot = 0;
  for (unsigned lane = 0; lane < lanes; ++lane)
    if ((first.mask >> lane & 1u) && lane_thread(lane).value != 0) ballot |= uint64_t{1} << lane;
  const uint64_t members = lanes == 32 ? first.mask : first.mask & ((1u << lanes) - 1u);
  for (unsigned lane = 0; lane < lanes; ++lane) {
    if (!(first.mask >> lane & 1u)) continue;
    EmuThread& t = lane_thread(lane);
    const int w = t.width;
    const int segment = static_cast<int>(lane) & ~(w - 1);
    int source = static_cast<int>(lane);
    switch (t.op) {
      case WarpOp::Shfl:
        source = segment + (t.arg & (w - 1));
        break;
      case WarpOp::ShflUp:
        source = static_cast<int>(lane) - t.arg >= segment ? static_cast<int>(lane) - t.arg : source;
        break;
      case WarpOp::ShflDown:
        source = static_cast<int>(lane) + t.arg < segment + w ? static_cast<int>(lane) + t.arg : source;
        break;
      case WarpOp::ShflXor: {
        const int other = static_cast<int>(lane) ^ t.arg;
        if (other < segment + w) source = other;  // a later segment gives the caller's own value
        break;
      }
      default:
        break;
    }
    switch (t.op) {
      case WarpOp::Ballot:
        t.result = ballot;
        break;
      case WarpOp::Any:
        t.result = ballot != 0;
        break;
      case WarpOp::All:
        t.result = ballot == members;
        break;
      case WarpOp::Sync:
        t.result = 0;
        break;
      default:
        if (source < 0 || source >= static_cast<int>(lanes)) {
          t.result = t.value;  // no such lane in a partial warp
        } else if (!(first.mask >> source & 1u)) {
          std::ostringstream out;
          out << where() << ": " << warp_op_name(t.op) << " at " << t.site << ": lane " << lane << " reads lane "
              << source << ", which the mask 0x" << std::hex << first.mask << " leaves out (its value is undefined)";
          failure_ = out.str();
          return false;
        } else {
          t.result = lane_thread(static_cast<unsigned>(source)).value;
        }
    }
  }
  for (unsigned lane = 0; lane < lanes; ++lane) {
    if (!(first.mask >> lane & 1u)) continue;
    lane_thread(lane).state = kReleased;
    --waiting_;
    --in_warp_ops_;
  }
  racecheck::warp_synchronised(base, first.mask);
  return true;
}

bool BlockScheduler::resolve() {
  if (waiting_ == 0) return false;  // every thread ran to its end
  if (in_warp_ops_ > 0) {
    for (unsigned i = 0; i < count_ && in_warp_ops_ > 0; ++i) {
      EmuThread& t = threads_[i];
      if (t.state != kWaiting || !t.warp_op) continue;
      if (!resolve_warp_group(t)) return false;
    }
    return true;
  }
  size_t waiting = 0, exited = 0;
  const EmuThread* first = nullptr;
  for (unsigned i = 0; i < count_; ++i) {
    const EmuThread& t = threads_[i];
    if (t.state == kExited) ++exited;
    if (t.state != kWaiting) continue;
    ++waiting;
    if (!first) first = &t;
    if (t.site != first->site && std::strcmp(t.site, first->site) != 0) {
      failure_ = where() + ": divergent barrier: " + describe(*first) + " waits at __syncthreads at " + first->site +
                 " while " + describe(t) + " waits at __syncthreads at " + t.site;
      return false;
    }
  }
  if (waiting == 0) return false;  // every thread ran to its end
  if (exited > 0) {
    failure_ = where() + ": divergent barrier: " + std::to_string(waiting) + " of " + std::to_string(count_) +
               " threads wait at __syncthreads at " + first->site + " but " + std::to_string(exited) +
               " exited without reaching it (every thread of a block must reach each __syncthreads)";
    return false;
  }
  for (unsigned i = 0; i < count_; ++i) threads_[i].state = kReleased;
  waiting_ = 0;
  ++phase_;
  racecheck::barrier_passed();
  new_order();
  return true;
}

std::string run_block(const KernelLaunch& launch, uint64_t block_linear) { return scheduler.run(launch, block_linear); }

void syncthreads(const char* site) { scheduler.wait_at_barrier(site); }

uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* site) {
  return scheduler.wait_in_warp_op(op, mask, value, arg, width, site);
}

void* dynamic_shared_memory() { return scheduler.dynamic_shared(); }

}  // namespace ember::emu

// The runners and their link to the host process: a SOCK_SEQPACKET socket per runner carries
// launches, ASan poisoning and peer-access changes in order; launch slots in memory both processes
// map carry the arguments there and the result back (a futex wakes the waiting stream worker).
#include "cuda/emu/runner.h"

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "cuda/emu/device.h"
#include "cuda/emu/fiber.h"
#include "cuda/emu/grid.h"
#include "cuda/emu/guards.h"
#include "cuda/emu/memory.h"

namespace ember::emu {

namespace {

constexpr int kSlots = 64;  // launches in flight per device: at most one per stream
constexpr size_t kFailureBytes = 8192;

enum SlotState : uint32_t { kFree, kQueued, kDone, kLost };

struct Slot {
  std::atomic<uint32_t> state{kFree};
  KernelLaunch launch;  // `args` is set where it runs: this slot's copy
  uint32_t failure_bytes = 0;
  char failure[kFailureBytes];
  alignas(64) unsigned char args[kKernelArgumentBytes];
};

// What AddressSanitizer reported in a runner, for the host to name the allocation it reached.
struct SanitizerAccess {
  const void* address = nullptr;
  size_t bytes = 0;
  bool write = false;
  int device = -1;
  char kernel[256] = {};
};

// One anonymous shared mapping per runner, made before the fork.
struct SharedPart {
  FaultReport fault;
  SanitizerAccess sanitizer;
  Slot slots[kSlots];
};

enum class MessageKind : uint32_t { Launch, Poison, Unpoison, PeerOn, PeerOff };
struct Message {
  MessageKind kind;
  int value;  // the slot, or the peer
  const void* address;
  size_t bytes;
};

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// ---- the runner's side ----

// Each launch on a thread of its own (kept for the next one): launches from different streams run
// at once, as on a GPU (a kernel may spin until another stream's work has run).
class LaunchThreads {
 public:
  explicit LaunchThreads(SharedPart* shared) : shared_(shared) {}

  void add(int slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(slot);
    if (idle_ > 0) {
      --idle_;
      cv_.notify_one();
    } else {
      std::thread([this] { work(); }).detach();
    }
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
      const int slot = queue_.front();
      queue_.pop_front();
      lock.unlock();
      run(shared_->slots[slot]);
      lock.lock();
      ++idle_;
    }
  }

  static void run(Slot& slot) {
    KernelLaunch launch = slot.launch;
    launch.args = slot.args;
    std::string failure;
    {
      FiberFramesHiddenFromLeakCheck hidden;
      failure = run_grid(launch);
    }
    slot.failure_bytes = static_cast<uint32_t>(std::min(failure.size(), kFailureBytes));
    std::memcpy(slot.failure, failure.data(), slot.failure_bytes);
    slot.state.store(kDone, std::memory_order_release);
    futex_wake(&slot.state);
  }

  SharedPart* shared_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<int> queue_;
  int idle_ = 0;  // threads free for a new launch, not yet claimed by add()
};

#if defined(__SANITIZE_ADDRESS__)
SharedPart* runner_shared = nullptr;

void note_sanitizer_report(const char*) {
  SanitizerAccess& a = runner_shared->sanitizer;
  const RunningKernel& k = running_kernel;
  a.bytes = __asan_get_report_access_size();
  a.write = __asan_get_report_access_type() != 0;
  a.device = k.device;
  std::snprintf(a.kernel, sizeof(a.kernel), "%s", k.name ? k.name : "?");
  a.address = __asan_get_report_address();
}
#endif

[[noreturn]] void runner_main(int device, int socket, SharedPart* shared, const std::vector<DeviceHeap*>& heaps) {
  // Only this thread exists here. The host's signals are not ours: Ctrl-C or a SIGTERM to the
  // process group reaches the host, whose end (end of file on the socket) ends this process.
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2}) ::signal(s, SIG_IGN);
  const std::string name = "ember-cuda:" + std::to_string(device);
  ::prctl(PR_SET_NAME, name.c_str());
  // Other descriptors (pipes, sockets, other runners' ends) would keep their readers waiting.
  if (socket > 3) ::close_range(3, static_cast<unsigned>(socket) - 1, 0);
  ::close_range(static_cast<unsigned>(socket) + 1, ~0u, 0);
  heaps[static_cast<size_t>(device)]->set_accessible(true);
  report_faults_to(&shared->fault);
#if defined(__SANITIZE_ADDRESS__)
  runner_shared = shared;
  __asan_set_error_report_callback(&note_sanitizer_report);
#endif
  auto* threads = new LaunchThreads(shared);  // lives until _exit
  Message m;
  while (true) {
    const ssize_t got = ::recv(socket, &m, sizeof(m), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof(m))) ::_exit(0);  // the host process has ended
    switch (m.kind) {
      case MessageKind::Launch:
        threads->add(m.value);
        break;
      case MessageKind::Poison:
        apply_poisoning(m.address, m.bytes, true);
        break;
      case MessageKind::Unpoison:
        apply_poisoning(m.address, m.bytes, false);
        break;
      case MessageKind::PeerOn:
        heaps[static_cast<size_t>(m.value)]->set_accessible(true);
        break;
      case MessageKind::PeerOff:
        heaps[static_cast<size_t>(m.value)]->set_accessible(false);
        break;
    }
  }
}

// ---- the host's side ----

struct Runner {
  int device = 0;
  pid_t pid = -1;
  int socket = -1;
  SharedPart* shared = nullptr;
  std::mutex mutex;
  std::condition_variable slot_freed;
  std::vector<int> free_slots;
  std::atomic<bool> dead{false};
  std::string death;  // why, once dead (guarded by mutex)

  void send(const Message& m) {
    // A failed send means the runner has ended: its watcher reports that.
    while (::send(socket, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }
};

// Filled once, before any other thread uses it; never destroyed: stream workers may launch
// during static destruction.
std::vector<Runner*>& runners() {
  static auto* all = new std::vector<Runner*>();
  return *all;
}
std::atomic<bool> forked_away{false};

std::string describe_end(const Runner& r, int status, bool reaped) {
  std::string what =
      "cuda emulator: the kernel runner of cuda:" + std::to_string(r.device) + " (pid " + std::to_string(r.pid) + ") ";
  if (!reaped)
    what += "ended";
  else if (WIFSIGNALED(status))
    what += std::string("was killed by signal ") + ::strsignal(WTERMSIG(status));
  else
    what += "exited with status " + std::to_string(WEXITSTATUS(status)) + " (a sanitizer's report above says why)";
  return what + "; cuda:" + std::to_string(r.device) + " runs nothing more";
}

// Waits for the runner's end, then fails its device and every launch waiting on it.
void watch(Runner* r) {
  pollfd p{r->socket, POLLRDHUP, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  int status = 0;
  const bool reaped = ::waitpid(r->pid, &status, 0) == r->pid;
  const char* fault = r->shared->fault.text;
  const bool faulted = fault[0] != '\0';
  std::string why =
      faulted ? std::string(fault, ::strnlen(fault, sizeof(FaultReport::text))) : describe_end(*r, status, reaped);
  const SanitizerAccess& a = r->shared->sanitizer;
  if (a.address != nullptr && a.device >= 0) {
    // AddressSanitizer's report (above) names an address; a guard names what was made there.
    const std::string guard = describe_guard_access(a.address, a.bytes,
                                                    "cuda emulator: kernel '" + std::string(a.kernel) + "' on cuda:" +
                                                        std::to_string(a.device) + (a.write ? " wrote" : " read"));
    if (!guard.empty()) {
      std::fprintf(stderr, "%s\n", guard.c_str());
      why = guard + why;
    }
  }
  record_failure(r->device, why, faulted ? cudaErrorIllegalAddress : cudaErrorLaunchFailure);
  {
    std::lock_guard<std::mutex> lock(r->mutex);
    r->death = why;
    r->dead.store(true);
  }
  r->slot_freed.notify_all();
  for (Slot& slot : r->shared->slots) {
    uint32_t queued = kQueued;
    if (slot.state.compare_exchange_strong(queued, kLost)) futex_wake(&slot.state);
  }
}

void send_poisoning(const void* ptr, size_t bytes, bool poisoned) {
  if (forked_away.load()) return;
  for (Runner* r : runners())
    if (!r->dead.load()) r->send({poisoned ? MessageKind::Poison : MessageKind::Unpoison, 0, ptr, bytes});
}

// A forked child shares the runners' sockets and memory with its parent: it must not use them.
void forget_runners_in_child() {
  forked_away.store(true);
  for (Runner* r : runners()) ::close(r->socket);
}

}  // namespace

void start_runners(const std::vector<DeviceHeap*>& heaps) {
  // The runners name the seed of their thread orders in failure reports: the host's, drawn here.
  (void)thread_order_seed();
  for (size_t d = 0; d < heaps.size(); ++d) {
    int ends[2];
    EMBER_CHECK(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0,
                "cuda emulator: cannot make the socket of cuda:", d, "'s kernel runner: ", std::strerror(errno));
    void* shared = ::mmap(nullptr, sizeof(SharedPart), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EMBER_CHECK(shared != MAP_FAILED, "cuda emulator: cannot map cuda:", d, "'s launch slots: ", std::strerror(errno));
    auto* part = new (shared) SharedPart();
    const pid_t pid = ::fork();
    EMBER_CHECK(pid >= 0, "cuda emulator: cannot start the kernel runner of cuda:", d, ": ", std::strerror(errno));
    if (pid == 0) runner_main(static_cast<int>(d), ends[1], part, heaps);
    ::close(ends[1]);
    auto* r = new Runner();
    r->device = static_cast<int>(d);
    r->pid = pid;
    r->socket = ends[0];
    r->shared = part;
    for (int i = kSlots - 1; i >= 0; --i) r->free_slots.push_back(i);
    runners().push_back(r);
  }
  ::pthread_atfork(nullptr, nullptr, &forget_runners_in_child);
  poison_hook = &send_poisoning;
  for (Runner* r : runners()) std::thread(watch, r).detach();
}

std::string run_on_runner(const KernelLaunch& launch) {
  Runner& r = *runners().at(static_cast<size_t>(launch.device));
  int index;
  {
    std::unique_lock<std::mutex> lock(r.mutex);
    r.slot_freed.wait(lock, [&] { return !r.free_slots.empty() || r.dead.load(); });
    if (r.dead.load()) return r.death;
    index = r.free_slots.back();
    r.free_slots.pop_back();
  }
  Slot& slot = r.shared->slots[index];
  slot.launch = launch;
  slot.launch.args = nullptr;
  std::memcpy(slot.args, launch.args, launch.args_bytes);
  slot.state.store(kQueued);
  // The watcher marks queued slots lost once it has seen the runner end; a slot queued after
  // that is marked here (both sides are sequentially consistent, so one of them sees the other).
  if (r.dead.load()) {
    uint32_t queued = kQueued;
    slot.state.compare_exchange_strong(queued, kLost);
  } else {
    r.send({MessageKind::Launch, index, nullptr, 0});
  }
  uint32_t state;
  while ((state = slot.state.load(std::memory_order_acquire)) == kQueued) futex_wait(&slot.state, kQueued);
  std::string failure;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (state == kDone)
    failure.assign(slot.failure, slot.failure_bytes);
  else
    failure = r.death;
  slot.state.store(kFree);
  r.free_slots.push_back(index);
  r.slot_freed.notify_one();
  return failure;
}

void set_runner_peer_access(int device, int peer, bool enabled) {
  Runner& r = *runners().at(static_cast<size_t>(device));
  if (!forked_away.load() && !r.dead.load())
    r.send({enabled ? MessageKind::PeerOn : MessageKind::PeerOff, peer, nullptr, 0});
}

bool forked_from_device_owner() { return forked_away.load(std::memory_order_relaxed); }

int runner_pid(int device) {
  return device >= 0 && device < static_cast<int>(runners().size()) ? runners()[static_cast<size_t>(device)]->pid : -1;
}

}  // namespace ember::emu

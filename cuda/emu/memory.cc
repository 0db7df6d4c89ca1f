// Device heaps (best-fit over a free list, 256-byte aligned) on memfds with a host alias, and the
// fault handler that turns a stray access into a message instead of a bare segmentation fault.
#include "cuda/emu/memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "cuda/emu/poison.h"

namespace ember::emu {

thread_local RunningKernel running_kernel;
void (*poison_hook)(const void* ptr, size_t bytes, bool poisoned) = nullptr;

void apply_poisoning(const void* ptr, size_t bytes, bool poisoned) {
  if (poisoned)
    EMBER_EMU_POISON(ptr, bytes);
  else
    EMBER_EMU_UNPOISON(ptr, bytes);
}

void poison(const void* ptr, size_t bytes, bool poisoned) {
  if (!kPoisons) return;
  apply_poisoning(ptr, bytes, poisoned);
  if (poison_hook != nullptr) poison_hook(ptr, bytes, poisoned);
}

namespace {

constexpr size_t kRedzone = 256;  // after every allocation: an overrun lands in it, not a neighbour

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string heap_name(int device) { return device < 0 ? "pinned host memory" : "cuda:" + std::to_string(device); }

}  // namespace

DeviceHeap::DeviceHeap(int device, size_t capacity, size_t alignment)
    : device_(device), capacity_(capacity), alignment_(alignment) {
  // Room for the capacity plus a redzone per allocation of the smallest kind.
  constexpr size_t kHuge = size_t{2} << 20;
  reserved_ = round_up(capacity * 2 + (64 << 20), kHuge);
  const std::string name = "ember-emu " + heap_name(device);
  // A memfd, so that the runners (forked later) share it at the same addresses.
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  EMBER_CHECK(fd >= 0 && ::ftruncate(fd, static_cast<off_t>(reserved_)) == 0, "cuda emulator: cannot create ",
              reserved_, " bytes of memory for ", heap_name(device), ": ", std::strerror(errno));
  void* p = ::mmap(nullptr, reserved_ + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  EMBER_CHECK(p != MAP_FAILED, "cuda emulator: cannot reserve ", reserved_, " bytes for ", heap_name(device), ": ",
              std::strerror(errno));
  // 2 MB aligned, so that huge pages can back it where the kernel allows.
  char* aligned = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(p), kHuge));
  if (aligned != p) ::munmap(p, static_cast<size_t>(aligned - static_cast<char*>(p)));
  ::munmap(aligned + reserved_, kHuge - static_cast<size_t>(aligned - static_cast<char*>(p)));
  const int device_protection = device < 0 ? PROT_READ | PROT_WRITE : PROT_NONE;
  base_ =
      static_cast<char*>(::mmap(aligned, reserved_, device_protection, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0));
  alias_ =
      device < 0
          ? base_
          : static_cast<char*>(::mmap(nullptr, reserved_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0));
  const int error = errno;
  ::close(fd);
  EMBER_CHECK(base_ == aligned && alias_ != MAP_FAILED, "cuda emulator: cannot map ", heap_name(device), ": ",
              std::strerror(error));
  ::madvise(alias_, reserved_, MADV_HUGEPAGE);
  free_[0] = reserved_;
  // Device memory is poisoned until allocated. Pinned memory (which host code reaches, and which
  // is larger) only from its first allocation: poisoning all of it would write a GB of shadow.
  if (device >= 0) EMBER_EMU_POISON(base_, reserved_);
}

DeviceHeap::~DeviceHeap() {
  EMBER_EMU_UNPOISON(base_, reserved_);
  ::munmap(base_, reserved_);
  if (alias_ != base_) ::munmap(alias_, reserved_);
}

void* DeviceHeap::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t length = round_up(std::max<size_t>(bytes, 1), alignment_);
  if (used_ + length > capacity_) return nullptr;
  const size_t need = round_up(length + kRedzone, alignment_);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->second >= need && (best == free_.end() || it->second < best->second)) best = it;
  if (best == free_.end()) return nullptr;
  const size_t offset = best->first, available = best->second;
  free_.erase(best);
  if (available > need) free_[offset + need] = available - need;
  live_[offset] = length;
  used_ += length;
  poison(base_ + offset, bytes, false);
  if (device_ < 0) poison(base_ + offset + bytes, need - bytes, true);
  return base_ + offset;
}

bool DeviceHeap::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - base_);
  auto it = contains(ptr) ? live_.find(offset) : live_.end();
  if (it == live_.end()) return false;
  const size_t length = round_up(it->second + kRedzone, alignment_);
  used_ -= it->second;
  live_.erase(it);
  poison(base_ + offset, length, true);  // a kernel still using it is reported
  auto [slot, inserted] = free_.emplace(offset, length);
  (void)inserted;
  auto next = std::next(slot);
  if (next != free_.end() && slot->first + slot->second == next->first) {
    slot->second += next->second;
    free_.erase(next);
  }
  if (slot != free_.begin()) {
    auto previous = std::prev(slot);
    if (previous->first + previous->second == slot->first) {
      previous->second += slot->second;
      free_.erase(slot);
    }
  }
  return true;
}

bool DeviceHeap::contains(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  return p >= base_ && p < base_ + reserved_;
}

bool DeviceHeap::holds_range(const void* ptr, size_t bytes) const {
  if (!contains(ptr)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - base_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  return offset + bytes <= it->first + it->second && offset >= it->first;
}

size_t DeviceHeap::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

size_t DeviceHeap::extent(const void* ptr) const {
  if (!contains(ptr)) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(static_cast<size_t>(static_cast<const char*>(ptr) - base_));
  return it == live_.end() ? 0 : it->second + kRedzone;
}

void DeviceHeap::release_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.clear();
  free_.clear();
  free_[0] = reserved_;
  used_ = 0;
  poison(base_, reserved_, true);
}

void DeviceHeap::set_accessible(bool accessible) {
  ::mprotect(base_, reserved_, accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
}

namespace {

// Read by the signal handler: a fixed table, filled before the handler is installed.
constexpr int kMaxHeaps = 64;
struct HeapRange {
  const char* base;
  size_t size;
  int device;
  char* alias;
};
HeapRange heap_ranges[kMaxHeaps];
std::atomic<int> heap_range_count{0};
struct sigaction previous_segv, previous_bus;

void say(const char* text) {
  ssize_t ignored = ::write(2, text, std::strlen(text));
  (void)ignored;
}

// Set in a runner only.
FaultReport* fault_report = nullptr;

void on_fault(int signal_number, siginfo_t* info, void* context) {
  const char* address = static_cast<const char*>(info->si_addr);
  int owner = -1;
  for (int i = 0; i < heap_range_count.load(); ++i)
    if (address >= heap_ranges[i].base && address < heap_ranges[i].base + heap_ranges[i].size)
      owner = heap_ranges[i].device;
  const RunningKernel& k = running_kernel;
  const bool in_kernel = fault_report != nullptr && k.device >= 0;
  if (owner < 0 && !in_kernel) {
    // Not ours: whoever handled it before (AddressSanitizer, or the default action).
    struct sigaction& previous = signal_number == SIGSEGV ? previous_segv : previous_bus;
    if (previous.sa_flags & SA_SIGINFO) {
      previous.sa_sigaction(signal_number, info, context);
      return;
    }
    ::signal(signal_number, previous.sa_handler == SIG_IGN ? SIG_DFL : previous.sa_handler);
    ::raise(signal_number);
    return;
  }
  char text[sizeof(FaultReport::text)];
  const char* name = k.name ? k.name : "?";
  const void* at = static_cast<const void*>(address);
  if (owner < 0) {
    // A runner's copy of host memory is the host's as it was when the runner started: a kernel
    // must not read it, and any of it allocated since is not mapped there at all.
    std::snprintf(text, sizeof(text),
                  "cuda emulator: kernel '%s' on cuda:%d accessed %p, which is neither device memory nor pinned host "
                  "memory (kernels cannot reach pageable host memory: copy it to the device, or use "
                  "cudaMallocHost)",
                  name, k.device, at);
  } else if (k.device >= 0 && k.device != owner) {
    std::snprintf(text, sizeof(text),
                  "cuda emulator: kernel '%s' on cuda:%d accessed memory of cuda:%d at %p without peer access "
                  "(cudaDeviceEnablePeerAccess, or copy the data to cuda:%d first)",
                  name, k.device, owner, at, k.device);
  } else if (k.device >= 0) {
    std::snprintf(text, sizeof(text),
                  "cuda emulator: kernel '%s' on cuda:%d accessed cuda:%d memory at %p outside any allocation", name,
                  k.device, owner, at);
  } else {
    std::snprintf(text, sizeof(text),
                  "cuda emulator: host code accessed device memory of cuda:%d at %p. Device memory is not readable "
                  "or writable from the host: copy it (Tensor::cpu(), cudaMemcpy) after the work that produces it "
                  "has been synchronised",
                  owner, at);
  }
  if (in_kernel) {
    // The host reports it as the device's error; this runner, and so the device, is done.
    std::memcpy(fault_report->text, text, sizeof(text));
    ::_exit(kFaultExitStatus);
  }
  say(text);
  say("\n");
  ::signal(SIGABRT, SIG_DFL);
  ::abort();
}

}  // namespace

void install_fault_handler(const std::vector<DeviceHeap*>& heaps) {
  static std::once_flag once;
  std::call_once(once, [&] {
    int n = 0;
    for (DeviceHeap* h : heaps) {
      if (n == kMaxHeaps) break;
      heap_ranges[n++] = {h->base(), h->reserved(), h->device(), h->alias(h->base())};
    }
    heap_range_count.store(n);
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGSEGV, &action, &previous_segv);
    ::sigaction(SIGBUS, &action, &previous_bus);
  });
}

void* host_view(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  for (int i = 0; i < heap_range_count.load(); ++i) {
    const HeapRange& h = heap_ranges[i];
    if (p >= h.base && p < h.base + h.size) return h.alias + (p - h.base);
  }
  return const_cast<void*>(ptr);
}

void report_faults_to(FaultReport* report) { fault_report = report; }

}  // namespace ember::emu

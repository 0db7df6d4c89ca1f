// Emulated device memory. Each device's heap is a memfd mapped at its device addresses PROT_NONE
// in the host process for good, and read-write only in the kernel runners that may touch it
// (runner.h): the device's own and those of devices granted peer access. The host's copies reach it
// through a second, private read-write alias of the same memfd. Host code that dereferences a
// device pointer faults, and the fault handler names what happened and ends the process; in a
// runner, the fault ends the runner and its device (see runner.h). Under AddressSanitizer each
// allocation is followed by a poisoned redzone, and freed memory is poisoned, so out-of-bounds and
// use-after-free accesses by kernels are reported (the runners mirror the host's poisoning).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace ember::emu {

class DeviceHeap {
 public:
  // `device` -1: pinned host memory, mapped read-write at its addresses in every process.
  DeviceHeap(int device, size_t capacity, size_t alignment = 256);
  ~DeviceHeap();
  DeviceHeap(const DeviceHeap&) = delete;
  DeviceHeap& operator=(const DeviceHeap&) = delete;

  void* allocate(size_t bytes);  // nullptr when the capacity does not hold `bytes` more
  bool release(void* ptr);       // false when `ptr` is not an allocation of this heap
  bool contains(const void* ptr) const;
  // The allocation holding [ptr, ptr + bytes), or false.
  bool holds_range(const void* ptr, size_t bytes) const;
  size_t used() const;
  // The bytes set aside for the allocation at `ptr`: its length, rounded, and the redzone after it
  // (0 when `ptr` is not an allocation).
  size_t extent(const void* ptr) const;
  size_t capacity() const { return capacity_; }
  void release_all();

  // The host process's read-write view of the device address `ptr` (inside this heap).
  char* alias(const void* ptr) const { return alias_ + (static_cast<const char*>(ptr) - base_); }
  // Makes the device addresses readable and writable, or inaccessible again, in this process (a
  // runner's own heap and its peers').
  void set_accessible(bool accessible);

  int device() const { return device_; }
  char* base() const { return base_; }
  size_t reserved() const { return reserved_; }

 private:
  int device_;
  size_t capacity_, alignment_, reserved_;
  char* base_ = nullptr;   // the device addresses
  char* alias_ = nullptr;  // the same memory, read-write, for the host's copies (== base_ for pinned)
  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> length, coalesced
  std::map<size_t, size_t> live_;  // offset -> length requested
  size_t used_ = 0;
};

// The host process's view of `ptr`: its heap's alias for a device address, `ptr` itself otherwise.
void* host_view(const void* ptr);

// AddressSanitizer's poisoning of heap memory (nothing without ASan). The host's allocations and
// frees poison the host's shadow and hand each change to `poison_hook` (runner.cc sends it to every
// runner, which applies it before its next launch: shadow memory is per process).
constexpr bool kPoisons =
#if defined(__SANITIZE_ADDRESS__)
    true;
#else
    false;
#endif
void apply_poisoning(const void* ptr, size_t bytes, bool poisoned);
extern void (*poison_hook)(const void* ptr, size_t bytes, bool poisoned);
// Poisons (or unpoisons) here and, through `poison_hook`, in every runner: what allocators use.
void poison(const void* ptr, size_t bytes, bool poisoned);

// What the running emulator thread is doing, for the fault handler's message.
struct RunningKernel {
  int device = -1;
  const char* name = nullptr;
};
extern thread_local RunningKernel running_kernel;

// Installs the SIGSEGV/SIGBUS handler that explains faults inside device heaps (once).
void install_fault_handler(const std::vector<DeviceHeap*>& heaps);

// In a kernel runner: where its fault handler leaves the message of a fault in a kernel before it
// ends the runner (shared with the host process, which reports it).
struct FaultReport {
  char text[1024];
};
constexpr int kFaultExitStatus = 70;
void report_faults_to(FaultReport* report);

}  // namespace ember::emu

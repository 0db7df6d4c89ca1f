// Emulated device memory. Each device's heap is one reserved mapping, inaccessible (PROT_NONE)
// except while a kernel or copy of the emulator that may touch it runs (an AccessWindow). Host
// code that dereferences a device pointer, or a kernel on one device that touches another's
// memory without peer access, faults; the fault handler names what happened and ends the process.
// Under AddressSanitizer each allocation is followed by a poisoned redzone, and freed memory is
// poisoned, so out-of-bounds and use-after-free accesses by kernels are reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace ember::emu {

class DeviceHeap {
 public:
  DeviceHeap(int device, size_t capacity);
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

  // While any window is open, the heap is readable and writable.
  void open_window();
  void close_window();

  int device() const { return device_; }
  const char* base() const { return base_; }
  size_t reserved() const { return reserved_; }

 private:
  int device_;
  size_t capacity_, reserved_;
  char* base_ = nullptr;
  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> length, coalesced
  std::map<size_t, size_t> live_;  // offset -> length requested
  size_t used_ = 0;
  int windows_ = 0;
};

// Opens the windows of `heaps` for the lifetime of this object.
class AccessWindow {
 public:
  explicit AccessWindow(std::vector<DeviceHeap*> heaps);
  ~AccessWindow();
  AccessWindow(const AccessWindow&) = delete;
  AccessWindow& operator=(const AccessWindow&) = delete;

 private:
  std::vector<DeviceHeap*> heaps_;
};

// What the running emulator thread is doing, for the fault handler's message.
struct RunningKernel {
  int device = -1;
  const char* name = nullptr;
};
extern thread_local RunningKernel running_kernel;

// Installs the SIGSEGV/SIGBUS handler that explains faults inside device heaps (once).
void install_fault_handler(const std::vector<DeviceHeap*>& heaps);

}  // namespace ember::emu

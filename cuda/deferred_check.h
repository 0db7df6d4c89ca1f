// Checks that a kernel makes and the host reads once the kernel is done. A kernel that finds bad
// input (an out-of-range index) cannot raise, and reading its verdict back right after the launch
// costs a host round trip per call: one per training step for cross_entropy's gather. So the
// kernel stores 1 into a flag in pinned host memory mapped for the device, and the host reads the
// flag only when the kernel is known to have finished:
//   - at every synchronisation Ember makes with the device (item(), a blocking copy to the host,
//     cuda::synchronize, a Stream's or Event's synchronize or successful query), and
//   - at the launch of any later checked kernel on the device, without waiting.
// The error then names the op and the bad value as the CPU kernel's does, and says that it was
// found by an earlier kernel. Unlike a device-side assert, the device stays usable afterwards.
//
//   DeferredCheck check = DeferredCheck::begin(device);
//   launch(..., check.flag());
//   std::move(check).submit(stream, [index] { return first_bad_index_message(index); });
#pragma once

#include <functional>
#include <string>

#include "cuda/lang.h"

namespace ember::cuda {

class DeferredCheck {
 public:
  // A cleared flag for a kernel about to be launched on `device`.
  static DeferredCheck begin(int device);
  DeferredCheck(DeferredCheck&& other) noexcept;
  DeferredCheck& operator=(DeferredCheck&&) = delete;
  ~DeferredCheck();  // a check never submitted returns its flag unread

  // The address the kernel stores 1 to when the check fails.
  unsigned* flag() const { return device_flag_; }

  // After the launch on `stream`. `describe` builds the error message if the flag is set; it runs
  // on the host with no lock held, and may copy from the device.
  void submit(cudaStream_t stream, std::function<std::string()> describe) &&;

 private:
  DeferredCheck(int device, unsigned* host_flag, unsigned* device_flag)
      : device_(device), host_flag_(host_flag), device_flag_(device_flag) {}

  int device_;
  unsigned* host_flag_;
  unsigned* device_flag_;
};

// Raises the first failed check on `device` whose kernel has finished, and retires every finished
// one. Never waits.
void raise_finished_checks(int device);

}  // namespace ember::cuda

// The flags and the pending checks of each device.
#include "cuda/deferred_check.h"

#include <array>
#include <mutex>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cuda/api.h"
#include "cuda/check.h"

namespace ember::cuda {

namespace {

struct Flag {
  unsigned* host;
  unsigned* device;
};

struct Pending {
  Flag flag;
  cudaEvent_t done;
  std::function<std::string()> describe;
};

struct DeviceChecks {
  std::mutex mutex;
  std::vector<Flag> free_flags;
  std::vector<cudaEvent_t> free_events;
  std::vector<Pending> pending;
};

constexpr int kMaxDevices = 64;
constexpr size_t kFlagsPerPage = 1024;

// Never destroyed: checks may be polled by static destructors after this file's statics are gone,
// and the pinned pages live as long as the process anyway.
DeviceChecks& checks_of(int device) {
  EMBER_CHECK(device >= 0 && device < kMaxDevices, "cuda: device index ", device, " is outside 0..", kMaxDevices - 1);
  static auto* all = new std::array<DeviceChecks, kMaxDevices>();
  return (*all)[static_cast<size_t>(device)];
}

// Caller holds c.mutex.
void add_flag_page(DeviceChecks& c, int device) {
  DeviceGuard guard(device);
  void* page = nullptr;
  check(cudaHostAlloc(&page, kFlagsPerPage * sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable),
        "cuda: pinned flags for kernel checks");
  void* mapped = nullptr;
  check(cudaHostGetDevicePointer(&mapped, page, 0), "cuda: pinned flags for kernel checks");
  for (size_t i = 0; i < kFlagsPerPage; ++i)
    c.free_flags.push_back({static_cast<unsigned*>(page) + i, static_cast<unsigned*>(mapped) + i});
}

// A describe() that synchronises would poll again on this thread; the check it runs for is
// already retired, and the others wait for the next poll.
thread_local bool describing = false;

}  // namespace

DeferredCheck DeferredCheck::begin(int device) {
  DeviceChecks& c = checks_of(device);
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.free_flags.empty()) add_flag_page(c, device);
  const Flag flag = c.free_flags.back();
  c.free_flags.pop_back();
  *static_cast<volatile unsigned*>(flag.host) = 0;
  return DeferredCheck(device, flag.host, flag.device);
}

DeferredCheck::DeferredCheck(DeferredCheck&& other) noexcept
    : device_(other.device_), host_flag_(std::exchange(other.host_flag_, nullptr)), device_flag_(other.device_flag_) {}

// An unsubmitted flag may still be written by a kernel that was launched: it is dropped rather
// than handed to a later check (a few bytes, on an error path only).
DeferredCheck::~DeferredCheck() = default;

void DeferredCheck::submit(cudaStream_t stream, std::function<std::string()> describe) && {
  DeviceChecks& c = checks_of(device_);
  DeviceGuard guard(device_);
  cudaEvent_t done = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (!c.free_events.empty()) {
      done = c.free_events.back();
      c.free_events.pop_back();
    }
  }
  if (done == nullptr) check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cuda: kernel check event");
  const cudaError_t recorded = cudaEventRecord(done, stream);
  if (recorded != cudaSuccess) {
    cudaEventDestroy(done);
    check(recorded, "cuda: kernel check event");
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  c.pending.push_back({{std::exchange(host_flag_, nullptr), device_flag_}, done, std::move(describe)});
}

void raise_finished_checks(int device) {
  if (describing) return;
  DeviceChecks& c = checks_of(device);
  std::function<std::string()> failed;
  size_t more = 0;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    size_t kept = 0;
    for (size_t i = 0; i < c.pending.size(); ++i) {
      Pending& p = c.pending[i];
      const cudaError_t state = cudaEventQuery(p.done);
      if (state != cudaSuccess) {
        // Not finished, or the device failed: a failed device's own error is what its caller
        // raises, and the check stays pending.
        if (state == cudaErrorNotReady) cudaGetLastError();
        if (kept != i) c.pending[kept] = std::move(p);
        ++kept;
        continue;
      }
      if (*static_cast<volatile unsigned*>(p.flag.host) != 0) {
        if (!failed)
          failed = std::move(p.describe);
        else
          ++more;
      }
      c.free_flags.push_back(p.flag);
      c.free_events.push_back(p.done);
    }
    c.pending.resize(kept);
  }
  if (!failed) return;
  std::string message;
  describing = true;
  try {
    message = failed();
  } catch (const std::exception& e) {
    message = e.what();
  }
  describing = false;
  EMBER_FAIL(message, " (found on cuda:", device, " by a kernel launched earlier, and reported at the first check",
             " after it finished", more > 0 ? "; " + std::to_string(more) + " more checks failed as well" : "", ")");
}

}  // namespace ember::cuda

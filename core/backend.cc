// The registry of kernel tables, one per device type.
#include "core/backend.h"

#include <atomic>

#include "core/error.h"

namespace ember {

namespace {
std::atomic<const KernelTable*> tables[kNumDeviceTypes];
}

void register_backend(DeviceType type, const KernelTable* table) {
  tables[static_cast<int>(type)].store(table, std::memory_order_release);
}

bool has_backend(DeviceType type) {
  return tables[static_cast<int>(type)].load(std::memory_order_acquire) != nullptr;
}

const KernelTable& kernels_for(Device device, const char* op) {
  const KernelTable* table = tables[static_cast<int>(device.type)].load(std::memory_order_acquire);
  EMBER_CHECK(table != nullptr, op, ": no backend is registered for device ", device.str(),
              device.is_cuda() ? " (Ember was built without the CUDA backend, and no emulated GPUs are enabled)"
                               : "");
  return *table;
}

}  // namespace ember

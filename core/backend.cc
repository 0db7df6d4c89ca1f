// The registry of kernel tables, one per device type.
#include "core/backend.h"

#include <atomic>
#include <string>

#include "core/error.h"

namespace ember {

namespace {
std::atomic<const KernelTable*> tables[kNumDeviceTypes];
}

void register_backend(DeviceType type, const KernelTable* table) {
  tables[static_cast<int>(type)].store(table, std::memory_order_release);
}

const KernelTable* find_backend(DeviceType type) {
  return tables[static_cast<int>(type)].load(std::memory_order_acquire);
}

bool has_backend(DeviceType type) {
  return tables[static_cast<int>(type)].load(std::memory_order_acquire) != nullptr;
}

const KernelTable& kernels_for(Device device, const char* op) {
  const KernelTable* table = tables[static_cast<int>(device.type)].load(std::memory_order_acquire);
  EMBER_CHECK(table != nullptr, op, ": no backend is registered for device ", device.str(),
              device.is_cuda() ? " (this program does not link Ember's CUDA backend, //cuda)" : "");
  if (!device.is_cpu()) {
    const int count = table->device_count();
    EMBER_CHECK(device.index < count, op, ": device ", device.str(), " does not exist: ",
                count == 0 ? std::string("no CUDA devices are available (no GPU, and EMBER_EMULATED_GPUS is unset)")
                           : std::to_string(count) + " CUDA device" + (count == 1 ? " is" : "s are") + " available");
  }
  return *table;
}

}  // namespace ember

// The registries of compute tables and device runtimes, one of each per device type, and the
// stream calls every layer uses.
#include "core/backend.h"

#include <atomic>
#include <string>

#include "core/error.h"

namespace ember {

namespace {
std::atomic<const KernelTable*> tables[kNumDeviceTypes];
std::atomic<const DeviceRuntime*> runtimes[kNumDeviceTypes];

// Raises unless `device` exists on a registered runtime.
const DeviceRuntime& checked_runtime(Device device, const char* op) {
  const DeviceRuntime* runtime = runtimes[static_cast<int>(device.type)].load(std::memory_order_acquire);
  EMBER_CHECK(runtime != nullptr, op, ": no backend is registered for device ", device.str(),
              device.is_cuda() ? " (this program does not link Ember's CUDA backend, //cuda)" : "");
  if (!device.is_cpu()) {
    const int count = runtime->device_count();
    EMBER_CHECK(device.index < count, op, ": device ", device.str(), " does not exist: ",
                count == 0 ? std::string("no CUDA devices are available (no GPU, and EMBER_EMULATED_GPUS is unset)")
                           : std::to_string(count) + " CUDA device" + (count == 1 ? " is" : "s are") + " available");
  }
  return *runtime;
}

// The runtime of a stream's device; streams exist only on devices of a registered runtime.
const DeviceRuntime& runtime_of(const Stream& stream) {
  return *runtimes[static_cast<int>(stream.device().type)].load(std::memory_order_acquire);
}
}  // namespace

namespace kernel_detail {
void throw_missing(const char* entry, const Site& site) {
  const KernelTable* table =
      site.has_device ? tables[static_cast<int>(site.device.type)].load(std::memory_order_acquire) : nullptr;
  throw Error(std::string(entry) + ": not implemented by the " + (table ? table->name : "?") + " backend for " +
              (site.has_device ? site.device.str() : std::string("this device")) +
              (site.has_dtype ? std::string(" and dtype ") + dtype_name(site.dtype) : std::string()));
}
}  // namespace kernel_detail

void register_kernels(DeviceType type, const KernelTable* table) {
  tables[static_cast<int>(type)].store(table, std::memory_order_release);
}

const KernelTable* find_kernels(DeviceType type) {
  return tables[static_cast<int>(type)].load(std::memory_order_acquire);
}

const KernelTable& kernels_for(Device device, const char* op) {
  checked_runtime(device, op);
  const KernelTable* table = tables[static_cast<int>(device.type)].load(std::memory_order_acquire);
  EMBER_CHECK(table != nullptr, op, ": the backend for ", device.str(), " registered no kernels");
  return *table;
}

void register_runtime(DeviceType type, const DeviceRuntime* runtime) {
  runtimes[static_cast<int>(type)].store(runtime, std::memory_order_release);
}

const DeviceRuntime* find_runtime(DeviceType type) {
  return runtimes[static_cast<int>(type)].load(std::memory_order_acquire);
}

const DeviceRuntime& runtime_for(Device device, const char* op) { return checked_runtime(device, op); }

bool has_backend(DeviceType type) { return find_runtime(type) != nullptr; }

int device_count(DeviceType type) {
  const DeviceRuntime* runtime = find_runtime(type);
  return runtime == nullptr ? 0 : runtime->device_count();
}

Stream current_stream(Device device) {
  const DeviceRuntime* runtime = find_runtime(device.type);
  return runtime != nullptr && runtime->current_stream != nullptr ? runtime->current_stream(device) : Stream();
}

void set_current_stream(const Stream& stream) {
  if (stream.defined()) runtime_of(stream).set_current_stream(stream);
}

Stream new_stream(Device device) {
  const DeviceRuntime* runtime = find_runtime(device.type);
  return runtime != nullptr && runtime->new_stream != nullptr ? runtime->new_stream(device) : Stream();
}

bool stream_wait(const Stream& consumer, const Stream& producer) {
  if (!consumer.defined() || !producer.defined() || consumer == producer) return false;
  const DeviceRuntime& runtime = runtime_of(producer);
  runtime.wait_event(consumer, runtime.record_event(producer));
  return true;
}

bool wait_for_stream(const Stream& producer) {
  return producer.defined() && stream_wait(current_stream(producer.device()), producer);
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  if (stream.defined()) runtime_of(stream).record_stream(tensor, stream);
}

}  // namespace ember

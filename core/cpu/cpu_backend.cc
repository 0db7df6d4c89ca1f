// Registers the CPU backend at start-up (this library is alwayslink): its runtime (memory; no
// streams, since its kernels finish before they return) and every compute-table entry.
#include "core/cpu/kernels.h"

namespace ember::cpu {

namespace {

const DeviceRuntime& cpu_runtime() {
  static const DeviceRuntime runtime = [] {
    DeviceRuntime r;
    r.name = "cpu";
    r.device_count = [] { return 1; };
    r.allocator = &cpu_allocator;
    r.allocated_bytes = [](int) { return cpu_memory_stats().allocated_bytes; };
    r.peak_allocated_bytes = [](int) { return cpu_memory_stats().peak_allocated_bytes; };
    r.reset_peak_allocated = [](int) { reset_cpu_peak_memory(); };
    r.synchronize = [](Device) {};
    return r;
  }();
  return runtime;
}

const KernelTable& cpu_table() {
  static const KernelTable table = [] {
    KernelTable t;
    t.name = "cpu";
#define EMBER_KERNEL(name, result, params) t.name = &name##_kernel;
#include "core/kernel_entries.inc"
#undef EMBER_KERNEL
    return t;
  }();
  return table;
}

const bool registered = [] {
  register_runtime(kCPU, &cpu_runtime());
  register_kernels(kCPU, &cpu_table());
  return true;
}();

}  // namespace

}  // namespace ember::cpu

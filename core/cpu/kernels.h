// The CPU backend's compute-table entries and runtime pieces (registered in cpu_backend.cc).
#pragma once

#include "core/backend.h"

namespace ember::cpu {

// Every compute-table entry, as `name_kernel` (core/kernel_entries.inc).
#define EMBER_KERNEL(name, result, params) result name##_kernel params;
#include "core/kernel_entries.inc"
#undef EMBER_KERNEL

Allocator* cpu_allocator(int device_index);
// Frees the large blocks the CPU allocator keeps for reuse; returns how many bytes that was.
size_t release_cached_cpu_memory();

// Bytes handed out by the CPU allocator and not given back (its reuse cache not counted), and
// the most there were at once since the last reset_cpu_peak_memory().
struct CpuMemoryStats {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t limit_bytes = 0;  // 0: none
};
CpuMemoryStats cpu_memory_stats();
void reset_cpu_peak_memory();
// A cap on allocated_bytes, as a device's memory size caps a GPU: an allocation that would pass
// it raises an out-of-memory ember::Error. 0 lifts it. EMBER_CPU_MEMORY_LIMIT (bytes, suffix K, M
// or G) sets it at start.
void set_cpu_memory_limit(int64_t bytes);

}  // namespace ember::cpu

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

}  // namespace ember::cpu

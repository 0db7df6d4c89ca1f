// Guarded allocations, the checking mode's memcheck (EMBER_EMU_CHECK=1): the bytes from an
// allocation's requested end to the end of what its allocator set aside hold a canary and, under
// AddressSanitizer, are poisoned. The canaries of every guard a kernel could reach are verified
// when it completes, a guard's own when it is removed, and a device's all at its synchronisation;
// a changed canary is a sticky failure of the device naming the kernel (or the moment it was
// found), the allocation, the offset past its end, and the host stack that made the allocation.
//
//   emu::guard(device, stream, ptr, requested, capacity);  // at allocation, in checking mode
//   emu::unguard(device, stream, ptr, capacity);           // at its free
//
// Guards are set and removed in `stream`'s order (null: the device's default stream), so work
// queued before on that stream may still use the memory as it was.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuda/emu/cuda_runtime.h"

namespace ember::emu {

class DeviceHeap;
class Stream;

// The least an allocator leaves between a request's end and its block's end for the guard.
constexpr size_t kGuardBytes = 64;

// [ptr + requested, ptr + capacity) of `device`'s memory becomes a guard; records the host stack.
void guard(int device, cudaStream_t stream, void* ptr, size_t requested, size_t capacity);
// The guard of the allocation [ptr, ptr + capacity) is verified a last time and removed; nothing
// happens if it has none.
void unguard(int device, cudaStream_t stream, void* ptr, size_t capacity);

// For the runtime. Whether any guard was ever asked for (cheap: the default mode pays only this).
bool any_guards();
// Verifies the guards inside `heaps` (whose windows are open); "" or the report of the first
// broken one, opening with `context` (e.g. "kernel 'k' on cuda:0 wrote").
std::string check_guards(const std::vector<DeviceHeap*>& heaps, const std::string& context);
// The report of an access to [address, address + size) that reaches into a guard, opening with
// `context`, or "" (AddressSanitizer's report in a runner names the address, not the allocation).
std::string describe_guard_access(const void* address, size_t size, const std::string& context);
// Queues the backstop on `stream`: all of its device's guards, once the work before has run.
void check_guards_at_synchronisation(Stream& stream);
// cudaDeviceReset: the device's memory is gone, and with it its guards.
void drop_guards(int device);

}  // namespace ember::emu

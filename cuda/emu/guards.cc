// The registry of armed guards, their canaries, and the reports of a broken one (also of
// AddressSanitizer's report of an access to a poisoned guard, made in a kernel runner).
#include "cuda/emu/guards.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "cuda/emu/device.h"
#include "cuda/emu/host_backtrace.h"
#include "cuda/emu/memory.h"

namespace ember::emu {

namespace {

// The canary's byte at address a is byte (a % 8) of this word: every aligned word of a guard
// equals it, and no run of one repeated byte (a memset, zeros) matches it.
constexpr uint64_t kCanaryWord = 0xfd5ac3e1b7946a2full;

uint8_t canary_byte(uintptr_t address) { return static_cast<uint8_t>(kCanaryWord >> (8 * (address % 8))); }

struct Guard {
  int device;
  size_t requested, capacity;
  HostBacktrace made_at;
};

std::atomic<bool> guards_requested{false};

// Never destroyed: stream workers and caching-allocator frees outlive static teardown.
struct Registry {
  std::mutex mutex;
  std::map<std::pair<const char*, size_t>, Guard> armed;  // (allocation, capacity) -> its guard
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Guards may be poisoned (AddressSanitizer): only these functions touch them, uninstrumented.
__attribute__((no_sanitize_address)) void write_canary(char* begin, char* end) {
  char* p = begin;
  for (; p < end && reinterpret_cast<uintptr_t>(p) % 8 != 0; ++p)
    *p = static_cast<char>(canary_byte(reinterpret_cast<uintptr_t>(p)));
  for (; p + 8 <= end; p += 8) *reinterpret_cast<uint64_t*>(p) = kCanaryWord;
  for (; p < end; ++p) *p = static_cast<char>(canary_byte(reinterpret_cast<uintptr_t>(p)));
}

__attribute__((no_sanitize_address)) bool changed(const char* p) {
  return static_cast<uint8_t>(*p) != canary_byte(reinterpret_cast<uintptr_t>(p));
}

// The first and last changed bytes of the canary [begin, end), as offsets from `begin`.
__attribute__((no_sanitize_address)) bool find_changes(const char* begin, const char* end, size_t* first,
                                                       size_t* last) {
  const char* p = begin;
  bool any = false;
  for (; p < end && reinterpret_cast<uintptr_t>(p) % 8 != 0 && !any; ++p) any = changed(p);
  for (; p + 8 <= end && !any; p += 8) any = *reinterpret_cast<const uint64_t*>(p) != kCanaryWord;
  for (; p < end && !any; ++p) any = changed(p);
  if (!any) return false;
  const char* a = begin;
  while (!changed(a)) ++a;
  const char* b = end - 1;
  while (!changed(b)) --b;
  *first = static_cast<size_t>(a - begin);
  *last = static_cast<size_t>(b - begin);
  return true;
}

std::string describe_overwrite(const std::string& context, const char* ptr, const Guard& g, size_t first, size_t last) {
  std::ostringstream out;
  out << context << " past the end of an allocation: ";
  if (first == last)
    out << "byte +" << first;
  else
    out << "bytes +" << first << " to +" << last;
  out << " after the " << g.requested << " bytes requested at " << static_cast<const void*>(ptr)
      << " on cuda:" << g.device << " (the checking mode's guard, EMBER_EMU_CHECK=1); the allocation was made at\n"
      << describe(g.made_at);
  return out.str();
}

// Operations on a stream that may have been destroyed since the allocation went to its device's
// default stream (a destroyed stream ran all its work first).
Stream* live_stream(int device, cudaStream_t stream) {
  Device* d = device_at(device);
  if (stream == nullptr) return d->default_stream.get();
  std::lock_guard<std::mutex> lock(d->mutex);
  const bool live = std::find(d->streams.begin(), d->streams.end(), stream) != d->streams.end();
  return live ? stream : d->default_stream.get();
}

}  // namespace

void guard(int device, cudaStream_t stream, void* ptr, size_t requested, size_t capacity) {
  if (capacity <= requested || device_at(device) == nullptr) return;
  guards_requested.store(true);
  auto made = std::make_shared<Guard>(Guard{device, requested, capacity, capture_backtrace(0)});
  char* p = static_cast<char*>(ptr);
  live_stream(device, stream)->enqueue_bookkeeping([made, p] {
    char* view = static_cast<char*>(host_view(p));
    write_canary(view + made->requested, view + made->capacity);
    poison(p + made->requested, made->capacity - made->requested, true);
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().armed[{p, made->capacity}] = *made;
    return std::string();
  });
}

void unguard(int device, cudaStream_t stream, void* ptr, size_t capacity) {
  if (!any_guards() || device_at(device) == nullptr) return;
  char* p = static_cast<char*>(ptr);
  live_stream(device, stream)->enqueue_bookkeeping([p, capacity] {
    Guard g;
    {
      std::lock_guard<std::mutex> lock(registry().mutex);
      auto it = registry().armed.find({p, capacity});
      if (it == registry().armed.end()) return std::string();
      g = it->second;
      registry().armed.erase(it);
    }
    size_t first = 0, last = 0;
    const char* view = static_cast<const char*>(host_view(p));
    const bool broken = find_changes(view + g.requested, view + g.capacity, &first, &last);
    poison(p + g.requested, g.capacity - g.requested, false);
    if (!broken) return std::string();
    return describe_overwrite("found when the allocation was freed: a copy, memset or collective on cuda:" +
                                  std::to_string(g.device) + " wrote",
                              p, g, first, last);
  });
}

std::string describe_guard_access(const void* address, size_t size, const std::string& context) {
  const char* a = static_cast<const char*>(address);
  size = std::max<size_t>(size, 1);
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (const auto& [key, g] : registry().armed) {
    const char* ptr = key.first;
    const char* end = ptr + g.requested;
    // The access may begin inside the allocation and run into its guard.
    if (a + size <= end || a >= ptr + g.capacity || a < ptr) continue;
    const size_t first = static_cast<size_t>(std::max(a, end) - end);
    return describe_overwrite(context, ptr, g, first, static_cast<size_t>(a + size - 1 - end));
  }
  return "";
}

bool any_guards() { return guards_requested.load(std::memory_order_relaxed); }

std::string check_guards(const std::vector<DeviceHeap*>& heaps, const std::string& context) {
  if (!any_guards()) return "";
  std::vector<int> reachable;
  for (const DeviceHeap* h : heaps) reachable.push_back(h->device());
  std::unique_lock<std::mutex> lock(registry().mutex);
  const Guard* broken = nullptr;
  const char* broken_ptr = nullptr;
  size_t first = 0, last = 0, others = 0;
  for (const auto& [key, g] : registry().armed) {
    if (std::find(reachable.begin(), reachable.end(), g.device) == reachable.end()) continue;
    size_t f = 0, l = 0;
    const char* view = static_cast<const char*>(host_view(key.first));
    if (!find_changes(view + g.requested, view + g.capacity, &f, &l)) continue;
    if (broken != nullptr) {
      ++others;
      continue;
    }
    broken = &g;
    broken_ptr = key.first;
    first = f;
    last = l;
  }
  if (broken == nullptr) return "";
  const Guard g = *broken;
  lock.unlock();
  std::string report = describe_overwrite(context, broken_ptr, g, first, last);
  if (others > 0) report += "(and the guards of " + std::to_string(others) + " more allocations changed)\n";
  return report;
}

void check_guards_at_synchronisation(Stream& stream) {
  if (!any_guards()) return;
  const int device = stream.device();
  DeviceHeap* heap = device_at(device)->heap.get();
  stream.enqueue_bookkeeping([heap, device] {
    return check_guards({heap}, "found at a synchronisation of cuda:" + std::to_string(device) +
                                    ": a copy, memset or collective (or a kernel still running on another stream) "
                                    "wrote");
  });
}

void drop_guards(int device) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& armed = registry().armed;
  for (auto it = armed.begin(); it != armed.end();) it = it->second.device == device ? armed.erase(it) : std::next(it);
}

}  // namespace ember::emu

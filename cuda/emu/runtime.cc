// The CUDA runtime API on emulated devices: devices and their settings, memory, copies, streams,
// events, kernel launches and CUDA's error conventions (a failed kernel is reported by the next
// synchronising call, and stays reported: a "sticky" error).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "core/error.h"
#include "cuda/emu/check_mode.h"
#include "cuda/emu/device.h"
#include "cuda/emu/emu.h"
#include "cuda/emu/guards.h"
#include "cuda/emu/runner.h"

namespace ember::emu {

namespace {

std::atomic<int> requested_devices{-1};
std::atomic<bool> devices_created{false};
std::atomic<size_t> requested_memory{0};
std::atomic<int> delay_setting{-1};
thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

size_t parse_bytes(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k')
    scale = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    scale = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    scale = 1024.0 * 1024 * 1024, ++end;
  EMBER_CHECK(end != text && *end == '\0' && value > 0,
              "EMBER_EMULATED_GPU_MEMORY: expected a size such as 512M "
              "or 4G, got '",
              text, "'");
  return static_cast<size_t>(value * scale);
}

int env_int(const char* name, int fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(env, &end, 10);
  EMBER_CHECK(*end == '\0' && value >= 0, name, ": expected a non-negative integer, got '", env, "'");
  return static_cast<int>(value);
}

cudaError_t fail(cudaError_t error) {
  last_error = error;
  return error;
}

bool is_pinned(const void* ptr, size_t bytes) { return pinned_memory().holds_range(ptr, bytes); }

// The device whose heap holds `ptr`, or -1 for host memory.
int owner_of(const void* ptr) {
  for (Device* d : devices())
    if (d->heap->contains(ptr)) return d->index;
  return -1;
}

cudaError_t check_device_range(const void* ptr, size_t bytes, const char* op) {
  const int owner = owner_of(ptr);
  if (owner < 0 || !device_at(owner)->heap->holds_range(ptr, bytes)) {
    record_failure(current_device, std::string(op) + ": " + std::to_string(bytes) + " bytes at " +
                                       std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                                       " are not inside one live allocation of an emulated device");
    return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

Stream* stream_or_default(cudaStream_t stream) {
  return stream ? stream : device_at(current_device)->default_stream.get();
}

cudaError_t sticky_of(int device) {
  Device* d = device_at(device);
  std::lock_guard<std::mutex> lock(d->mutex);
  return d->sticky;
}

cudaError_t initialised() {
  if (devices().empty()) return fail(cudaErrorNoDevice);
  if (device_at(current_device) == nullptr) return fail(cudaErrorInvalidDevice);
  if (forked_from_device_owner()) {
    // Its streams' workers and the runners are the parent's (CUDA refuses a forked child too).
    record_failure(current_device,
                   "cuda emulator: this process is a fork of the one that started the emulated "
                   "devices; a forked child cannot use them (start workers by executing the program)",
                   cudaErrorInitializationError);
    return fail(cudaErrorInitializationError);
  }
  return cudaSuccess;
}

}  // namespace

void set_device_count(int count) {
  EMBER_CHECK(count >= 0, "cuda emulator: device count must be non-negative, got ", count);
  EMBER_CHECK(!devices_created.load() || static_cast<int>(devices().size()) == count,
              "cuda emulator: the device count is fixed at the first CUDA call (", devices().size(),
              " devices); set it before");
  requested_devices.store(count);
}

void set_device_memory(size_t bytes) { requested_memory.store(bytes); }

void set_delay_ms(int ms) { delay_setting.store(ms); }

int delay_ms() {
  int ms = delay_setting.load(std::memory_order_relaxed);
  if (ms < 0) {
    ms = env_int("EMBER_EMU_DELAY", 0);
    delay_setting.store(ms);
  }
  return ms;
}

std::vector<Device*>& devices() {
  static std::vector<Device*>* list = [] {
    auto* out = new std::vector<Device*>();
    int count = requested_devices.load();
    if (count < 0) count = env_int("EMBER_EMULATED_GPUS", 0);
    size_t memory = requested_memory.load();
    if (memory == 0) {
      const char* env = std::getenv("EMBER_EMULATED_GPU_MEMORY");
      memory = env && *env ? parse_bytes(env) : size_t{4} << 30;
    }
    pinned_memory();  // mapped before the runners start, so that they share it
    std::vector<DeviceHeap*> heaps;
    for (int i = 0; i < count; ++i) {
      auto* d = new Device();
      d->index = i;
      d->heap = std::make_unique<DeviceHeap>(i, memory);
      d->peer_access.assign(static_cast<size_t>(count), false);
      d->peer_access[static_cast<size_t>(i)] = true;
      out->push_back(d);
      heaps.push_back(d->heap.get());
    }
    install_fault_handler(heaps);
    start_runners(heaps);
    // Default streams last: their workers may look devices up.
    for (Device* d : *out) d->default_stream = std::make_unique<Stream>(d->index);
    devices_created.store(true);
    return out;
  }();
  return *list;
}

Device* device_at(int index) {
  std::vector<Device*>& all = devices();
  return index >= 0 && index < static_cast<int>(all.size()) ? all[static_cast<size_t>(index)] : nullptr;
}

DeviceHeap& pinned_memory() {
  // 16 GB of address space, used as allocated; host code reads and writes it directly.
  static DeviceHeap* heap = new DeviceHeap(-1, size_t{16} << 30, 4096);
  return *heap;
}

// Waits for the work queued on every stream of `d`.
void synchronize_streams(Device* d) {
  d->default_stream->synchronize();
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(d->mutex);
    streams = d->streams;
  }
  for (Stream* s : streams) s->synchronize();
}

// The heaps a kernel on `device` may touch: its own and its peers'; guards are checked in those.
std::vector<DeviceHeap*> reachable_heaps(int device) {
  std::vector<DeviceHeap*> heaps;
  Device* d = device_at(device);
  for (Device* other : devices())
    if (d->peer_access[static_cast<size_t>(other->index)]) heaps.push_back(other->heap.get());
  return heaps;
}

void record_failure(int device, const std::string& what, cudaError_t code) {
  Device* d = device_at(device);
  if (d == nullptr) return;
  std::lock_guard<std::mutex> lock(d->mutex);
  if (d->sticky == cudaSuccess) d->sticky = code;
  if (d->failure.empty()) d->failure = what;
}

std::string failure_message() {
  Device* d = device_at(current_device);
  if (d == nullptr) return "";
  std::lock_guard<std::mutex> lock(d->mutex);
  return d->failure;
}

cudaError_t enqueue_kernel(KernelLaunch launch, cudaStream_t stream, std::shared_ptr<const void> keep) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  const dim3 g = launch.grid, b = launch.block;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 ||
      g.y > 65535 || g.z > 65535 || launch.dynamic_shared_bytes > (48u << 10)) {
    return fail(cudaErrorInvalidConfiguration);
  }
  Stream* s = stream_or_default(stream);
  launch.device = s->device();
  if (sticky_of(launch.device) != cudaSuccess) return fail(cudaErrorLaunchFailure);
  // Drawn here, in the order launches are queued, so that EMBER_EMU_SEED replays them.
  launch.order_seed = draw_launch_order_seed();
  launch.order = thread_order();
  launch.checking = checking();
  s->enqueue([launch, keep = std::move(keep)] {
    if (sticky_of(launch.device) != cudaSuccess) return std::string();  // a failed device runs nothing more
    std::string failure = run_on_runner(launch);
    if (failure.empty() && any_guards())
      failure =
          check_guards(reachable_heaps(launch.device),
                       "kernel '" + std::string(launch.name) + "' on cuda:" + std::to_string(launch.device) + " wrote");
    return failure;
  });
  return cudaSuccess;
}

}  // namespace ember::emu

using namespace ember::emu;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = static_cast<int>(devices().size());
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device_at(device) == nullptr) return fail(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  Device* d = device_at(device);
  if (d == nullptr) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "Ember emulated GPU %d", device);
  prop->totalGlobalMem = d->heap->capacity();
  prop->sharedMemPerBlock = 48 << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  Device* d = device_at(current_device);
  synchronize_streams(d);
  check_guards_at_synchronisation(*d->default_stream);
  d->default_stream->synchronize();
  return sticky_of(current_device) != cudaSuccess ? fail(sticky_of(current_device)) : cudaSuccess;
}

cudaError_t cudaDeviceReset() {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  Device* d = device_at(current_device);
  d->default_stream->synchronize();
  d->heap->release_all();
  drop_guards(current_device);
  std::lock_guard<std::mutex> lock(d->mutex);
  d->sticky = cudaSuccess;
  d->failure.clear();
  last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer_device) {
  if (device_at(device) == nullptr || device_at(peer_device) == nullptr) return fail(cudaErrorInvalidDevice);
  *can_access = device != peer_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned flags) {
  if (initialised() != cudaSuccess || device_at(peer_device) == nullptr) return fail(cudaErrorInvalidDevice);
  if (flags != 0) return fail(cudaErrorInvalidValue);
  Device* d = device_at(current_device);
  std::lock_guard<std::mutex> lock(d->mutex);
  if (peer_device == current_device) return fail(cudaErrorInvalidDevice);
  if (d->peer_access[static_cast<size_t>(peer_device)]) return fail(cudaErrorPeerAccessAlreadyEnabled);
  d->peer_access[static_cast<size_t>(peer_device)] = true;
  set_runner_peer_access(current_device, peer_device, true);
  return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer_device) {
  if (initialised() != cudaSuccess || device_at(peer_device) == nullptr) return fail(cudaErrorInvalidDevice);
  Device* d = device_at(current_device);
  std::lock_guard<std::mutex> lock(d->mutex);
  if (peer_device == current_device || !d->peer_access[static_cast<size_t>(peer_device)])
    return fail(cudaErrorPeerAccessNotEnabled);
  d->peer_access[static_cast<size_t>(peer_device)] = false;
  set_runner_peer_access(current_device, peer_device, false);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  DeviceHeap& heap = *device_at(current_device)->heap;
  *ptr = heap.allocate(bytes);
  if (*ptr != nullptr && checking()) guard(current_device, nullptr, *ptr, bytes, heap.extent(*ptr));
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  const int owner = owner_of(ptr);
  if (owner < 0) return fail(cudaErrorInvalidDevicePointer);
  unguard(owner, nullptr, ptr, device_at(owner)->heap->extent(ptr));
  // cudaFree waits for all of the device's queued work, as CUDA's does (on every stream: a kernel
  // on a side stream may still use the memory).
  synchronize_streams(device_at(owner));
  return device_at(owner)->heap->release(ptr) ? cudaSuccess : fail(cudaErrorInvalidDevicePointer);
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  devices();  // the runners map pinned memory: they start first
  *ptr = pinned_memory().allocate(bytes);
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if ((flags & ~(cudaHostAllocPortable | cudaHostAllocMapped)) != 0) return fail(cudaErrorInvalidValue);
  return cudaMallocHost(ptr, bytes);
}

cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned flags) {
  if (flags != 0 || device_ptr == nullptr) return fail(cudaErrorInvalidValue);
  // Any address inside a pinned block maps, as CUDA's does.
  if (!is_pinned(host_ptr, 1)) return fail(cudaErrorInvalidValue);
  *device_ptr = host_ptr;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) { return pinned_memory().release(ptr) ? cudaSuccess : fail(cudaErrorInvalidValue); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  DeviceHeap& heap = *device_at(current_device)->heap;
  *total_bytes = heap.capacity();
  *free_bytes = heap.capacity() - heap.used();
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  const int dst_owner = owner_of(dst), src_owner = owner_of(src);
  const bool to_device = dst_owner >= 0, from_device = src_owner >= 0;
  const cudaMemcpyKind actual = to_device ? (from_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                          : (from_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  if (kind != cudaMemcpyDefault && kind != actual) return fail(cudaErrorInvalidMemcpyDirection);
  if (to_device && check_device_range(dst, bytes, "cudaMemcpy") != cudaSuccess) return cudaErrorInvalidValue;
  if (from_device && check_device_range(src, bytes, "cudaMemcpy") != cudaSuccess) return cudaErrorInvalidValue;
  Stream* s = stream_or_default(stream);
  // Device memory through the host's alias of it; the device addresses stay closed.
  void* const dst_view = host_view(dst);
  const void* const src_view = host_view(src);
  if (actual == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) {
    // Pageable memory is staged at once, so the caller may reuse its buffer on return (as in CUDA).
    auto staged =
        std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    s->enqueue([dst_view, staged] {
      std::memcpy(dst_view, staged->data(), staged->size());
      return std::string();
    });
    return cudaSuccess;
  }
  s->enqueue([dst_view, src_view, bytes] {
    std::memcpy(dst_view, src_view, bytes);
    return std::string();
  });
  // Into pageable memory, CUDA returns only once the copy is done.
  if (actual == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) s->synchronize();
  return sticky_of(s->device()) != cudaSuccess ? fail(sticky_of(s->device())) : cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  if (device_at(dst_device) == nullptr || device_at(src_device) == nullptr) return fail(cudaErrorInvalidDevice);
  if (bytes > 0 && (owner_of(dst) != dst_device || owner_of(src) != src_device)) return fail(cudaErrorInvalidValue);
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  cudaError_t e = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, nullptr);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  if (check_device_range(ptr, bytes, "cudaMemset") != cudaSuccess) return cudaErrorInvalidValue;
  void* const view = host_view(ptr);
  stream_or_default(stream)->enqueue([view, value, bytes] {
    std::memset(view, value, bytes);
    return std::string();
  });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  cudaError_t e = cudaMemsetAsync(ptr, value, bytes, nullptr);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  // Every emulated stream is non-blocking: none synchronises implicitly with the null stream
  // (stricter than CUDA's blocking streams; ARCHITECTURE.md), so `flags` changes nothing.
  (void)flags;
  *stream = new Stream(current_device);
  Device* d = device_at(current_device);
  std::lock_guard<std::mutex> lock(d->mutex);
  d->streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  {
    Device* d = device_at(stream->device());
    std::lock_guard<std::mutex> lock(d->mutex);
    auto it = std::find(d->streams.begin(), d->streams.end(), stream);
    if (it == d->streams.end()) return fail(cudaErrorInvalidResourceHandle);
    d->streams.erase(it);
  }
  delete stream;  // its queued work still runs first, as CUDA's does
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  Stream* s = stream_or_default(stream);
  check_guards_at_synchronisation(*s);
  s->synchronize();
  return sticky_of(s->device()) != cudaSuccess ? fail(sticky_of(s->device())) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  Stream* s = stream_or_default(stream);
  if (sticky_of(s->device()) != cudaSuccess) return sticky_of(s->device());
  return s->idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  if (event == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
  std::shared_ptr<Mark> mark = event->last();
  if (!mark) return cudaSuccess;  // never recorded: nothing to wait for
  stream_or_default(stream)->enqueue([mark] {
    mark->wait();
    return std::string();
  });
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  if (fn == nullptr) return fail(cudaErrorInvalidValue);
  stream_or_default(stream)->enqueue([fn, user_data] {
    fn(user_data);
    return std::string();
  });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new Event(flags);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = initialised(); e != cudaSuccess) return e;
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  event->record(*stream_or_default(stream));
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (std::shared_ptr<Mark> mark = event->last()) mark->wait();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<Mark> mark = event->last();
  if (!mark) return cudaSuccess;
  std::lock_guard<std::mutex> lock(mark->mutex);
  return mark->done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if ((start->flags() | end->flags()) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<Mark> a = start->last(), b = end->last();
  if (!a || !b) return fail(cudaErrorInvalidResourceHandle);
  for (Mark* m : {a.get(), b.get()}) {
    std::lock_guard<std::mutex> lock(m->mutex);
    if (!m->done) return fail(cudaErrorNotReady);
  }
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

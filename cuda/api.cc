// Devices, the per-thread current streams, events, and the memory statistics.
#include "cuda/api.h"

#include <atomic>
#include <vector>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/deferred_check.h"

namespace ember::cuda {

namespace {

int resolve(int device) { return device < 0 ? current_device() : device; }

void check_index(int device, const char* op) {
  const int count = device_count();
  EMBER_CHECK(device >= 0 && device < count, op, ": device cuda:", device, " does not exist (", count, " CUDA device",
              count == 1 ? "" : "s", " available)");
}

// Per thread, per device: the current stream (the default one until set).
thread_local std::vector<Stream> current_streams;

}  // namespace

namespace {
std::atomic<bool> runtime_touched{false};
}  // namespace

bool runtime_started() { return runtime_touched.load(); }

int device_count() {
  // Fixed for the process (cuda/emu's count too, once the first call made it).
  static const int count = [] {
    runtime_touched = true;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cuda::current_device");
  return device;
}

void set_device(int device) {
  check_index(device, "cuda::set_device");
  check(cudaSetDevice(device), "cuda::set_device");
}

void synchronize(int device) {
  device = resolve(device);
  DeviceGuard guard(device);
  check(cudaDeviceSynchronize(), "cuda::synchronize");
  raise_finished_checks(device);
}

DeviceGuard::DeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "cuda::DeviceGuard");
  if (device != previous_) set_device(device);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

Stream Stream::default_stream(int device) {
  device = resolve(device);
  check_index(device, "cuda::Stream::default_stream");
  return Stream(device, nullptr, nullptr);
}

Stream Stream::create(int device) {
  device = resolve(device);
  DeviceGuard guard(device);
  cudaStream_t handle = nullptr;
  check(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking), "cuda::Stream::create");
  std::shared_ptr<void> owner(handle, [device](void* h) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaStreamDestroy(static_cast<cudaStream_t>(h));
    cudaSetDevice(previous);
  });
  return Stream(device, handle, std::move(owner));
}

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  check(cudaStreamSynchronize(handle_), "cuda::Stream::synchronize");
  raise_finished_checks(device_);
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  cudaError_t e = cudaStreamQuery(handle_);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check(e, "cuda::Stream::query");
  raise_finished_checks(device_);
  return true;
}

void Stream::wait(const Event& event) const {
  if (!event.recorded()) return;
  DeviceGuard guard(device_);
  check(cudaStreamWaitEvent(handle_, event.handle(), 0), "cuda::Stream::wait");
}

Stream current_stream(int device) {
  device = resolve(device);
  check_index(device, "cuda::current_stream");
  if (current_streams.size() <= static_cast<size_t>(device)) {
    for (int d = static_cast<int>(current_streams.size()); d < device_count(); ++d)
      current_streams.push_back(Stream::default_stream(d));
  }
  return current_streams[static_cast<size_t>(device)];
}

void set_current_stream(const Stream& stream) {
  current_stream(stream.device());  // fills the table
  current_streams[static_cast<size_t>(stream.device())] = stream;
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_stream_(current_stream(stream.device())), previous_device_(current_device()) {
  set_current_stream(stream);
  set_device(stream.device());
}

StreamGuard::~StreamGuard() {
  set_current_stream(previous_stream_);
  cudaSetDevice(previous_device_);
}

struct Event::State {
  bool timing = false;
  int device = -1;
  cudaEvent_t event = nullptr;
  ~State() {
    if (event == nullptr) return;
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaEventDestroy(event);
    cudaSetDevice(previous);
  }
};

Event::Event(bool enable_timing) : state_(std::make_shared<State>()) { state_->timing = enable_timing; }

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (state_->event == nullptr) {
    state_->device = stream.device();
    check(cudaEventCreateWithFlags(&state_->event, state_->timing ? cudaEventDefault : cudaEventDisableTiming),
          "cuda::Event::record");
  }
  EMBER_CHECK(state_->device == stream.device(), "cuda::Event::record: the event belongs to cuda:", state_->device,
              ", got a stream on cuda:", stream.device());
  check(cudaEventRecord(state_->event, stream.handle()), "cuda::Event::record");
}

bool Event::recorded() const { return state_->event != nullptr; }
cudaEvent_t Event::handle() const { return state_->event; }

bool Event::query() const {
  if (!recorded()) return true;
  DeviceGuard guard(state_->device);
  cudaError_t e = cudaEventQuery(state_->event);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check(e, "cuda::Event::query");
  raise_finished_checks(state_->device);
  return true;
}

void Event::synchronize() const {
  if (!recorded()) return;
  DeviceGuard guard(state_->device);
  check(cudaEventSynchronize(state_->event), "cuda::Event::synchronize");
  raise_finished_checks(state_->device);
}

float Event::elapsed_ms(const Event& end) const {
  EMBER_CHECK(recorded() && end.recorded(), "cuda::Event::elapsed_ms: both events must have been recorded");
  EMBER_CHECK(state_->timing && end.state_->timing,
              "cuda::Event::elapsed_ms: both events must be created with enable_timing = true");
  float ms = 0;
  DeviceGuard guard(state_->device);
  check(cudaEventElapsedTime(&ms, state_->event, end.state_->event), "cuda::Event::elapsed_ms");
  return ms;
}

MemoryStats memory_stats(int device) { return caching_allocator().stats(resolve(device)); }
void reset_peak_memory_stats(int device) { caching_allocator().reset_peak_stats(resolve(device)); }
void empty_cache() { caching_allocator().empty_cache(); }

void record_stream(const Tensor& tensor, const Stream& stream) {
  EMBER_CHECK(tensor.device().is_cuda(), "cuda::record_stream: expected a CUDA tensor, got one on ",
              tensor.device().str());
  EMBER_CHECK(tensor.device().index == stream.device(), "cuda::record_stream: the tensor is on ", tensor.device().str(),
              ", the stream on cuda:", stream.device());
  if (tensor.storage()->data() != nullptr) caching_allocator().record_stream(tensor.storage()->data(), stream.handle());
}

}  // namespace ember::cuda

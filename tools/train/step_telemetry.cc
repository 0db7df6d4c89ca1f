#include "tools/train/step_telemetry.h"

#include <algorithm>
#include <cmath>

#include "core/ember_core.h"
#include "core/runtime.h"

namespace ember::train {

void StepTelemetry::step_done(double step_seconds, double exposed_comm_seconds) {
  step_seconds_ += step_seconds;
  exposed_seconds_ += exposed_comm_seconds;
  last_busy_ = std::max(0.0, step_seconds - exposed_comm_seconds);
  ++steps_;
}

std::vector<double> StepTelemetry::shared_slots(int rank, const std::vector<Device>& devices) const {
  const size_t n = peaks_mb_.size();
  std::vector<double> slots(2 * n, 0.0);
  slots[static_cast<size_t>(rank)] = last_busy_;
  int64_t peak = 0;
  for (const Device& d : devices) peak = std::max(peak, peak_memory_bytes(d));
  slots[n + static_cast<size_t>(rank)] = static_cast<double>(peak) / (1 << 20);
  return slots;
}

std::vector<int> StepTelemetry::observe_shared(const std::vector<double>& summed) {
  const size_t n = peaks_mb_.size();
  EMBER_CHECK(summed.size() >= 2 * n, "StepTelemetry: expected ", 2 * n, " shared values, got ", summed.size());
  busy_.assign(summed.begin(), summed.begin() + static_cast<std::ptrdiff_t>(n));
  std::copy_n(summed.begin() + static_cast<std::ptrdiff_t>(n), n, peaks_mb_.begin());
  return slow_.observe(busy_);
}

void StepTelemetry::take_window(std::map<std::string, double>& values) {
  const double total = wait_seconds_ + step_seconds_;
  values["data_wait_share"] = total > 0 ? wait_seconds_ / total : 0.0;
  values["exposed_comm_ms"] = steps_ > 0 ? 1e3 * exposed_seconds_ / static_cast<double>(steps_) : 0.0;
  for (size_t r = 0; r < peaks_mb_.size(); ++r) values["peak_memory_mb/rank" + std::to_string(r)] = peaks_mb_[r];
  wait_seconds_ = step_seconds_ = exposed_seconds_ = 0;
  steps_ = 0;
}

double gradient_norm(const std::vector<Tensor>& parameters, comm::ProcessGroup* shards_of, Device device) {
  NoGradGuard no_grad;
  // Each gradient's sum of squares stays on its device until one sum on `device`: one host read
  // (a GPU waits once, not once per parameter).
  Tensor squares = zeros({1}, TensorOptions(kFloat64).device(device));
  for (const Tensor& p : parameters)
    if (p.grad().defined() && p.grad().numel() > 0) {
      const Tensor g = p.grad().to(kFloat64);
      squares.add_((g * g).sum().view({1}).to(device));
    }
  if (shards_of) shards_of->all_reduce(squares)->wait();
  return std::sqrt(squares.to(kCPU).item<double>());
}

int64_t peak_memory_bytes(Device device) {
  const DeviceRuntime* runtime = find_runtime(device.type);
  return runtime && runtime->peak_allocated_bytes ? runtime->peak_allocated_bytes(device.index) : 0;
}

}  // namespace ember::train

// See pipeline_measure.h.
#include "tools/bench/pipeline_measure.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <thread>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"

namespace ember::bench {

namespace {

void wait_for(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

std::vector<Device> first_devices(int64_t p) {
  std::vector<Device> devices;
  for (int64_t s = 0; s < p; ++s) devices.push_back(Device::cuda(static_cast<int>(s)));
  return devices;
}

Tensor mean_loss(const Tensor& out, const Tensor&) { return out.mean(); }

}  // namespace

FixedCostImpl::FixedCostImpl(double seconds) : Cloneable("FixedCost"), seconds(seconds) { reset(); }

void FixedCostImpl::reset() { weight = register_parameter("weight", ones({})); }

Tensor FixedCostImpl::forward(const Tensor& x) {
  wait_for(seconds);
  Tensor y = x * weight;
  if (y.requires_grad()) {
    const double s = seconds;
    y.register_hook([s](const Tensor&) -> Tensor {
      wait_for(s);
      return Tensor();
    });
  }
  return y;
}

BubbleRun measure_bubble(int64_t p, int64_t m, parallel::Schedule schedule, double seconds_per_action, int repeats,
                         int64_t virtual_stages) {
  const int64_t v = virtual_stages;
  nn::Sequential seq;
  for (int64_t s = 0; s < p * v; ++s) seq->push_back(FixedCost(seconds_per_action / static_cast<double>(v)));
  parallel::PipelineOptions options;
  options.virtual_stages = v;
  parallel::Pipeline pipe(seq, first_devices(p), m, schedule, options);
  const Tensor x = ones({m, 4}, TensorOptions().device(Device::cuda(0)));
  const Tensor y = zeros({m}, TensorOptions(kInt64));
  BubbleRun best;
  best.measured = std::numeric_limits<double>::infinity();
  const std::vector<parallel::StageCost> equal(static_cast<size_t>(p * v), {1, 1, 0, 0});
  best.expected = parallel::simulate_schedule(parallel::per_device_actions(schedule, p, m, v), equal).bubble;
  for (int r = 0; r < repeats; ++r) {
    pipe.zero_grad();
    pipe.train_step(x, y, mean_loss);
    const std::vector<parallel::PipelineEvent> events = pipe.last_events();
    double first = std::numeric_limits<double>::infinity(), last = 0;
    std::vector<double> busy(static_cast<size_t>(p), 0.0);
    for (const parallel::PipelineEvent& e : events) {
      first = std::min(first, e.start_s);
      last = std::max(last, e.end_s);
      busy[static_cast<size_t>(e.device_index)] += e.end_s - e.start_s;
    }
    const double makespan = last - first;
    double idle = 0;
    for (double b : busy) idle += 1.0 - b / makespan;
    idle /= static_cast<double>(p);
    if (idle < best.measured) {
      best.measured = idle;
      best.makespan_s = makespan;
    }
  }
  return best;
}

namespace {

nn::Sequential wide_blocks(int64_t p, int64_t width, int64_t hidden) {
  nn::Sequential seq;
  for (int64_t s = 0; s < p; ++s) {
    seq->push_back(nn::Sequential(nn::Linear(nn::LinearOptions(width, hidden).bias(false)), nn::ReLU(),
                                  nn::Linear(nn::LinearOptions(hidden, width).bias(false))));
  }
  return seq;
}

// Peak allocated bytes above the start, per device, over one train_step.
std::vector<double> step_peaks(int64_t p, int64_t m, parallel::Schedule schedule, int64_t micro_batch, int64_t hidden,
                               int64_t v) {
  constexpr int64_t kWidth = 4;
  manual_seed(7);
  parallel::PipelineOptions options;
  options.virtual_stages = v;
  parallel::Pipeline pipe(wide_blocks(p * v, kWidth, hidden), first_devices(p), m, schedule, options);
  const Tensor x = randn({m * micro_batch, kWidth}).to(Device::cuda(0));
  const Tensor y = zeros({m * micro_batch}, TensorOptions(kInt64));
  pipe.train_step(x, y, mean_loss);  // the gradients exist from here on: not part of the peaks
  std::vector<int64_t> base;
  for (int64_t s = 0; s < p; ++s) {
    cuda::synchronize(static_cast<int>(s));
    cuda::reset_peak_memory_stats(static_cast<int>(s));
    base.push_back(cuda::memory_stats(static_cast<int>(s)).allocated_bytes);
  }
  pipe.train_step(x, y, mean_loss);
  std::vector<double> peaks;
  for (int64_t s = 0; s < p; ++s) {
    cuda::synchronize(static_cast<int>(s));
    peaks.push_back(static_cast<double>(cuda::memory_stats(static_cast<int>(s)).peak_allocated_bytes - base[s]));
  }
  return peaks;
}

}  // namespace

std::vector<double> measure_held_activations(int64_t p, int64_t m, parallel::Schedule schedule, int64_t hidden,
                                             int64_t virtual_stages) {
  constexpr int64_t kMicroBatch = 8;
  // The calibration depends on (p, hidden) only: made once, each schedule measured against it.
  static std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<double>, std::vector<double>>> calibrations;
  auto found = calibrations.find({p, hidden});
  if (found == calibrations.end()) {
    found = calibrations
                .emplace(std::make_pair(p, hidden),
                         std::make_pair(step_peaks(p, 1, parallel::Schedule::kGPipe, kMicroBatch, hidden, 1),
                                        step_peaks(p, 2, parallel::Schedule::kGPipe, kMicroBatch, hidden, 1)))
                .first;
  }
  const std::vector<double>& one = found->second.first;
  const std::vector<double>& two = found->second.second;
  const std::vector<double> run = step_peaks(p, m, schedule, kMicroBatch, hidden, virtual_stages);
  std::vector<double> held;
  for (int64_t s = 0; s < p; ++s) {
    const double unit = two[s] - one[s];
    const double transient = one[s] - unit;
    EMBER_CHECK(unit > 0, "measure_held_activations: stage ", s, " holds no more with 2 micro-batches than with 1");
    held.push_back((run[s] - transient) / unit);
  }
  return held;
}

ScheduleRun measure_schedule(parallel::Pipeline& pipe, const Tensor& input, const Tensor& target, int steps) {
  const std::vector<Device>& devices = pipe.devices();
  pipe.train_step(input, target, mean_loss);  // kAuto chooses here; gradients exist from here on
  std::vector<int64_t> base;
  for (const Device& d : devices) {
    cuda::synchronize(d.index);
    cuda::reset_peak_memory_stats(d.index);
    base.push_back(cuda::memory_stats(d.index).allocated_bytes);
  }
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    pipe.train_step(input, target, mean_loss);
    times.push_back(pipe.last_step_seconds());
  }
  ScheduleRun run;
  std::sort(times.begin(), times.end());
  run.step_s = times[times.size() / 2];
  for (size_t k = 0; k < devices.size(); ++k) {
    cuda::synchronize(devices[k].index);
    run.peak_bytes = std::max(run.peak_bytes, cuda::memory_stats(devices[k].index).peak_allocated_bytes - base[k]);
  }
  return run;
}

}  // namespace ember::bench

// Schedule::kAuto's measurement (each layer on its device, per micro-batch size) and choice (every
// candidate simulated from those measurements).
#include "parallel/pipeline_auto.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstdio>
#include <sstream>

#include "autograd/engine.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/random.h"
#include "core/runtime.h"
#include "nn/modules/batchnorm.h"
#include "parallel/pipeline.h"

namespace ember::parallel {

namespace {

// Where a layer runs: its parameters' or buffers' device; a layer with neither runs where its
// input is.
Device layer_device(const nn::Module& layer, Device input_device) {
  for (const Tensor& p : layer.parameters()) return p.device();
  for (const auto& [name, b] : layer.named_buffers()) return b.device();
  return input_device;
}

// The allocation counts of one device, zero where its backend keeps none.
struct DeviceMemory {
  explicit DeviceMemory(Device d) : device(d), runtime(find_runtime(d.type)) {}
  void synchronize() const {
    if (runtime != nullptr && runtime->synchronize != nullptr) runtime->synchronize(device);
  }
  int64_t allocated() const {
    return runtime != nullptr && runtime->allocated_bytes != nullptr ? runtime->allocated_bytes(device.index) : 0;
  }
  int64_t peak() const {
    return runtime != nullptr && runtime->peak_allocated_bytes != nullptr ? runtime->peak_allocated_bytes(device.index)
                                                                          : 0;
  }
  void reset_peak() const {
    if (runtime != nullptr && runtime->reset_peak_allocated != nullptr) runtime->reset_peak_allocated(device.index);
  }
  Device device;
  const DeviceRuntime* runtime;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs `work` and returns what it costs in a stream of such work: the larger of its host part
// (until it returns) and its device part (the rest, until the device is done). A stage runs its
// layers without waiting for the device in between, so one layer's device work overlaps the next
// one's host work: a sum of host + device would overstate layers that do both (host waits, or
// the emulator's kernels, which run on the host's cores too).
template <typename Work>
double stream_seconds(const DeviceMemory& memory, Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  const double host = seconds_since(start);
  memory.synchronize();
  return std::max(host, seconds_since(start) - host);
}

}  // namespace

std::vector<LayerCost> measure_layer_costs(const nn::Sequential& sequential, const Tensor& input, int repeats) {
  EMBER_CHECK(input.defined(), "measure_layer_costs: the input is undefined");
  EMBER_CHECK(repeats >= 1, "measure_layer_costs: repeats must be at least 1, got ", repeats);
  // The measurement must leave no trace: no running statistics counted, no draw from the global
  // generator, no gradient accumulated into the parameters.
  nn::RunningStatsScope no_running_stats(nullptr);
  Generator generator(0);
  GeneratorGuard use_generator(&generator);
  EnableGradGuard with_grad;
  // The least of the repeats, memory too: a first call may allocate what it keeps for later ones.
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t most_bytes = std::numeric_limits<int64_t>::max();
  std::vector<LayerCost> costs(sequential->size(), LayerCost{inf, inf, most_bytes, most_bytes, 0});
  Tensor h = input;
  for (size_t i = 0; i < sequential->size(); ++i) {
    const std::shared_ptr<nn::Module>& layer = (*sequential)[i];
    const DeviceMemory memory(layer_device(*layer, h.device()));
    LayerCost& cost = costs[i];
    Tensor next;
    for (int r = 0; r < repeats; ++r) {
      Tensor in = h.detach().to(memory.device);
      if (is_floating(in.dtype())) in.requires_grad_(true);
      cost.input_bytes = static_cast<int64_t>(in.nbytes());
      memory.synchronize();
      const int64_t before = memory.allocated();
      Tensor out;
      cost.forward_s = std::min(cost.forward_s, stream_seconds(memory, [&] { out = layer->forward(in); }));
      cost.held_bytes = std::min(cost.held_bytes, memory.allocated() - before);
      std::vector<Tensor> wrt;
      if (in.requires_grad()) wrt.push_back(in);
      for (const Tensor& p : layer->parameters())
        if (p.requires_grad()) wrt.push_back(p);
      if (out.requires_grad() && !wrt.empty()) {
        const Tensor grad_out = ones_like(out);
        memory.synchronize();
        const int64_t base = memory.allocated();
        memory.reset_peak();
        cost.backward_s = std::min(
            cost.backward_s, stream_seconds(memory, [&] { autograd::grad({out}, wrt, {grad_out}, false, true); }));
        cost.backward_extra_bytes = std::min(cost.backward_extra_bytes, memory.peak() - base);
      } else {
        cost.backward_s = 0;
        cost.backward_extra_bytes = 0;
      }
      next = out.detach();
    }
    h = next;
  }
  return costs;
}

std::string PipelineCandidate::describe() const {
  std::ostringstream out;
  out << schedule_name(schedule);
  if (schedule == Schedule::kInterleaved1F1B) out << " v=" << virtual_stages;
  out << " m=" << micro_batches;
  return out.str();
}

namespace {

int64_t most(const std::vector<int64_t>& values) { return *std::max_element(values.begin(), values.end()); }

// Stage costs of `balance`'s runs of layers on `devices` devices.
std::vector<StageCost> stage_costs(const std::vector<LayerCost>& layers, const std::vector<int64_t>& balance,
                                   int64_t devices, bool recompute) {
  std::vector<StageCost> stages;
  size_t next = 0;
  for (int64_t count : balance) {
    // A stage after the first keeps the copy of its input it received from another device.
    const bool copied_input = !stages.empty() && devices > 1;
    StageCost s;
    int64_t extra = 0;
    const int64_t input_bytes = layers[next].input_bytes;
    for (int64_t k = 0; k < count; ++k, ++next) {
      const LayerCost& l = layers[next];
      s.forward_s += l.forward_s;
      s.backward_s += l.backward_s;
      s.held_bytes += l.held_bytes;
      extra = std::max(extra, l.backward_extra_bytes);
    }
    if (recompute) {
      // Only the input is kept; the backward reruns the forward and holds its activations.
      s.backward_s += s.forward_s;
      extra += s.held_bytes;
      s.held_bytes = input_bytes;
    } else if (copied_input) {
      s.held_bytes += input_bytes;
    }
    // A stage before the last also receives its output's gradient, a copy, for its backward.
    if (next < layers.size() && devices > 1) extra += layers[next].input_bytes;
    s.backward_extra_bytes = extra;
    s.input_bytes = input_bytes;
    stages.push_back(s);
  }
  return stages;
}

}  // namespace

PipelinePlan plan_pipeline(const std::map<int64_t, std::vector<LayerCost>>& layer_costs, int64_t devices,
                           int64_t memory_budget, bool recompute) {
  EMBER_CHECK(!layer_costs.empty(), "Pipeline (auto): no candidate micro-batch counts");
  EMBER_CHECK(memory_budget >= 0, "Pipeline (auto): the memory budget must be non-negative bytes (0: none), got ",
              memory_budget);
  PipelinePlan plan;
  plan.memory_budget = memory_budget;
  for (const auto& [m, layers] : layer_costs) {
    const int64_t count = static_cast<int64_t>(layers.size());
    EMBER_CHECK(count >= devices, "Pipeline (auto): ", devices, " devices need at least ", devices,
                " layers, measured ", count);
    std::vector<double> times;
    for (const LayerCost& l : layers) times.push_back(l.forward_s + l.backward_s);
    std::vector<std::pair<Schedule, int64_t>> kinds = {{Schedule::kGPipe, 1}, {Schedule::k1F1B, 1}};
    for (int64_t v = 2; v <= 8 && devices * v <= count; ++v) kinds.emplace_back(Schedule::kInterleaved1F1B, v);
    for (const auto& [schedule, v] : kinds) {
      PipelineCandidate c;
      c.schedule = schedule;
      c.virtual_stages = v;
      c.micro_batches = m;
      c.balance = balance_costs(times, devices * v);
      const SimulatedSchedule sim = simulate_schedule(per_device_actions(schedule, devices, m, v),
                                                      stage_costs(layers, c.balance, devices, recompute));
      c.simulated_step_s = sim.makespan_s;
      c.held_bytes = sim.peak_held_bytes;
      c.fits = memory_budget == 0 || most(c.held_bytes) <= memory_budget;
      plan.candidates.push_back(std::move(c));
    }
  }
  // The fastest that fits; among equally fast ones, the one holding the least.
  auto better = [](const PipelineCandidate& a, const PipelineCandidate& b) {
    if (a.simulated_step_s != b.simulated_step_s) return a.simulated_step_s < b.simulated_step_s;
    return most(a.held_bytes) < most(b.held_bytes);
  };
  bool found = false;
  size_t leanest = 0;
  for (size_t k = 0; k < plan.candidates.size(); ++k) {
    const PipelineCandidate& c = plan.candidates[k];
    if (most(c.held_bytes) < most(plan.candidates[leanest].held_bytes)) leanest = k;
    if (c.fits && (!found || better(c, plan.candidates[plan.chosen_index]))) {
      plan.chosen_index = k;
      found = true;
    }
  }
  EMBER_CHECK(found, "Pipeline (auto): no schedule fits the memory budget of ", memory_budget,
              " activation bytes per device; the leanest, ", plan.candidates[leanest].describe(), ", needs ",
              most(plan.candidates[leanest].held_bytes));
  return plan;
}

}  // namespace ember::parallel

namespace ember::parallel {

void Pipeline::choose_schedule(const Tensor& input) {
  const int64_t batch = input.size(options_.dim);
  std::vector<int64_t> counts = options_.auto_chunks;
  if (counts.empty()) {
    // Divisors: every micro-batch the same size, so one measurement per size holds for all.
    for (int64_t m = 1; m <= std::min(chunks_, batch); ++m)
      if (batch % m == 0) counts.push_back(m);
  }
  std::map<int64_t, std::vector<LayerCost>> by_size, by_count;
  for (int64_t m : counts) {
    EMBER_CHECK(m <= batch, "Pipeline (auto): ", m, " micro-batches from a batch of ", batch);
    const int64_t size = (batch + m - 1) / m;  // the largest micro-batch
    if (by_size.count(size) == 0) by_size[size] = measure_layer_costs(sequential_, input.narrow(options_.dim, 0, size));
    by_count[m] = by_size[size];
  }
  plan_ = plan_pipeline(by_count, num_devices(), options_.memory_budget, options_.checkpoint);
  const PipelineCandidate& c = plan_->chosen();
  schedule_ = c.schedule;
  virtual_stages_ = c.virtual_stages;
  chunks_ = c.micro_batches;
  balance_ = c.balance;
  place_stages();
}

void Pipeline::report_plan() {
  plan_->measured_step_s = last_step_seconds();
  const PipelineCandidate& c = plan_->chosen();
  std::ostringstream out;
  out << "Pipeline (auto): " << c.describe() << " of " << plan_->candidates.size() << " candidates: simulated step "
      << c.simulated_step_s << " s, measured " << plan_->measured_step_s << " s; activations " << most(c.held_bytes)
      << " bytes per device at most";
  if (plan_->memory_budget > 0) out << " (budget " << plan_->memory_budget << ")";
  std::fprintf(stderr, "%s\n", out.str().c_str());
}

}  // namespace ember::parallel

// parallel::Pipeline's schedules measured against their theory, over a grid of (p, m):
//   bubble   stages of fixed cost (each device's forward and backward wait `--action-ms` on the
//            host, split over its v chunks): the measured idle fraction, 1 - busy / makespan
//            averaged over the devices, next to the yardstick (p - 1) / (m + p - 1) for GPipe and
//            1F1B, and the simulator's with equal actions for interleaved 1F1B (v = 2);
//   memory   each device's peak of stored activations in (stage, micro-batch) units, from the
//            caching allocator's peaks (tools/bench/pipeline_measure.h; hidden width 4096, 512 with
//            --quick), next to the schedule's m (GPipe), min(m, p - i) (1F1B) and
//            min(m v, 2 (p - 1 - i) + (v - 1) p + 1) (interleaved, v = 2);
//   auto     over a grid of (p, m, activation budget), 4 fixed-cost layers per device: every
//            schedule (GPipe, 1F1B, interleaved v = 2..4) measured (median step, peak memory),
//            then Schedule::kAuto with that budget: whether its choice is the measured-fastest
//            feasible schedule (peak within the budget) or within 5% of it, and the simulator's
//            error |predicted - measured| / measured on its choice. Budgets: none, and midway
//            between the leanest measured peaks, so that only some schedules fit;
//   images/s on real GPUs only: ResNet-20 (CIFAR) training split over the GPUs (all stages on
//            cuda:0 when there is one) with each schedule, next to the model on cuda:0 alone.
// The devices are CUDA devices, emulated (EMBER_EMULATED_GPUS) or real; the bubble and memory
// tables mean the same on both (host waits and the allocator's own counts).
//
//   pipeline [--action-ms T] [--quick] [--batch B] [--steps S]
// Last line: `bench pipeline: bubble_err_max=E 1f1b_mem_ratio=R emulated=0|1 auto_within_5pct=F
// sim_err_max=S [resnet20 figures]`: E the largest |measured - expected| bubble over the grid; R
// the largest over stages of 1F1B's held micro-batches / GPipe's at the largest p and m = 16 (8
// with --quick): ideally p / m; F the share of auto cases whose choice is feasible and within 5% of
// the fastest feasible; S the largest simulator error on auto's choices.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/functional.h"
#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/device_properties.h"
#include "models/sequential_form.h"
#include "models/zoo.h"
#include "nn/optim/sgd.h"
#include "parallel/pipeline.h"
#include "tools/bench/pipeline_auto_grid.h"
#include "tools/bench/pipeline_measure.h"
#include "tools/bench/timing.h"

using namespace ember;
using parallel::Schedule;

namespace {

struct Options {
  double action_ms = 10;
  bool quick = false;
  int64_t batch = 128;
  int steps = 10;
};

int usage(const char* message) {
  std::fprintf(stderr, "pipeline: %s\nusage: pipeline [--action-ms T] [--quick] [--batch B] [--steps S]\n", message);
  return 2;
}

Tensor ce(const Tensor& out, const Tensor& target) { return cross_entropy(out, target); }

// Training images/s of ResNet-20 split into `p` stages on `devices` with `m` micro-batches.
double pipeline_images_per_second(const std::vector<Device>& devices, int64_t m, Schedule schedule, const Options& o) {
  manual_seed(0);
  auto model = models::make_model("resnet20", 3, 32, 10);
  parallel::Pipeline pipe(models::as_sequential(model), devices, m, schedule);
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const Tensor x = randn({o.batch, 3, 32, 32}).to(devices.front());
  const Tensor y = randint(0, 10, {o.batch}, TensorOptions(kInt64)).to(devices.back());
  auto step = [&] {
    opt.zero_grad();
    pipe.train_step(x, y, ce);
    opt.step();
  };
  step();
  for (const Device& d : devices) cuda::synchronize(d.index);
  const double start = bench::now_seconds();
  for (int i = 0; i < o.steps; ++i) step();
  for (const Device& d : devices) cuda::synchronize(d.index);
  return static_cast<double>(o.batch) * o.steps / (bench::now_seconds() - start);
}

double single_images_per_second(const Options& o) {
  manual_seed(0);
  auto model = models::make_model("resnet20", 3, 32, 10);
  model->to(Device::cuda(0));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const Tensor x = randn({o.batch, 3, 32, 32}).to(Device::cuda(0));
  const Tensor y = randint(0, 10, {o.batch}, TensorOptions(kInt64)).to(Device::cuda(0));
  auto step = [&] {
    opt.zero_grad();
    ce(model->forward(x), y).backward();
    opt.step();
  };
  step();
  cuda::synchronize(0);
  const double start = bench::now_seconds();
  for (int i = 0; i < o.steps; ++i) step();
  cuda::synchronize(0);
  return static_cast<double>(o.batch) * o.steps / (bench::now_seconds() - start);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--action-ms") {
      const char* v = value();
      if (v == nullptr || (o.action_ms = std::atof(v)) <= 0) return usage("--action-ms needs a positive number");
    } else if (a == "--batch") {
      const char* v = value();
      if (v == nullptr || (o.batch = std::atoll(v)) < 1) return usage("--batch needs a positive number");
    } else if (a == "--steps") {
      const char* v = value();
      if (v == nullptr || (o.steps = std::atoi(v)) < 1) return usage("--steps needs a positive number");
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  const int devices = cuda::device_count();
  if (devices < 2) {
    std::fprintf(stderr, "pipeline: needs at least 2 CUDA devices (real, or EMBER_EMULATED_GPUS=4), found %d\n",
                 devices);
    return 2;
  }
  const cuda::DeviceProperties properties = cuda::device_properties(0);
  const int64_t max_p = std::min<int64_t>(4, devices);
  std::vector<int64_t> ps = {2};
  if (max_p >= 4) ps.push_back(4);
  const std::vector<int64_t> ms = o.quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 2, 4, 8, 16};
  std::printf("pipeline: %d %s devices (%s); fixed-cost stages of %.1f ms per forward and per backward\n", devices,
              properties.emulated ? "emulated" : "CUDA", properties.name.c_str(), o.action_ms);

  std::printf("\nbubble (idle fraction): measured vs (p - 1) / (m + p - 1); interleaved (v = 2) vs its simulation\n");
  std::printf("%4s %4s %10s %10s %10s %10s %10s %10s %10s %10s\n", "p", "m", "expected", "gpipe", "1f1b", "gpipe_err",
              "1f1b_err", "inter_exp", "interleave", "inter_err");
  double bubble_err_max = 0;
  for (int64_t p : ps) {
    for (int64_t m : ms) {
      const bench::BubbleRun g = bench::measure_bubble(p, m, Schedule::kGPipe, o.action_ms / 1000.0);
      const bench::BubbleRun f = bench::measure_bubble(p, m, Schedule::k1F1B, o.action_ms / 1000.0);
      const bench::BubbleRun v = bench::measure_bubble(p, m, Schedule::kInterleaved1F1B, o.action_ms / 1000.0, 3, 2);
      const double eg = std::abs(g.measured - g.expected), ef = std::abs(f.measured - f.expected);
      const double ev = std::abs(v.measured - v.expected);
      bubble_err_max = std::max({bubble_err_max, eg, ef, ev});
      std::printf("%4lld %4lld %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n", static_cast<long long>(p),
                  static_cast<long long>(m), g.expected, g.measured, f.measured, eg, ef, v.expected, v.measured, ev);
    }
  }

  std::printf(
      "\nstored activations per device ((stage, micro-batch) pairs held at the peak; schedule: gpipe m, 1f1b "
      "min(m, p-i), interleaved v=2 min(2m, 2(p-1-i)+p+1))\n");
  std::printf("%4s %4s %6s %8s %8s %8s %8s %8s %8s\n", "p", "m", "device", "gpipe", "(m)", "1f1b", "(p-i)", "inter",
              "(bound)");
  double mem_ratio = 0;
  const int64_t mem_p = ps.back(), mem_m = o.quick ? 8 : 16;
  for (int64_t p : ps) {
    for (int64_t m : {mem_m}) {
      const std::vector<double> g = bench::measure_held_activations(p, m, Schedule::kGPipe, o.quick ? 512 : 4096);
      const std::vector<double> f = bench::measure_held_activations(p, m, Schedule::k1F1B, o.quick ? 512 : 4096);
      const std::vector<double> v =
          bench::measure_held_activations(p, m, Schedule::kInterleaved1F1B, o.quick ? 512 : 4096, 2);
      for (int64_t s = 0; s < p; ++s) {
        std::printf("%4lld %4lld %6lld %8.2f %8lld %8.2f %8lld %8.2f %8lld\n", static_cast<long long>(p),
                    static_cast<long long>(m), static_cast<long long>(s), g[s], static_cast<long long>(m), f[s],
                    static_cast<long long>(std::min(m, p - s)), v[s],
                    static_cast<long long>(std::min(2 * m, 2 * (p - 1 - s) + p + 1)));
        if (p == mem_p && m == mem_m) mem_ratio = std::max(mem_ratio, f[s] / g[s]);
      }
    }
  }

  const bench::AutoGridResult auto_grid = bench::run_auto_grid(ps, o.quick, o.action_ms / 1000.0);

  std::string gpu_figures;
  if (properties.emulated) {
    std::printf("\nimages/s: skipped on emulated devices (the emulator's speed says nothing about GPUs)\n");
  } else {
    std::vector<Device> stage_devices;
    for (int64_t s = 0; s < max_p; ++s) stage_devices.push_back(Device::cuda(devices >= max_p ? s : 0));
    if (devices < 2 || stage_devices.size() < 2) stage_devices = {Device::cuda(0), Device::cuda(0)};
    const double single = single_images_per_second(o);
    std::printf("\nResNet-20 (CIFAR) training, batch %lld, %d steps: images/s\n", static_cast<long long>(o.batch),
                o.steps);
    std::printf("%-28s %10.1f\n", "cuda:0 alone", single);
    char buffer[256];
    std::snprintf(buffer, sizeof(buffer), " resnet20_single_ips=%.1f", single);
    gpu_figures += buffer;
    for (Schedule schedule : {Schedule::kGPipe, Schedule::k1F1B}) {
      for (int64_t m : {int64_t(4), int64_t(8)}) {
        const double ips = pipeline_images_per_second(stage_devices, m, schedule, o);
        std::printf("%-6s p=%zu m=%-2lld             %10.1f  (%.2fx)\n", parallel::schedule_name(schedule),
                    stage_devices.size(), static_cast<long long>(m), ips, ips / single);
        std::snprintf(buffer, sizeof(buffer), " resnet20_%s_m%lld_ips=%.1f", parallel::schedule_name(schedule),
                      static_cast<long long>(m), ips);
        gpu_figures += buffer;
      }
    }
  }
  std::printf(
      "bench pipeline: bubble_err_max=%.3f 1f1b_mem_ratio=%.3f emulated=%d auto_within_5pct=%.2f "
      "sim_err_max=%.3f%s\n",
      bubble_err_max, mem_ratio, properties.emulated ? 1 : 0, auto_grid.within_5pct, auto_grid.sim_err_max,
      gpu_figures.c_str());
  return 0;
}

// ResNet-20 training through DistributedDataParallel next to the same step without communication,
// in one launch: batch 128 of synthetic 3x32x32 per rank, cross-entropy, SGD (lr 0.1, momentum 0.9,
// weight decay 5e-4), fp32, one compute thread per rank. Three configurations, each its own model
// (same initial weights) and optimizer, measured in alternating rounds so load hits all alike:
//   ddp         DDP with the default buckets (first 1 MB, then 25 MB), overlapped with backward;
//   one_bucket  DDP with a single bucket, all-reduced when backward's last gradient arrives;
//   nocomm      the bare model, no DDP: each rank trains alone.
// Step = zero_grad + forward + loss + backward (+ all-reduce) + optimizer step, timed per rank.
// Definitions (all written on rank 0's line at the end):
//   step_ms               a rank's median step; the table lists every rank's
//   images/s              global: sum over ranks of 128 / that rank's median step
//   X_vs_nocomm           slowest rank's median X step / slowest rank's median nocomm step
//   hidden_fraction       1 - sum(wait_time) / sum(comm_time) over all measured steps and ranks,
//                         from the Reducer's stats: comm_time runs from the first bucket's launch
//                         to the last bucket's completion, wait_time from the end of backward to
//                         that completion; the fraction is the part of the all-reduce window that
//                         ran while backward was still computing (0: nothing hidden).
//   mpirun -np 2 --bind-to core bazel-out/k8-opt/bin/tools/bench/ddp [--rounds R] [--steps S]
//   mpirun -np 1 bazel-out/k8-opt/bin/tools/bench/ddp --nocomm-only    (the np=1 baseline)
//   tools/bench/ddp_bench        (both launches and PyTorch DDP, with the scaling summary)
// Last line: `bench ddp_compare: ...` or, with --nocomm-only, `bench ddp_nocomm: ...`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functional.h"
#include "comm/init.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "models/zoo.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember;
using bench::median;
using bench::now_seconds;

constexpr int64_t kBatch = 128;

struct Config {
  std::string name, description;
  std::shared_ptr<nn::Module> model;                       // what forward runs on: the DDP wrapper or the bare model
  std::shared_ptr<parallel::DistributedDataParallel> ddp;  // null for nocomm
  std::unique_ptr<optim::SGD> optimizer;
  std::vector<double> step_seconds;
  double wait_seconds = 0, comm_seconds = 0;
};

Config make_config(const std::string& name, const std::string& description,
                   const std::shared_ptr<comm::ProcessGroup>& world, const parallel::DDPOptions* ddp_options) {
  Config c{name, description};
  manual_seed(0);
  c.model = models::make_model("resnet20", 3, 32, 10);
  c.model->train();
  c.optimizer =
      std::make_unique<optim::SGD>(c.model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  if (ddp_options) {
    c.ddp = std::make_shared<parallel::DistributedDataParallel>(c.model, world, *ddp_options);
    c.model = c.ddp;
  }
  return c;
}

void train_step(Config& c, const Tensor& images, const Tensor& labels, bool record) {
  const double start = now_seconds();
  c.optimizer->zero_grad();
  Tensor loss = cross_entropy(c.model->forward(images), labels);
  loss.backward();
  c.optimizer->step();
  const double elapsed = now_seconds() - start;
  if (!record) return;
  c.step_seconds.push_back(elapsed);
  if (c.ddp) {
    const parallel::ReducerStats& stats = c.ddp->reducer().stats();
    c.wait_seconds += std::chrono::duration<double>(stats.wait_time).count();
    c.comm_seconds += std::chrono::duration<double>(stats.comm_time).count();
  }
}

// Every rank's value, in rank order.
std::vector<double> gather(comm::ProcessGroup& world, double value) {
  Tensor input = full({1}, value, TensorOptions(kFloat64));
  Tensor output = empty({world.size()}, TensorOptions(kFloat64));
  world.all_gather_into_tensor(output, input)->wait();
  const double* data = output.data_ptr<double>();
  return std::vector<double>(data, data + world.size());
}

double sum_over_ranks(comm::ProcessGroup& world, double value) {
  Tensor t = full({1}, value, TensorOptions(kFloat64));
  world.all_reduce(t, comm::ReduceOp::Sum)->wait();
  return t.data_ptr<double>()[0];
}

struct Summary {
  std::vector<double> step_ms;  // per rank
  double slowest_ms, images_per_second, hidden_fraction;
};

Summary summarise(comm::ProcessGroup& world, const Config& c) {
  Summary s;
  s.step_ms = gather(world, 1e3 * median(c.step_seconds));
  s.slowest_ms = *std::max_element(s.step_ms.begin(), s.step_ms.end());
  s.images_per_second = 0;
  for (double ms : s.step_ms) s.images_per_second += kBatch / (ms * 1e-3);
  const double wait = sum_over_ranks(world, c.wait_seconds), comm_time = sum_over_ranks(world, c.comm_seconds);
  s.hidden_fraction = comm_time > 0 ? 1.0 - wait / comm_time : 0.0;
  return s;
}

int int_flag(int argc, char** argv, const char* flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = int_flag(argc, argv, "--rounds", 6), steps = int_flag(argc, argv, "--steps", 5),
            warmup = int_flag(argc, argv, "--warmup", 2);
  const bool nocomm_only = has_flag(argc, argv, "--nocomm-only");
  cpu::set_num_threads(1);
  auto world = comm::init();
  const int rank = world->rank(), ranks = world->size();

  std::vector<Config> configs;
  if (!nocomm_only) {
    parallel::DDPOptions buckets;  // defaults: first bucket 1 MB, then 25 MB
    parallel::DDPOptions one_bucket;
    one_bucket.first_bucket_mb = one_bucket.bucket_cap_mb = 1e6;
    configs.push_back(make_config("ddp", "DDP, buckets 1 MB then 25 MB", world, &buckets));
    configs.push_back(make_config("one_bucket", "DDP, one bucket at the end", world, &one_bucket));
  }
  configs.push_back(make_config("nocomm", "no communication (bare model)", world, nullptr));

  Generator generator(1000 + rank);
  Tensor images = randn({kBatch, 3, 32, 32}, {}, &generator);
  Tensor labels = randint(0, 10, {kBatch}, TensorOptions(kInt64), &generator);

  // Warm-up (DDP rebuilds its buckets after its first step), then rounds in a rotating order.
  for (Config& c : configs)
    for (int i = 0; i < warmup; ++i) train_step(c, images, labels, false);
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(r + k) % configs.size()];
      world->barrier()->wait();
      for (int i = 0; i < steps; ++i) train_step(c, images, labels, true);
    }
  }

  std::vector<Summary> summaries;
  for (const Config& c : configs) summaries.push_back(summarise(*world, c));
  if (rank != 0) return 0;
  std::printf(
      "ResNet-20 training: %d rank(s) x batch %lld, 3x32x32, fp32, 1 thread per rank, SGD momentum 0.9; "
      "%d rounds x %d steps per configuration, alternating\n",
      ranks, static_cast<long long>(kBatch), rounds, steps);
  std::printf("%-36s %-8s %-20s %10s %10s %8s\n", "configuration", "buckets", "step_ms per rank", "images/s",
              "vs_nocomm", "hidden");
  const Summary& nocomm = summaries.back();
  for (size_t i = 0; i < configs.size(); ++i) {
    std::string per_rank;
    for (double ms : summaries[i].step_ms) {
      char cell[32];
      std::snprintf(cell, sizeof(cell), "%s%.1f", per_rank.empty() ? "" : " ", ms);
      per_rank += cell;
    }
    std::string buckets = configs[i].ddp ? std::to_string(configs[i].ddp->reducer().bucket_count()) : "-";
    std::string hidden = "-";
    if (configs[i].ddp) {
      char cell[16];
      std::snprintf(cell, sizeof(cell), "%.3f", summaries[i].hidden_fraction);
      hidden = cell;
    }
    std::printf("%-36s %-8s %-20s %10.1f %10.3f %8s\n", configs[i].description.c_str(), buckets.c_str(),
                per_rank.c_str(), summaries[i].images_per_second, summaries[i].slowest_ms / nocomm.slowest_ms,
                hidden.c_str());
  }
  if (nocomm_only) {
    std::printf("bench ddp_nocomm: ranks=%d images_per_second=%.1f step_ms=%.2f\n", ranks, nocomm.images_per_second,
                nocomm.slowest_ms);
    return 0;
  }
  const Summary &ddp = summaries[0], &one_bucket = summaries[1];
  std::printf(
      "bench ddp_compare: ranks=%d images_per_second=%.1f one_bucket_images_per_second=%.1f "
      "nocomm_images_per_second=%.1f step_vs_nocomm=%.3f one_bucket_vs_nocomm=%.3f hidden_fraction=%.3f "
      "one_bucket_hidden_fraction=%.3f\n",
      ranks, ddp.images_per_second, one_bucket.images_per_second, nocomm.images_per_second,
      ddp.slowest_ms / nocomm.slowest_ms, one_bucket.slowest_ms / nocomm.slowest_ms, ddp.hidden_fraction,
      one_bucket.hidden_fraction);
  return 0;
}

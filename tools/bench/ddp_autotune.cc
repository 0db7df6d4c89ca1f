// DDP's bucket cap chosen by measurement (DDPOptions::bucket_cap_mb = kAuto) against every fixed
// cap it chooses from, in one launch: each configuration its own DDP model (same initial weights)
// and SGD, measured in alternating rounds so that load hits all alike. Step = zero_grad + forward
// + loss + backward (buckets all-reduced during it) + optimizer step, on synthetic 3x32x32 images.
//   fixed   caps 1, 5, 10, 25 (the default), 50 and 100 MB, first bucket 1 MB;
//   auto    kAuto: 25 MB buckets for two steps, then its trial layouts, then the one it measured
//           fastest (all of which are untimed warm-up steps here).
// Each configuration's step time is the slowest rank's median.
//   mpirun -np 2 bazel-out/k8-opt/bin/tools/bench/ddp_autotune [--model resnet18] [--batch 64]
//       [--rounds 4] [--steps 3] [--device cpu|cuda] [--threads 1]
//   tools/bench/ddp_autotune_bench      (ResNet-18 and ResNet-50 on the CPU, a slow link, emulated NCCL)
// Last line: `bench ddp_autotune: model=M auto_vs_best=R auto_vs_default=R chosen_mb=X best_mb=Y`, where
// auto_vs_best = auto's step / the fastest fixed cap's, auto_vs_default = auto's / 25 MB's (under 1:
// faster), chosen_mb auto's cap (its first bucket in the table).
#include <algorithm>
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
#include "cuda/api.h"
#include "models/zoo.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember;

struct Config {
  double cap_mb;  // kAuto for auto
  std::shared_ptr<parallel::DistributedDataParallel> ddp;
  std::unique_ptr<optim::SGD> optimizer;
  std::vector<double> steps;
};

std::string flag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

void step(Config& c, const Tensor& images, const Tensor& labels, bool record) {
  const double start = bench::now_seconds();
  c.optimizer->zero_grad();
  cross_entropy(c.ddp->forward(images), labels).backward();
  c.optimizer->step();
  if (c.ddp->device().is_cuda()) cuda::synchronize(c.ddp->device().index);
  if (record) c.steps.push_back(bench::now_seconds() - start);
}

double slowest(comm::ProcessGroup& world, double seconds, Device device) {
  Tensor t = tensor(std::vector<double>{seconds}).to(device);
  world.all_reduce(t, comm::ReduceOp::Max)->wait();
  return t.to(kCPU).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model_name = flag(argc, argv, "--model", "resnet18");
  const int64_t batch = std::atoll(flag(argc, argv, "--batch", "64").c_str());
  const int rounds = std::atoi(flag(argc, argv, "--rounds", "4").c_str());
  const int steps = std::atoi(flag(argc, argv, "--steps", "3").c_str());
  cpu::set_num_threads(std::atoi(flag(argc, argv, "--threads", "1").c_str()));
  auto world = comm::init();
  const int rank = world->rank();
  const bool cuda = flag(argc, argv, "--device", "cpu") == "cuda";
  const Device device = cuda ? Device(kCUDA, comm::read_environment().local_rank) : Device(kCPU);

  std::vector<Config> configs;
  for (double cap : {1.0, 5.0, 10.0, 25.0, 50.0, 100.0, parallel::kAuto}) {
    Config c{cap};
    manual_seed(0);
    auto model = models::make_model(model_name, 3, 32, 10);
    model->to(device);
    model->train();
    parallel::DDPOptions options;
    options.bucket_cap_mb = cap;
    c.ddp = std::make_shared<parallel::DistributedDataParallel>(model, world, options);
    c.optimizer = std::make_unique<optim::SGD>(c.ddp->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    configs.push_back(std::move(c));
  }
  manual_seed(100 + rank);
  const Tensor images = randn({batch, 3, 32, 32}).to(device);
  const Tensor labels = randint(0, 10, {batch}).to(device);
  // Three untimed steps each; auto's go on until its trials have chosen (every rank alike).
  for (Config& c : configs)
    for (int s = 0; s < 3 || (c.cap_mb == parallel::kAuto && !c.ddp->reducer().bucket_choice() && s < 60); ++s)
      step(c, images, labels, false);
  for (int round = 0; round < rounds; ++round)
    for (Config& c : configs)
      for (int s = 0; s < steps; ++s) step(c, images, labels, true);

  std::vector<double> ms;
  for (Config& c : configs) ms.push_back(1e3 * slowest(*world, bench::median(c.steps), device));
  if (rank != 0) return 0;
  const parallel::BucketChoice* choice = configs.back().ddp->reducer().bucket_choice();
  const double chosen = choice ? choice->cap_mb : -1, chosen_first = choice ? choice->first_mb : -1;
  int64_t gradient_bytes = 0;
  for (const Tensor& p : configs.front().ddp->parameters()) gradient_bytes += static_cast<int64_t>(p.nbytes());
  std::printf(
      "ddp_autotune: %s (%.1f MB of gradients), %d ranks on %s, batch %lld per rank, %d threads each, median "
      "of %d steps, slowest rank\n",
      model_name.c_str(), gradient_bytes / 1048576.0, world->size(), cuda ? "cuda" : "cpu",
      static_cast<long long>(batch), cpu::num_threads(), rounds * steps);
  std::printf("%-22s %8s %10s %12s\n", "buckets", "count", "step ms", "vs default");
  size_t best = 0;
  const double standard = ms[3];
  for (size_t i = 0; i < configs.size(); ++i) {
    const bool is_auto = configs[i].cap_mb == parallel::kAuto;
    char name[64];
    if (is_auto)
      std::snprintf(name, sizeof name, "auto (first %g, cap %g)", chosen_first, chosen);
    else
      std::snprintf(name, sizeof name, "cap %g MB%s", configs[i].cap_mb, configs[i].cap_mb == 25 ? " (default)" : "");
    std::printf("%-22s %8zu %10.1f %12.3f\n", name, configs[i].ddp->reducer().bucket_count(), ms[i], ms[i] / standard);
    if (!is_auto && ms[i] < ms[best]) best = i;
  }
  if (choice) std::printf("auto's measurements (rank 0): %s\n", choice->report().c_str());
  std::printf("bench ddp_autotune: model=%s auto_vs_best=%.3f auto_vs_default=%.3f chosen_mb=%g best_mb=%g\n",
              model_name.c_str(), ms.back() / ms[best], ms.back() / standard, chosen, configs[best].cap_mb);
  return 0;
}

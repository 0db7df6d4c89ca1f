// Sharded data parallelism next to DDP, under mpirun (CPU, one thread per rank): ResNet-18 (CIFAR
// stem), batch 32 of synthetic 3x32x32 per rank, cross-entropy, SGD (lr 0.05, momentum 0.9).
// Five configurations, each its own model (same initial weights) and optimizer, measured in
// alternating rounds so that load hits all alike:
//   ddp                DistributedDataParallel, default buckets;
//   stage1 / stage2    ShardedDataParallel stage 1 / 2, default buckets;
//   stage3             stage 3, one unit per BasicBlock, prefetch on;
//   stage3_noprefetch  the same without prefetch.
// Step = zero_grad + forward + loss + backward + optimizer step, timed per rank; a configuration's
// step is its slowest rank's median. Memory per rank, from the CPU allocator's counts:
//   resident  bytes the configuration holds between steps (model, shards, gradients, optimizer
//             state, buckets): the growth of allocated bytes from before building it to after
//             its warm-up steps;
//   peak      resident plus the most the step allocates on top (allocator peak during a step);
//   state / grads / params   counted from the tensors: optimizer state, gradients kept between
//             steps (DDP's .grad; the shards' .grad and buckets), parameters kept between steps
//             (DDP's; the shards and any full parameter left gathered).
// With --checkpoint-dir DIR, then the training stall of a sharded checkpoint of stage 2 (its
// shards and momentum, every rank writing its own file under DIR; fsynced, as always): a
// synchronous save_sharded_checkpoint, against AsyncShardedCheckpoint's save() (the copy to host
// memory) plus its wait() after --steps steps, which the writer thread overlapped; and those
// steps' time against the same steps without a writer.
// --fit MODE (ddp or stage3) instead trains a 8-layer MLP of 2048-wide Linear layers (33.6M
// parameters) with Adam for 2 steps under a CPU allocator limit of --limit-mb (default 400) MB
// per rank above what the process held before: with 2 ranks DDP needs about 16 bytes per
// parameter (540 MB) and stage 3 about 8 (270 MB) plus one gathered layer.
//
//   mpirun -np 2 --bind-to core bazel-out/k8-opt/bin/tools/bench/sharded [--rounds R] [--steps S]
//   mpirun -np 2 bazel-out/k8-opt/bin/tools/bench/sharded --fit ddp       (raises out of memory)
//   tools/bench/sharded_bench       (all three launches, and the summary line)
// Last line: `bench sharded_steps: ...` or `bench sharded_fit: mode=M fits=1`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/init.h"
#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "models/zoo.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/ddp.h"
#include "parallel/sharded_checkpoint.h"
#include "parallel/sharded_data_parallel.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember;
using bench::median;
using bench::now_seconds;

constexpr int64_t kBatch = 32;

struct Config {
  std::string name;
  std::shared_ptr<nn::Module> model;  // the wrapper
  std::shared_ptr<parallel::DistributedDataParallel> ddp;
  std::shared_ptr<parallel::ShardedDataParallel> sharded;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<double> step_seconds;
  int64_t resident = 0, step_extra = 0;
};

int64_t allocated() { return cpu::cpu_memory_stats().allocated_bytes; }

Config make_config(const std::string& name, const std::shared_ptr<comm::ProcessGroup>& world, int stage,
                   bool prefetch) {
  Config c{name};
  manual_seed(0);
  auto model = models::make_model("resnet18", 3, 32, 10);
  model->train();
  if (stage == 0) {
    c.ddp = std::make_shared<parallel::DistributedDataParallel>(model, world);
    c.model = c.ddp;
  } else {
    parallel::ShardingOptions options = parallel::ShardingOptions().stage(stage).prefetch(prefetch);
    if (stage == 3) options.wrap_module_types({"BasicBlock"});
    c.sharded = std::make_shared<parallel::ShardedDataParallel>(model, world, options);
    c.model = c.sharded;
  }
  c.optimizer = std::make_unique<optim::SGD>(c.model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  return c;
}

void train_step(Config& c, const Tensor& images, const Tensor& labels, bool record) {
  const double start = now_seconds();
  c.optimizer->zero_grad();
  Tensor loss = cross_entropy(c.model->forward(images), labels);
  loss.backward();
  c.optimizer->step();
  if (record) c.step_seconds.push_back(now_seconds() - start);
}

struct Counted {
  int64_t state = 0, grads = 0, params = 0;
};

Counted counted(const Config& c) {
  Counted n;
  for (const Tensor& p : c.optimizer->parameters())
    if (const optim::ParamState* st = c.optimizer->find_state(p))
      for (auto& [name, t] : st->tensors) n.state += t.nbytes();
  if (c.sharded) {
    parallel::ShardedMemory m = c.sharded->memory();
    n.grads = m.shard_grads + m.gradient_buckets;
    n.params = m.shards + m.full_parameters;
  } else {
    for (const Tensor& p : c.ddp->parameters()) {
      n.params += p.nbytes();
      if (p.grad().defined()) n.grads += p.grad().nbytes();
    }
    for (size_t b = 0; b < c.ddp->reducer().bucket_count(); ++b) n.grads += c.ddp->reducer().bucket_buffer(b).nbytes();
  }
  return n;
}

double max_over_ranks(comm::ProcessGroup& world, double value) {
  Tensor t = full({1}, value, TensorOptions(kFloat64));
  world.all_reduce(t, comm::ReduceOp::Max)->wait();
  return t.data_ptr<double>()[0];
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

std::string string_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return "";
}

int fit(const std::shared_ptr<comm::ProcessGroup>& world, const std::string& mode, int limit_mb) {
  EMBER_CHECK(mode == "ddp" || mode == "stage3", "sharded: --fit takes ddp or stage3, got '", mode, "'");
  cpu::set_cpu_memory_limit(allocated() + (int64_t(limit_mb) << 20));
  manual_seed(0);
  auto mlp = std::make_shared<nn::SequentialImpl>();
  for (int i = 0; i < 8; ++i) mlp->push_back(nn::Linear(2048, 2048));
  std::shared_ptr<nn::Module> model;
  if (mode == "ddp")
    model = std::make_shared<parallel::DistributedDataParallel>(mlp, world);
  else
    model = std::make_shared<parallel::ShardedDataParallel>(mlp, world, parallel::ShardingOptions().stage(3));
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-4));
  Tensor x = randn({8, 2048});
  for (int step = 0; step < 2; ++step) {
    adam.zero_grad();
    model->forward(x).square().mean().backward();
    adam.step();
  }
  const double peak = max_over_ranks(*world, static_cast<double>(cpu::cpu_memory_stats().peak_allocated_bytes));
  if (world->rank() == 0) {
    std::printf("%s trained 2 steps of a 33.6M-parameter MLP with Adam under a %d MB limit per rank (peak %.0f MB)\n",
                mode.c_str(), limit_mb, peak / (1 << 20));
    std::printf("bench sharded_fit: mode=%s fits=1\n", mode.c_str());
  }
  return 0;
}

struct CheckpointStall {
  double sync_ms = 0, async_ms = 0;               // the training thread's stall per save
  double step_ms = 0, step_while_writing_ms = 0;  // a step's median without and with the writer running
  double file_mb = 0;                             // this rank's file
};

CheckpointStall measure_checkpoints(comm::ProcessGroup& world, Config& c, const std::string& dir, const Tensor& images,
                                    const Tensor& labels, int rounds, int steps) {
  std::vector<double> sync, async, plain, writing;
  auto timed_steps = [&](std::vector<double>& into) {
    for (int i = 0; i < steps; ++i) {
      const double t = now_seconds();
      train_step(c, images, labels, false);
      into.push_back(now_seconds() - t);
    }
  };
  for (int r = 0; r < rounds; ++r) {
    world.barrier()->wait();
    timed_steps(plain);
    world.barrier()->wait();
    double t = now_seconds();
    parallel::save_sharded_checkpoint(dir + "/sync", *c.sharded, c.optimizer.get(), nullptr, {});
    sync.push_back(now_seconds() - t);
    world.barrier()->wait();
    parallel::AsyncShardedCheckpoint writer(*c.sharded);
    t = now_seconds();
    writer.save(dir + "/async", c.optimizer.get(), nullptr, {});
    double stall = now_seconds() - t;
    timed_steps(writing);
    t = now_seconds();
    writer.wait();
    async.push_back(stall + now_seconds() - t);
  }
  CheckpointStall out;
  out.sync_ms = max_over_ranks(world, 1e3 * median(sync));
  out.async_ms = max_over_ranks(world, 1e3 * median(async));
  out.step_ms = max_over_ranks(world, 1e3 * median(plain));
  out.step_while_writing_ms = max_over_ranks(world, 1e3 * median(writing));
  int64_t bytes = 0;
  for (const parallel::LocalShard& s : c.sharded->local_shards()) bytes += 2 * s.local.numel() * 4;  // + momentum
  out.file_mb = max_over_ranks(world, bytes / 1048576.0);
  return out;
}

int run(int argc, char** argv) {
  cpu::set_num_threads(1);
  auto world = comm::init();
  const std::string fit_mode = string_flag(argc, argv, "--fit");
  if (!fit_mode.empty()) return fit(world, fit_mode, int_flag(argc, argv, "--limit-mb", 400));
  const int rounds = int_flag(argc, argv, "--rounds", 4), steps = int_flag(argc, argv, "--steps", 3),
            warmup = int_flag(argc, argv, "--warmup", 2);
  const int rank = world->rank(), ranks = world->size();

  Generator generator(1000 + rank);
  Tensor images = randn({kBatch, 3, 32, 32}, {}, &generator);
  Tensor labels = randint(0, 10, {kBatch}, TensorOptions(kInt64), &generator);

  std::vector<Config> configs;
  struct Spec {
    const char* name;
    int stage;
    bool prefetch;
  };
  std::vector<Spec> specs = {Spec{"ddp", 0, true}, Spec{"stage1", 1, true}, Spec{"stage2", 2, true},
                             Spec{"stage3", 3, true}, Spec{"stage3_noprefetch", 3, false}};
  // --prefetch-only: stage 3 with and without prefetch, nothing else (for a slow link, where the
  // other configurations would only add time).
  const bool prefetch_only = has_flag(argc, argv, "--prefetch-only");
  if (prefetch_only) specs = {specs[3], specs[4]};
  for (Spec spec : specs) {
    const int64_t before = allocated();
    configs.push_back(make_config(spec.name, world, spec.stage, spec.prefetch));
    Config& c = configs.back();
    for (int i = 0; i < warmup; ++i) train_step(c, images, labels, false);
    c.resident = allocated() - before;
    const int64_t at_start = allocated();
    cpu::reset_cpu_peak_memory();
    train_step(c, images, labels, false);
    c.step_extra = cpu::cpu_memory_stats().peak_allocated_bytes - at_start;
  }
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(r + k) % configs.size()];
      world->barrier()->wait();
      for (int i = 0; i < steps; ++i) train_step(c, images, labels, true);
    }

  const std::string checkpoint_dir = prefetch_only ? "" : string_flag(argc, argv, "--checkpoint-dir");
  CheckpointStall stall;
  if (!checkpoint_dir.empty())
    stall = measure_checkpoints(*world, configs[2], checkpoint_dir, images, labels, rounds, steps);

  struct Row {
    double step_ms, resident_mb, peak_mb;
    Counted bytes;
  };
  std::vector<Row> rows;
  for (Config& c : configs) {
    Counted n = counted(c);
    rows.push_back({max_over_ranks(*world, 1e3 * median(c.step_seconds)),
                    max_over_ranks(*world, c.resident / 1048576.0),
                    max_over_ranks(*world, (c.resident + c.step_extra) / 1048576.0),
                    {static_cast<int64_t>(max_over_ranks(*world, static_cast<double>(n.state))),
                     static_cast<int64_t>(max_over_ranks(*world, static_cast<double>(n.grads))),
                     static_cast<int64_t>(max_over_ranks(*world, static_cast<double>(n.params)))}});
  }
  if (rank != 0) return 0;
  std::printf(
      "ResNet-18 (CIFAR stem) training: %d ranks x batch %lld, 3x32x32, fp32, 1 thread per rank, SGD momentum 0.9; "
      "%d rounds x %d steps per configuration, alternating; memory per rank (the larger rank's)\n",
      ranks, static_cast<long long>(kBatch), rounds, steps);
  std::printf("%-18s %9s %8s %12s %9s %10s %10s %10s\n", "configuration", "step_ms",
              prefetch_only ? "vs_stage3" : "vs_ddp", "resident_MB", "peak_MB", "state_MB", "grads_MB", "params_MB");
  for (size_t i = 0; i < configs.size(); ++i)
    std::printf("%-18s %9.1f %8.3f %12.1f %9.1f %10.1f %10.1f %10.1f\n", configs[i].name.c_str(), rows[i].step_ms,
                rows[i].step_ms / rows[0].step_ms, rows[i].resident_mb, rows[i].peak_mb,
                rows[i].bytes.state / 1048576.0, rows[i].bytes.grads / 1048576.0, rows[i].bytes.params / 1048576.0);
  if (prefetch_only) {
    std::printf("bench sharded_prefetch: stage3_ms=%.1f stage3_noprefetch_ms=%.1f stage3_prefetch_gain=%.3f\n",
                rows[0].step_ms, rows[1].step_ms, rows[1].step_ms / rows[0].step_ms);
    return 0;
  }
  if (!checkpoint_dir.empty())
    std::printf(
        "checkpoint of stage 2 (%.1f MB per rank: shards + momentum), median of %d: synchronous save %.1f ms; "
        "asynchronous save() + wait() %.1f ms, the %d steps between them %.1f ms each (%.1f ms without a writer)\n",
        stall.file_mb, rounds, stall.sync_ms, stall.async_ms, steps, stall.step_while_writing_ms, stall.step_ms);
  const Row &ddp = rows[0], &s1 = rows[1], &s2 = rows[2], &s3 = rows[3], &s3n = rows[4];
  std::printf(
      "bench sharded_steps: stage1_vs_ddp=%.3f stage2_vs_ddp=%.3f stage3_vs_ddp=%.3f stage3_prefetch_gain=%.3f "
      "stage1_state_ratio=%.3f stage2_grad_ratio=%.3f stage3_param_ratio=%.3f async_save_stall_ratio=%.3f "
      "ddp_peak_mb=%.1f stage3_peak_mb=%.1f\n",
      s1.step_ms / ddp.step_ms, s2.step_ms / ddp.step_ms, s3.step_ms / ddp.step_ms, s3n.step_ms / s3.step_ms,
      static_cast<double>(s1.bytes.state) / ddp.bytes.state, static_cast<double>(s2.bytes.grads) / ddp.bytes.grads,
      static_cast<double>(s3.bytes.params) / ddp.bytes.params, stall.sync_ms > 0 ? stall.async_ms / stall.sync_ms : 0.0,
      ddp.peak_mb, s3.peak_mb);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ember::Error& e) {
    // --fit ddp ends here by design; the launcher names the rank that stopped.
    std::fprintf(stderr, "sharded: %s\n", e.what());
    return 1;
  }
}

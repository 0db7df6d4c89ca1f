// DDP's state and buffers under mpirun: rank 0's checkpoint of a trained DDP model restores a
// bare single-process model (same outputs, no "module." keys); broadcast_buffers=false leaves
// each rank's BatchNorm statistics alone; SyncBatchNorm inside DDP trains like BatchNorm on the
// whole batch in one process; a GradScaler bound to DDP skips on every rank when one rank's
// gradients overflow, and its no_sync accumulation trains like one process. DDP models run on
// rank_device(); bare and reference models on the CPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>
#include <optional>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/amp/grad_scaler.h"
#include "nn/checkpoint.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp.h"
#include "parallel/grad_scaler_sync.h"
#include "parallel/sync_batch_norm.h"
#include "tests/parallel/ddp_helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Every rank's copy of `t` holds the same values.
bool same_on_every_rank(comm::ProcessGroup& world, const Tensor& t) {
  Tensor gathered = empty({world.size() * t.numel()}, TensorOptions(t.dtype()).device(t.device()));
  world.all_gather_into_tensor(gathered, t.contiguous())->wait();
  Tensor mine = t.contiguous().reshape({-1});
  for (int r = 0; r < world.size(); ++r)
    if ((gathered.narrow(0, r * t.numel(), t.numel()) - mine).abs().amax().item<double>() != 0.0) return false;
  return true;
}

void train_steps(nn::Module& model, optim::Optimizer& optimizer, const Batch& batch, int steps) {
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    loss_of(model, batch).backward();
    optimizer.step();
  }
}

}  // namespace

TEST_CASE("rank 0's checkpoint of a trained DDP model restores a bare model", "[ddp][checkpoint]") {
  auto world = comm::init();
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_cnn(100 + world->rank())), world);
  optim::SGD optimizer(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Batch data = make_batch(16, 71);
  train_steps(*ddp, optimizer, data.rank_shard(world->rank(), world->size()), 3);

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/ddp_checkpoint.safetensors";
  if (world->rank() == 0) {
    nn::TrainingState state;
    state.step = 3;
    nn::save_checkpoint(path, *ddp, &optimizer, nullptr, state);
  }
  world->barrier()->wait();

  // The file's model keys are the bare module's, under the checkpoint's "model." section.
  SafetensorsFile file = load_safetensors(path);
  size_t model_keys = 0;
  for (auto& [name, t] : file.tensors) {
    INFO(name);
    REQUIRE(name.find("module.") == std::string::npos);
    if (name.rfind("model.", 0) == 0) ++model_keys;
  }
  REQUIRE(model_keys == ddp->state_dict().size());
  REQUIRE(file.find("model.conv1.weight") != nullptr);
  REQUIRE(file.find("model.bn1.running_mean") != nullptr);

  // Rank 0's DDP model (the others' batch-norm statistics followed their own last shard) is what
  // every rank's bare copy (on the CPU) must reproduce.
  Batch probe = make_batch(6, 72);
  ddp->eval();
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = ddp->forward(probe.x.to(rank_device()));
  }
  world->broadcast(expected, 0)->wait();
  ddp->sync_buffers();  // now every rank's DDP model is rank 0's
  {
    NoGradGuard no_grad;
    REQUIRE((ddp->forward(probe.x.to(rank_device())) - expected).abs().amax().item<double>() == 0.0);
  }
  // Weights only (evaluation), and a full resume with the optimizer.
  auto bare = make_cnn(5);
  nn::load_model_weights(path, *bare);
  auto resumed = make_cnn(6);
  optim::SGD resumed_optimizer(resumed->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  nn::TrainingState state = nn::load_checkpoint(path, *resumed, &resumed_optimizer, nullptr);
  REQUIRE(state.step == 3);
  for (auto* model : {bare.get(), resumed.get()}) {
    model->eval();
    NoGradGuard no_grad;
    // Exact on the device the checkpoint was made on; float32 kernels may round differently elsewhere.
    require_close(model->forward(probe.x), expected, rank_device().is_cpu() ? 0.0 : 1e-5, "restored output");
  }
  // The resumed optimizer continues exactly where the DDP run's did (momentum included).
  ddp->train();
  resumed->train();
  Batch next = make_batch(16, 73);
  train_steps(*ddp, optimizer, next.rank_shard(world->rank(), world->size()), 1);
  resumed_optimizer.zero_grad();
  for (int r = 0; r < world->size(); ++r)
    (loss_of(*resumed, next.shard(r, world->size())) * (1.0 / world->size())).backward();
  resumed_optimizer.step();
  require_same_parameters(*ddp, *resumed, 1e-5);
}

TEST_CASE("broadcast_buffers=false leaves each rank's batch-norm statistics its own", "[ddp][buffers]") {
  auto world = comm::init();
  if (world->size() < 2) return;
  parallel::DDPOptions options;
  options.broadcast_buffers = false;
  auto model = on_rank_device(make_cnn(8));
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(model, world, options);
  Tensor running_mean = *model->find_child("bn1")->find_buffer("running_mean");
  REQUIRE(same_on_every_rank(*world, running_mean));  // construction still broadcasts
  Batch data = make_batch(8, 81);
  for (int step = 0; step < 2; ++step) sgd_step(*ddp, data.rank_shard(world->rank(), world->size()), 0.1);
  // Each rank's statistics follow its own shard; the parameters still agree.
  REQUIRE_FALSE(same_on_every_rank(*world, running_mean));
  for (const Tensor& p : ddp->parameters()) REQUIRE(same_on_every_rank(*world, p));
  // With the default, the next forward brings rank 0's statistics back.
  auto synced = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_cnn(8)), world);
  Tensor synced_mean = *synced->module()->find_child("bn1")->find_buffer("running_mean");
  for (int step = 0; step < 2; ++step) sgd_step(*synced, data.rank_shard(world->rank(), world->size()), 0.1);
  synced->pre_forward();
  REQUIRE(same_on_every_rank(*world, synced_mean));
}

TEST_CASE("SyncBatchNorm inside DDP trains like batch norm on the whole batch", "[ddp][sync_bn]") {
  auto world = comm::init();
  auto sync = on_rank_device(make_cnn(9));
  REQUIRE(parallel::convert_sync_batchnorm(*sync, world) == 1);
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(sync, world);
  auto expected = make_cnn(9);
  Batch data = make_batch(8, 91);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    sgd_step(*ddp, data.rank_shard(world->rank(), world->size()), 0.1);
    sgd_step(*expected, data, 0.1);
    require_same_parameters(*ddp, *expected, 1e-4);
  }
  auto got = ddp->named_buffers(), want = expected->named_buffers();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) require_close(got[i].second, want[i].second, 1e-4, got[i].first);
}

TEST_CASE("a GradScaler bound to DDP skips on every rank when one rank's unsynced grads overflow", "[ddp][amp]") {
  auto world = comm::init();
  if (world->size() < 2) return;
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_mlp(5)), world);
  optim::SGD optimizer(ddp->parameters(), optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  parallel::sync_grad_scaler(scaler, *ddp);
  Batch data = make_batch(8, 31);
  // Accumulated under no_sync, the gradients stay each rank's own; the last rank's overflows.
  {
    auto guard = ddp->no_sync();
    scaler.scale(loss_of(*ddp, data.rank_shard(world->rank(), world->size()))).backward();
  }
  if (world->rank() == world->size() - 1) {
    NoGradGuard no_grad;
    ddp->parameters()[1].grad().narrow(0, 3, 1).fill_(std::numeric_limits<double>::infinity());
  }
  std::vector<Tensor> before;
  for (const Tensor& p : ddp->parameters()) before.push_back(p.clone());
  REQUIRE_FALSE(scaler.step(optimizer));
  scaler.update();
  REQUIRE(scaler.get_scale() == 32768.0f);
  for (size_t i = 0; i < before.size(); ++i)
    REQUIRE((ddp->parameters()[i] - before[i]).abs().amax().item<double>() == 0.0);
  // The next, synced step is clean everywhere and taken everywhere.
  optimizer.zero_grad();
  scaler.scale(loss_of(*ddp, data.rank_shard(world->rank(), world->size()))).backward();
  REQUIRE(scaler.step(optimizer));
  scaler.update();
  for (const Tensor& p : ddp->parameters()) REQUIRE(same_on_every_rank(*world, p));
}

TEST_CASE("no_sync accumulation under a GradScaler trains like one process, skips included", "[ddp][amp]") {
  auto world = comm::init();
  const int ranks = world->size(), rank = world->rank();
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_mlp(6)), world);
  auto expected = make_mlp(6);
  optim::SGD optimizer(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD expected_optimizer(expected->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const amp::GradScalerOptions options = amp::GradScalerOptions().growth_interval(1);
  amp::GradScaler scaler(options), expected_scaler(options);
  parallel::sync_grad_scaler(scaler, *ddp);
  constexpr int kMicro = 2;
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    optimizer.zero_grad();
    expected_optimizer.zero_grad();
    for (int micro = 0; micro < kMicro; ++micro) {
      Batch batch = make_batch(8, 40 + step * kMicro + micro);
      // Step 1: an inf in rank 0's shard of a micro-batch inside no_sync; the synced backward
      // carries it to every rank, as one process meets it in its batch.
      if (step == 1 && micro == 0) batch.x.select(0, 0).fill_(std::numeric_limits<double>::infinity());
      {
        std::optional<parallel::DistributedDataParallel::NoSync> guard;
        if (micro < kMicro - 1) guard.emplace(*ddp);
        scaler.scale(loss_of(*ddp, batch.rank_shard(rank, ranks)) * (1.0 / kMicro)).backward();
      }
      for (int r = 0; r < ranks; ++r)
        expected_scaler.scale(loss_of(*expected, batch.shard(r, ranks)) * (1.0 / (kMicro * ranks))).backward();
    }
    const bool stepped = scaler.step(optimizer);
    REQUIRE(stepped == (step != 1));
    REQUIRE(expected_scaler.step(expected_optimizer) == stepped);
    scaler.update();
    expected_scaler.update();
    REQUIRE(scaler.get_scale() == expected_scaler.get_scale());
    REQUIRE(scaler.growth_tracker() == expected_scaler.growth_tracker());
    require_same_parameters(*ddp, *expected, 1e-5);
  }
  REQUIRE(scaler.get_scale() == 131072.0f);  // doubled after steps 0 and 2, halved at step 1
}

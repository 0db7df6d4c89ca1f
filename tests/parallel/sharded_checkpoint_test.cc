// Sharded checkpoints under mpirun (N = 2, 3 or 4 ranks): saved by N ranks and loaded by every
// smaller group (sub-groups of the same job), by one process into a bare model, and by N ranks
// from a checkpoint a smaller group saved; the step after each load is compared with the step the
// saving run took next. Plus saves that fail or die part way, and asynchronous saves.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/amp/grad_scaler.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/replica_sync.h"
#include "parallel/sharded_checkpoint.h"
#include "parallel/sharded_data_parallel.h"
#include "tests/parallel/ddp_helpers.h"
#include "tests/parallel/odd_shapes.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kGlobalBatch = 12;  // divides among 1, 2, 3 and 4 ranks

std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return (fs::path(tmp ? tmp : "/tmp") / name).string();
}

// A sharded run: the model, AdamW over its shards, a step schedule that halves the rate every
// two steps, and a scaler whose state travels in the checkpoint.
struct Run {
  Run(std::shared_ptr<comm::ProcessGroup> group, int stage, uint64_t seed)
      : group(group),
        model(std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_odd(seed)), group,
                                                              parallel::ShardingOptions().stage(stage))),
        optimizer(model->parameters(), optim::AdamWOptions(0.01).weight_decay(0.05)),
        schedule(optimizer, 2, 0.5),
        scaler(amp::GradScalerOptions().init_scale(1024.0 * (seed % 7 + 1))) {}

  // One step on this rank's part of the global batch. Batch norm in training mode normalises
  // each rank's part by its own statistics, so only in eval mode (the running statistics) is a
  // step the same function of the global batch at every world size, once every rank holds rank
  // 0's statistics (which the checkpoint keeps).
  void step(const Batch& data, bool training = true) {
    model->train(training);
    if (!training) model->sync_buffers();
    optimizer.zero_grad();
    loss_of(*model, data.rank_shard(group->rank(), group->size())).backward();
    optimizer.step();
    schedule.step();
  }

  std::shared_ptr<comm::ProcessGroup> group;
  std::shared_ptr<parallel::ShardedDataParallel> model;
  optim::AdamW optimizer;
  optim::StepLR schedule;
  amp::GradScaler scaler;
};

void require_equal(const NamedTensors& a, const NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(a[i].first == b[i].first);
    REQUIRE(a[i].second.sizes() == b[i].second.sizes());
    REQUIRE(a[i].second.to_vector<double>() == b[i].second.to_vector<double>());
  }
}

// After resharding, the loss and gradients are summed over another split of the same global
// batch, which rounds differently; one AdamW step keeps that within 1e-5 of the saving run's.
void require_close_states(const NamedTensors& a, const NamedTensors& b, double rtol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == b[i].first);
    require_close(a[i].second, b[i].second, rtol, a[i].first);
  }
}

// A copy: state_dict() hands out the live buffers, which training goes on updating.
NamedTensors snapshot(const NamedTensors& state) {
  NamedTensors out;
  for (const auto& [name, t] : state) out.emplace_back(name, t.detach().clone());
  return out;
}

// What a checkpoint of `model` holds: its parameters, and rank 0's buffers, which the next
// training forward would have broadcast anyway. Collective.
NamedTensors checkpointed(parallel::ShardedDataParallel& model) {
  model.sync_buffers();
  return snapshot(model.state_dict());
}

std::vector<int> first_ranks(int n) {
  std::vector<int> ranks(n);
  for (int r = 0; r < n; ++r) ranks[r] = r;
  return ranks;
}

}  // namespace

TEST_CASE("saved by N ranks, loaded by 1..N ranks and by a bare model; the next step matches the saving run's",
          "[sharded][checkpoint][reshard]") {
  auto world = comm::init();
  const int rank = world->rank(), ranks = world->size();
  const std::string dir = scratch("reshard");
  Batch data = make_batch(kGlobalBatch, 31);

  // The saving run: fully sharded at N ranks, three steps, a checkpoint, then the reference step.
  Run saver(world, 3, 7);
  for (int s = 0; s < 3; ++s) saver.step(data);
  nn::TrainingState state{1, 3, 1, 3};
  state.extra.set("best", json::Value::number(0.25));
  parallel::save_sharded_checkpoint(dir, *saver.model, &saver.optimizer, &saver.schedule, state, &default_generator(),
                                    &saver.scaler);
  REQUIRE(parallel::is_sharded_checkpoint(dir));
  const NamedTensors saved = checkpointed(*saver.model);
  saver.step(data, false);
  const NamedTensors reference = snapshot(saver.model->state_dict());
  const double reference_lr = saver.schedule.get_last_lr()[0];

  // Every group of the first M ranks, each with another stage and other starting weights.
  for (int m = 1; m <= ranks; ++m) {
    auto group = world->new_group(first_ranks(m));
    if (group) {
      const int stage = m == ranks ? 3 : 1 + m % 3;
      INFO("loaded by " << m << " of " << ranks << " ranks at stage " << stage);
      Run loader(group, stage, 99);
      nn::TrainingState got = parallel::load_sharded_checkpoint(dir, *loader.model, &loader.optimizer, &loader.schedule,
                                                                &default_generator(), &loader.scaler);
      REQUIRE(got.epoch == 1);
      REQUIRE(got.step == 3);
      REQUIRE(got.loader_batches == 3);
      REQUIRE(got.extra.find("best")->as_double() == 0.25);
      REQUIRE(loader.scaler.get_scale() == saver.scaler.get_scale());
      require_equal(loader.model->state_dict(), saved);
      loader.step(data, false);
      REQUIRE(loader.schedule.get_last_lr()[0] == reference_lr);
      // The same size and stage reduce in the same order: the step is the saving run's, bit for bit.
      if (m == ranks)
        require_equal(loader.model->state_dict(), reference);
      else
        require_close_states(loader.model->state_dict(), reference, 1e-5);
    }
    world->barrier()->wait();
  }

  // One process, a bare model and an optimizer over its own parameters: the whole batch.
  if (rank == 0) {
    auto bare = on_rank_device(make_odd(99));
    optim::AdamW optimizer(bare->parameters(), optim::AdamWOptions(0.01).weight_decay(0.05));
    optim::StepLR schedule(optimizer, 2, 0.5);
    nn::TrainingState got = parallel::load_sharded_checkpoint(dir, *bare, &optimizer, &schedule);
    REQUIRE(got.step == 3);
    require_equal(bare->state_dict(), saved);
    bare->eval();
    optimizer.zero_grad();
    loss_of(*bare, data.to(rank_device())).backward();
    optimizer.step();
    require_close_states(bare->state_dict(), reference, 1e-5);
  }
  world->barrier()->wait();

  // Saved by a smaller group (2 of 4, 1 of 2 or 3), loaded by all N.
  const int small = std::max(1, ranks / 2);
  const std::string small_dir = scratch("from_small");
  NamedTensors small_saved, small_reference;
  if (auto group = world->new_group(first_ranks(small))) {
    Run run(group, 2, 11);
    for (int s = 0; s < 2; ++s) run.step(data);
    parallel::save_sharded_checkpoint(small_dir, *run.model, &run.optimizer, &run.schedule, {0, 2, 0, 2});
    small_saved = checkpointed(*run.model);
    run.step(data, false);
    small_reference = snapshot(run.model->state_dict());
  }
  world->barrier()->wait();
  Run grown(world, 3, 5);
  REQUIRE(parallel::load_sharded_checkpoint(small_dir, *grown.model, &grown.optimizer, &grown.schedule).step == 2);
  const NamedTensors loaded = snapshot(grown.model->state_dict());
  grown.step(data, false);
  const NamedTensors stepped = grown.model->state_dict();  // collective: every rank
  if (rank < small) {
    require_equal(loaded, small_saved);
    require_close_states(stepped, small_reference, 1e-5);
  }
}

TEST_CASE("a save that fails or dies part way leaves the previous checkpoint the one that loads",
          "[sharded][checkpoint][crash]") {
  auto world = comm::init();
  const int rank = world->rank(), ranks = world->size();
  const std::string dir = scratch("crash");
  Batch data = make_batch(kGlobalBatch, 41);
  Run run(world, 2, 3);
  run.step(data);
  parallel::save_sharded_checkpoint(dir, *run.model, &run.optimizer, &run.schedule, {0, 1, 0, 1});
  const NamedTensors first = checkpointed(*run.model);
  char next[96];
  std::snprintf(next, sizeof(next), "shard-%05d-of-%05d.s2.safetensors", ranks - 1, ranks);

  // A writer killed mid-save leaves its temporary file torn, and other ranks' files of the next
  // serial complete, but no index names them.
  run.step(data);
  if (rank == 0) {
    std::ofstream(fs::path(dir) / next) << "torn";
    std::ofstream(fs::path(dir) / (std::string(next) + ".tmp.1234")) << "torn";
  }
  world->barrier()->wait();
  {
    Run reader(world, 1, 77);
    REQUIRE(parallel::load_sharded_checkpoint(dir, *reader.model, &reader.optimizer, &reader.schedule).step == 1);
    require_equal(reader.model->state_dict(), first);
  }

  // The last rank cannot write (a directory stands where its file goes): every rank raises, naming
  // it, and the first checkpoint still loads.
  world->barrier()->wait();
  if (rank == 0) {
    fs::remove(fs::path(dir) / next);
    fs::create_directories(fs::path(dir) / next / "blocker");
  }
  world->barrier()->wait();
  try {
    parallel::save_sharded_checkpoint(dir, *run.model, &run.optimizer, &run.schedule, {0, 2, 0, 2});
    FAIL("the save should have failed");
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE(what.find("save_sharded_checkpoint") != std::string::npos);
    if (rank == ranks - 1)
      REQUIRE(what.find("could not write") != std::string::npos);
    else
      REQUIRE(what.find("rank(s) " + std::to_string(ranks - 1) + " of " + std::to_string(ranks)) != std::string::npos);
    REQUIRE(what.find("previous checkpoint") != std::string::npos);
  }
  {
    Run reader(world, 3, 78);
    REQUIRE(parallel::load_sharded_checkpoint(dir, *reader.model, &reader.optimizer, &reader.schedule).step == 1);
    require_equal(reader.model->state_dict(), first);
  }

  // Once it can write again, the save lands and the earlier files (and the leftovers) are gone.
  world->barrier()->wait();
  if (rank == 0) fs::remove_all(fs::path(dir) / next);
  world->barrier()->wait();
  parallel::save_sharded_checkpoint(dir, *run.model, &run.optimizer, &run.schedule, {0, 2, 0, 2});
  const NamedTensors second = checkpointed(*run.model);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    INFO(name);
    REQUIRE((name == "index.json" || name.find(".s2.safetensors") != std::string::npos));
    REQUIRE(name.find(".tmp") == std::string::npos);
    ++files;
  }
  REQUIRE(files == ranks + 1);
  Run reader(world, 2, 79);
  REQUIRE(parallel::load_sharded_checkpoint(dir, *reader.model, &reader.optimizer, &reader.schedule).step == 2);
  require_equal(reader.model->state_dict(), second);
}

TEST_CASE("an asynchronous save holds the state of the step that asked for it; one never waited for is not loaded",
          "[sharded][checkpoint][async]") {
  auto world = comm::init();
  const std::string dir = scratch("async");
  Batch data = make_batch(kGlobalBatch, 51);
  Run run(world, 3, 13);
  run.step(data);
  NamedTensors at_first, at_second;
  {
    parallel::AsyncShardedCheckpoint writer(*run.model);
    writer.save(dir, &run.optimizer, &run.schedule, {0, 1, 0, 1});
    REQUIRE(writer.pending());
    at_first = checkpointed(*run.model);
    run.step(data);  // the snapshot was copied: training on changes the shards, not the file
    run.step(data);
    writer.wait();
    REQUIRE_FALSE(writer.pending());
    {
      Run reader(world, 1, 91);
      REQUIRE(parallel::load_sharded_checkpoint(dir, *reader.model, &reader.optimizer, &reader.schedule).step == 1);
      require_equal(reader.model->state_dict(), at_first);
    }
    writer.save(dir, &run.optimizer, &run.schedule, {0, 3, 0, 3});
    at_second = checkpointed(*run.model);
    run.step(data);
    writer.save(dir, &run.optimizer, &run.schedule, {0, 4, 0, 4});  // completes the one before, starts another
    run.step(data);
  }  // dropped unwaited: its files are written, its index is not
  Run reader(world, 2, 92);
  REQUIRE(parallel::load_sharded_checkpoint(dir, *reader.model, &reader.optimizer, &reader.schedule).step == 3);
  require_equal(reader.model->state_dict(), at_second);
}

TEST_CASE("a checkpoint that does not fit the model is refused before anything changes",
          "[sharded][checkpoint][errors]") {
  auto world = comm::init();
  const std::string dir = scratch("mismatch");
  Run run(world, 2, 17);
  parallel::save_sharded_checkpoint(dir, *run.model, &run.optimizer, nullptr, {});
  // Another model: an MLP's names and shapes.
  auto other = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_mlp(3)), world,
                                                               parallel::ShardingOptions().stage(2));
  const NamedTensors before = other->state_dict();
  REQUIRE_THROWS_WITH(parallel::load_sharded_checkpoint(dir, *other, nullptr, nullptr),
                      Catch::Contains("load_sharded_checkpoint") && Catch::Contains("has no parameter"));
  require_equal(other->state_dict(), before);
  // Another optimizer (SGD for the saved AdamW): refused before the parameters change.
  Run sgd_run(world, 2, 18);
  optim::SGD sgd(sgd_run.model->parameters(), optim::SGDOptions(0.1));
  const NamedTensors sgd_before = snapshot(sgd_run.model->state_dict());
  REQUIRE_THROWS_WITH(parallel::load_sharded_checkpoint(dir, *sgd_run.model, &sgd, nullptr),
                      Catch::Contains("the checkpoint holds the state of a \"AdamW\" optimizer, this one is SGD"));
  require_equal(sgd_run.model->state_dict(), sgd_before);
  // Asked for a schedule it does not hold; a directory with no index.
  REQUIRE_THROWS_WITH(parallel::load_sharded_checkpoint(dir, *run.model, &run.optimizer, &run.schedule),
                      Catch::Contains("no LR-schedule state"));
  REQUIRE_THROWS_WITH(parallel::load_sharded_checkpoint(scratch("nowhere"), *run.model, nullptr, nullptr),
                      Catch::Contains("index.json"));
  // A directory rank 0 cannot make (a file stands in its path): every rank raises, none waits.
  if (world->rank() == 0) std::ofstream(scratch("a_file")) << "x";
  world->barrier()->wait();
  REQUIRE_THROWS_WITH(parallel::save_sharded_checkpoint(scratch("a_file") + "/ckpt", *run.model, nullptr, nullptr, {}),
                      Catch::Contains("rank 0 could not create"));
}

// ShardedDataParallel (stages 1 and 2) under mpirun, against DistributedDataParallel on the same
// group: K optimizer steps of each from the same start must give the same parameters, with
// shapes whose rows do not divide among the ranks (2, 3 and 4: some ranks own no rows at all), a
// 0-dim parameter, several bucket layouts, SGD with momentum and weight decay, AdamW, gradient
// accumulation under no_sync, clip_grad_norm_ across shards and 16-bit reduction. Plus the
// counted memory of each stage, the unused-parameter error, and state dicts.
#include <catch2/catch.hpp>

#include "comm/counting_process_group.h"
#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "core/autocast.h"
#include "models/resnet.h"
#include "nn/optim/optim.h"
#include "parallel/ddp.h"
#include "parallel/grad_scaler_sync.h"
#include "parallel/sharded_data_parallel.h"
#include "tests/parallel/ddp_helpers.h"
#include "tests/parallel/odd_shapes.h"

using namespace ember;
using namespace ember::testing;

namespace {

bool same_values(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>();
}

enum class Opt { SgdMomentum, AdamW };

std::unique_ptr<optim::Optimizer> make_optimizer(Opt kind, const std::vector<Tensor>& params) {
  if (kind == Opt::SgdMomentum)
    return std::make_unique<optim::SGD>(params, optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
  return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(0.01).weight_decay(0.05));
}

// The sharded model's full parameters (gathered) against the DDP model's.
void require_same_as_ddp(parallel::ShardedDataParallel& sharded, parallel::DistributedDataParallel& ddp, double rtol) {
  NamedTensors mine = sharded.state_dict(), theirs = ddp.state_dict();
  REQUIRE(mine.size() == theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    REQUIRE(mine[i].first == theirs[i].first);
    require_close(mine[i].second, theirs[i].second, rtol, mine[i].first);
  }
}

}  // namespace

TEST_CASE("dim-0 shards cover every row once, padded to ceil(rows / ranks)", "[sharded][layout]") {
  for (int ranks : {1, 2, 3, 4, 7}) {
    for (Shape shape : {Shape{}, Shape{1}, Shape{5}, Shape{23, 36}, Shape{7, 1, 3, 3}, Shape{0, 4}}) {
      parallel::DimZeroShard s = parallel::DimZeroShard::of(shape, ranks);
      int64_t rows = shape.empty() ? 1 : shape[0], covered = 0;
      for (int r = 0; r < ranks; ++r) {
        INFO("ranks " << ranks << " shape " << shape_str(shape) << " rank " << r);
        REQUIRE(s.begin(r) == covered);
        REQUIRE(s.rows_of(r) >= 0);
        REQUIRE(s.rows_of(r) <= s.chunk_rows);
        covered += s.rows_of(r);
      }
      REQUIRE(covered == rows);
      REQUIRE(s.chunk_rows == (rows + ranks - 1) / ranks);
    }
  }
  // A flat buffer round trip: scatter full tensors into sections, gather them back.
  parallel::ShardedLayout layout({{23, 4}, {}, {3}}, 4);
  std::vector<Tensor> fulls = {randn({23, 4}), randn({}), randn({3})};
  Tensor flat = full({layout.flat_numel()}, 99.0);
  layout.zero_padding(flat);
  for (size_t k = 0; k < fulls.size(); ++k) layout.scatter_full(k, fulls[k], flat);
  REQUIRE(flat.eq(full({}, 99.0)).sum().item<int64_t>() == 0);
  for (size_t k = 0; k < fulls.size(); ++k) {
    Tensor back = empty(fulls[k].sizes());
    layout.gather_full(k, flat, back);
    REQUIRE(same_values(back, fulls[k]));
  }
}

TEST_CASE("stages 1, 2 and 3 take the same steps as DDP (odd shapes, SGD and AdamW, several bucket layouts)",
          "[sharded][equivalence]") {
  auto world = comm::init();
  const int rank = world->rank(), ranks = world->size();
  Batch data = make_batch(4 * ranks, 21);
  // Every stage with each optimizer; stages 1 and 2 with one bucket and with one per parameter or
  // two (stage 3's buckets are its units, whatever the cap).
  struct Config {
    int stage;
    Opt opt;
    double cap_mb;
  };
  for (Config c : {Config{1, Opt::SgdMomentum, 0.0005}, Config{1, Opt::AdamW, 25.0}, Config{2, Opt::SgdMomentum, 25.0},
                   Config{2, Opt::AdamW, 0.0005}, Config{3, Opt::SgdMomentum, 25.0}, Config{3, Opt::AdamW, 25.0}}) {
    const int stage = c.stage;
    const Opt opt = c.opt;
    const double cap_mb = c.cap_mb;
    INFO("stage " << stage << " optimizer " << (opt == Opt::AdamW ? "AdamW" : "SGD") << " bucket_cap_mb " << cap_mb);
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_odd(7 + rank)), world);
    auto sharded = std::make_shared<parallel::ShardedDataParallel>(
        on_rank_device(make_odd(7 + rank)), world, parallel::ShardingOptions().stage(stage).bucket_cap_mb(cap_mb));
    if (cap_mb < 1 || stage == 3) REQUIRE(sharded->bucket_count() >= 3);
    // The optimizer sees this rank's rows only.
    const parallel::DimZeroShard& fc1 = sharded->shard_of("fc1.weight");
    for (auto& [name, p] : sharded->named_parameters())
      if (name == "fc1.weight") REQUIRE(p.sizes() == Shape{fc1.rows_of(rank), 7 * 36});
    auto ddp_opt = make_optimizer(opt, ddp->parameters());
    auto sharded_opt = make_optimizer(opt, sharded->parameters());
    for (int step = 0; step < 4; ++step) {
      Batch mine = Batch{data.x.narrow(0, 4 * rank, 4), data.y.narrow(0, 4 * rank, 4)}.to(rank_device());
      for (auto [model, optimizer] :
           {std::pair<nn::Module*, optim::Optimizer*>{ddp.get(), ddp_opt.get()}, {sharded.get(), sharded_opt.get()}}) {
        optimizer->zero_grad();
        loss_of(*model, mine).backward();
        optimizer->step();
      }
    }
    // Float32 all-reduce and reduce-scatter sum the ranks in orders MPI picks per collective,
    // so the two may round differently in the last bit; 4 steps of Adam keep that near 1e-6.
    require_same_as_ddp(*sharded, *ddp, 1e-6);
  }
}

TEST_CASE("no_sync accumulation and the global clip_grad_norm_ match DDP's", "[sharded][accumulation][clip]") {
  auto world = comm::init();
  const int rank = world->rank();
  Batch data = make_batch(8 * world->size(), 31);
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage);
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_odd(3)), world);
    auto sharded = std::make_shared<parallel::ShardedDataParallel>(
        on_rank_device(make_odd(3)), world, parallel::ShardingOptions().stage(stage).bucket_cap_mb(0.001));
    optim::SGD ddp_opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD sharded_opt(sharded->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < 2; ++step) {
      Batch mine = Batch{data.x.narrow(0, 8 * rank, 8), data.y.narrow(0, 8 * rank, 8)}.to(rank_device());
      Batch first{mine.x.narrow(0, 0, 4), mine.y.narrow(0, 0, 4)},
          second{mine.x.narrow(0, 4, 4), mine.y.narrow(0, 4, 4)};
      ddp_opt.zero_grad();
      sharded_opt.zero_grad();
      {
        auto a = ddp->no_sync();
        loss_of(*ddp, first).backward();
      }
      {
        auto b = sharded->no_sync();
        loss_of(*sharded, first).backward();
        REQUIRE(sharded->memory().shard_grads == 0);  // nothing reduced yet
      }
      loss_of(*ddp, second).backward();
      loss_of(*sharded, second).backward();
      double expected = optim::clip_grad_norm_(ddp->parameters(), 0.05);
      double norm = sharded->clip_grad_norm_(0.05);
      INFO("norm " << norm << " vs DDP's " << expected);
      REQUIRE(expected > 0.05);  // clipping takes effect
      REQUIRE(std::abs(norm - expected) <= 1e-5 * expected);
      ddp_opt.step();
      sharded_opt.step();
    }
    require_same_as_ddp(*sharded, *ddp, 1e-6);
  }
}

TEST_CASE("bf16 reduction stays within bf16 precision of DDP's float32", "[sharded][reduce_dtype]") {
  auto world = comm::init();
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_odd(5)), world);
  auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_odd(5)), world,
                                                                 parallel::ShardingOptions().reduce_dtype(kBFloat16));
  Batch data = make_batch(4, 61).to(rank_device());
  loss_of(*ddp, data).backward();
  loss_of(*sharded, data).backward();
  auto full = ddp->named_parameters();
  auto shards = sharded->named_parameters();
  REQUIRE(full.size() == shards.size());
  for (size_t i = 0; i < full.size(); ++i) {
    const parallel::DimZeroShard& s = sharded->shard_of(shards[i].first);
    Tensor expected = full[i]
                          .second.grad()
                          .reshape({s.rows, s.row_numel})
                          .narrow(0, s.begin(world->rank()), s.rows_of(world->rank()));
    REQUIRE(shards[i].second.grad().dtype() == kFloat32);
    require_close(shards[i].second.grad().reshape({-1}), expected.reshape({-1}), 1.6e-2, shards[i].first);
  }
}

TEST_CASE("counted memory: optimizer state / N in stage 1, gradients / N too in stage 2, parameters in stage 3",
          "[sharded][memory]") {
  auto world = comm::init();
  const int ranks = world->size();
  auto make = [] {
    manual_seed(4);
    return nn::Sequential(nn::Flatten(), nn::Linear(36, 240), nn::ReLU(), nn::Linear(240, 240), nn::ReLU(),
                          nn::Linear(240, 4))
        .ptr();
  };
  int64_t psi = 0;  // bytes of parameters
  for (const Tensor& p : make()->parameters()) psi += p.nbytes();
  Batch data = make_batch(4, 71).to(rank_device());
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage << ", " << ranks << " ranks, parameters " << psi << " bytes");
    auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make()), world,
                                                                   parallel::ShardingOptions().stage(stage));
    optim::Adam adam(sharded->parameters(), optim::AdamOptions(1e-3));
    // Stage 3: what is resident while each unit (each Linear) runs forward.
    int64_t largest_unit = 0, most_resident = 0;
    for (const auto& child : sharded->module()->children()) {
      int64_t bytes = 0;
      for (const Tensor& p : child->parameters()) bytes += p.nbytes();
      largest_unit = std::max(largest_unit, bytes);
      child->register_forward_pre_hook(
          [&](nn::Module&) { most_resident = std::max(most_resident, sharded->memory().full_parameters); });
    }
    loss_of(*sharded, data).backward();
    adam.step();
    auto within = [](int64_t measured, double formula) {
      INFO("measured " << measured << " formula " << formula);
      REQUIRE(std::abs(measured - formula) <= 0.1 * formula);
    };
    int64_t state = 0;
    for (const Tensor& p : adam.parameters())
      if (const optim::ParamState* st = adam.find_state(p))
        for (auto& [name, t] : st->tensors) state += t.nbytes();
    within(state, 2.0 * psi / ranks);  // Adam's two moments, this rank's rows only
    parallel::ShardedMemory m = sharded->memory();
    within(m.shards, 1.0 * psi / ranks);
    within(m.shard_grads, 1.0 * psi / ranks);
    if (stage == 3) {
      REQUIRE(sharded->unit_names().size() == 3);  // the three Linear layers; no parameter is left for the root
      REQUIRE(m.full_parameters == 0);             // nothing gathered between steps
      REQUIRE(most_resident == largest_unit);      // one unit at a time
    } else {
      REQUIRE(m.full_parameters == psi);
    }
    if (stage == 1)
      within(m.gradient_buckets, psi);  // ZeRO-1 keeps full-size gradients
    else
      REQUIRE(m.gradient_buckets == 0);
    for (const Tensor& p : sharded->module()->parameters()) REQUIRE(!p.grad().defined());
  }
}

TEST_CASE("counted communication: stages 1 and 2 move what DDP moves, stage 3 1.5 times that", "[sharded][traffic]") {
  auto world = comm::init();
  auto make = [] {
    manual_seed(6);
    return nn::Sequential(nn::Flatten(), nn::Linear(36, 240), nn::ReLU(), nn::Linear(240, 120), nn::ReLU(),
                          nn::Linear(120, 12))
        .ptr();
  };
  int64_t psi = 0;
  for (const Tensor& p : make()->parameters()) psi += p.nbytes();
  Batch data = make_batch(4, 81).to(rank_device());
  auto step_traffic = [&](nn::Module& model, comm::CountingProcessGroup& counted) {
    optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1));
    // The second step, from its forward (where stages 1 and 2 gather the first step's update) to
    // its optimizer step: DDP's bucket rebuild is behind it.
    for (int step = 0; step < 2; ++step) {
      if (step == 1) counted.reset();
      sgd.zero_grad();
      loss_of(model, data).backward();
      sgd.step();
    }
    return counted.traffic();
  };
  auto counted_ddp = std::make_shared<comm::CountingProcessGroup>(world);
  parallel::DistributedDataParallel ddp(on_rank_device(make()), counted_ddp);
  comm::Traffic ddp_traffic = step_traffic(ddp, *counted_ddp);
  REQUIRE(ddp_traffic.total() == 2 * psi);  // an all-reduce of every gradient: no buffers here
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage << ", " << world->size() << " ranks, parameters " << psi << " bytes");
    auto counted = std::make_shared<comm::CountingProcessGroup>(world);
    parallel::ShardedDataParallel sharded(on_rank_device(make()), counted, parallel::ShardingOptions().stage(stage));
    comm::Traffic traffic = step_traffic(sharded, *counted);
    // Every dim 0 here (240, 120, 12) divides by 2, 3 and 4: no padding rows travel, so the counts
    // are exact.
    const int64_t expected = (stage == 3 ? 3 : 2) * psi;
    REQUIRE(traffic.bytes[comm::CollectiveKind::AllReduce] == 0);
    REQUIRE(traffic.bytes[comm::CollectiveKind::ReduceScatterTensor] == psi);
    REQUIRE(traffic.total() == expected);
  }
}

TEST_CASE("stage 3 prefetches the next unit's gather in forward and backward; the steps are the same without",
          "[sharded][stage3][prefetch]") {
  auto world = comm::init();
  auto make = [] {
    manual_seed(13);
    return nn::Sequential(nn::Flatten(), nn::Linear(36, 40), nn::ReLU(), nn::Linear(40, 30), nn::ReLU(),
                          nn::Linear(30, 4))
        .ptr();
  };
  Batch data = make_batch(4, 91).to(rank_device());
  std::vector<NamedTensors> results;
  for (bool prefetch : {true, false}) {
    INFO("prefetch " << prefetch);
    parallel::ShardedDataParallel sharded(on_rank_device(make()), world,
                                          parallel::ShardingOptions().stage(3).prefetch(prefetch));
    optim::SGD sgd(sharded.parameters(), optim::SGDOptions(0.1).momentum(0.9));
    parallel::ShardedStats before;
    for (int step = 0; step < 3; ++step) {
      if (step == 2) before = sharded.stats();  // the order of the units is known from step 2 on
      sgd.zero_grad();
      loss_of(sharded, data).backward();
      sgd.step();
      REQUIRE(sharded.memory().gathers_in_flight == 0);
    }
    // Three units: each gathered for forward and again for backward; ahead of its use every one
    // but the first of each pass.
    REQUIRE(sharded.stats().unit_gathers - before.unit_gathers == 6);
    REQUIRE(sharded.stats().prefetched - before.prefetched == (prefetch ? 4 : 0));
    results.push_back(sharded.state_dict());
  }
  for (size_t i = 0; i < results[0].size(); ++i)
    REQUIRE(same_values(results[0][i].second.to(Device(kCPU)), results[1][i].second.to(Device(kCPU))));
}

TEST_CASE("stage 3 with one unit per residual block trains a ResNet as DDP does", "[sharded][stage3][resnet]") {
  auto world = comm::init();
  const int rank = world->rank();
  auto make = [] {
    manual_seed(12);
    return models::cifar_resnet(8, 3, 10).ptr();
  };
  Generator g(5);
  Tensor x = randn({2 * world->size(), 3, 8, 8}, {}, &g);
  Tensor y = randint(0, 10, {2 * world->size()}, TensorOptions(kInt64), &g);
  Batch mine = Batch{x.narrow(0, 2 * rank, 2), y.narrow(0, 2 * rank, 2)}.to(rank_device());
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make()), world);
  auto sharded = std::make_shared<parallel::ShardedDataParallel>(
      on_rank_device(make()), world, parallel::ShardingOptions().stage(3).wrap_module_types({"BasicBlock"}));
  REQUIRE(sharded->unit_names() == std::vector<std::string>{"", "layer1.0", "layer2.0", "layer3.0"});
  optim::SGD ddp_opt(ddp->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD sharded_opt(sharded->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 2; ++step) {
    for (auto [model, optimizer] :
         {std::pair<nn::Module*, optim::Optimizer*>{ddp.get(), &ddp_opt}, {sharded.get(), &sharded_opt}}) {
      optimizer->zero_grad();
      loss_of(*model, mine).backward();
      optimizer->step();
    }
  }
  require_same_as_ddp(*sharded, *ddp, 1e-5);
  // A unit's parameters hold no bytes between uses: reading one outside the unit's call is an error.
  auto& block = *sharded->module()->find_child("layer1")->children()[0];
  REQUIRE_THROWS_WITH(block.forward(randn({2, 16, 8, 8}).to(rank_device())), Catch::Contains("was released"));
}

TEST_CASE("a GradScaler bound to the shards skips on every rank when one rank's rows overflow; autocast as DDP's",
          "[sharded][amp]") {
  auto world = comm::init();
  const int rank = world->rank();
  Batch data = make_batch(4 * world->size(), 101);
  Batch mine = Batch{data.x.narrow(0, 4 * rank, 4), data.y.narrow(0, 4 * rank, 4)}.to(rank_device());
  for (int stage : {2, 3}) {
    INFO("stage " << stage);
    auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_odd(2)), world,
                                                                   parallel::ShardingOptions().stage(stage));
    optim::SGD sgd(sharded->parameters(), optim::SGDOptions(0.1));
    amp::GradScaler scaler;
    parallel::sync_grad_scaler(scaler, *sharded);
    scaler.scale(loss_of(*sharded, mine)).backward();
    // An overflow in rows only the last rank owns: the other ranks' shards are all finite.
    auto pieces = sharded->local_shards();
    if (rank == world->size() - 1) {
      NoGradGuard no_grad;
      for (auto& piece : pieces)
        if (piece.name == "fc1.weight") piece.local.mutable_grad().narrow(0, 0, 1).fill_(INFINITY);
    }
    std::vector<Tensor> before;
    for (const Tensor& p : sharded->parameters()) before.push_back(p.clone());
    REQUIRE_FALSE(scaler.step(sgd));
    scaler.update();
    REQUIRE(scaler.get_scale() == 32768.0f);
    for (size_t i = 0; i < before.size(); ++i)
      REQUIRE(same_values(sharded->parameters()[i].to(Device(kCPU)), before[i].to(Device(kCPU))));
  }
  // bf16 autocast (CPU ranks) or fp16 (GPU ranks): stage 3 takes DDP's steps within 16-bit rounding.
  const bool cuda = rank_device().is_cuda();
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_odd(4)), world);
  auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_odd(4)), world,
                                                                 parallel::ShardingOptions().stage(3));
  optim::SGD ddp_opt(ddp->parameters(), optim::SGDOptions(0.05));
  optim::SGD sharded_opt(sharded->parameters(), optim::SGDOptions(0.05));
  for (int step = 0; step < 2; ++step) {
    for (auto [model, optimizer] :
         {std::pair<nn::Module*, optim::Optimizer*>{ddp.get(), &ddp_opt}, {sharded.get(), &sharded_opt}}) {
      optimizer->zero_grad();
      Tensor loss;
      {
        AutocastGuard autocast(cuda ? kCUDA : kCPU, cuda ? kFloat16 : kBFloat16);
        loss = loss_of(*model, mine);
      }
      loss.backward();
      optimizer->step();
    }
  }
  for (const Tensor& p : sharded->parameters()) REQUIRE(p.dtype() == kFloat32);
  require_same_as_ddp(*sharded, *ddp, 2e-2);
}

TEST_CASE("param_dtype bf16: gathered parameters compute in bf16; shards, optimizer and state dicts stay float32",
          "[sharded][param_dtype]") {
  auto world = comm::init();
  const int rank = world->rank();
  Batch data = make_batch(4 * world->size(), 111);
  Batch mine = Batch{data.x.narrow(0, 4 * rank, 4), data.y.narrow(0, 4 * rank, 4)}.to(rank_device());
  auto make = [] {
    manual_seed(15);
    return nn::Sequential(nn::Flatten(), nn::Linear(36, 23), nn::ReLU(), nn::Linear(23, 4)).ptr();
  };
  for (int stage : {2, 3}) {
    INFO("stage " << stage);
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make()), world);
    auto sharded = std::make_shared<parallel::ShardedDataParallel>(
        on_rank_device(make()), world, parallel::ShardingOptions().stage(stage).param_dtype(kBFloat16));
    for (const Tensor& p : sharded->module()->parameters()) REQUIRE(p.dtype() == kBFloat16);
    for (const Tensor& p : sharded->parameters()) REQUIRE(p.dtype() == kFloat32);
    optim::SGD ddp_opt(ddp->parameters(), optim::SGDOptions(0.1));
    optim::SGD sharded_opt(sharded->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 2; ++step) {
      for (auto [model, optimizer] :
           {std::pair<nn::Module*, optim::Optimizer*>{ddp.get(), &ddp_opt}, {sharded.get(), &sharded_opt}}) {
        optimizer->zero_grad();
        Tensor logits = model->forward(mine.x.to(model == sharded.get() ? kBFloat16 : kFloat32));
        cross_entropy(logits.to(kFloat32), mine.y).backward();
        optimizer->step();
      }
    }
    // Each parameter's change over the two steps within bf16's rounding of DDP's float32 change.
    NamedTensors state = sharded->state_dict(), reference = ddp->state_dict(), start = make()->state_dict();
    for (size_t i = 0; i < state.size(); ++i) {
      INFO(state[i].first);
      REQUIRE(state[i].second.dtype() == kFloat32);
      Tensor moved = state[i].second.to(Device(kCPU)) - start[i].second,
             expected = reference[i].second.to(Device(kCPU)) - start[i].second;
      REQUIRE(expected.abs().amax().item<double>() > 1e-4);
      REQUIRE((moved - expected).abs().amax().item<double>() <= 0.05 * expected.abs().amax().item<double>());
    }
    // A float32 state loads into the shards without passing through bf16.
    sharded->load_state_dict(ddp->state_dict());
    NamedTensors loaded = sharded->state_dict(), expected = ddp->state_dict();
    for (size_t i = 0; i < loaded.size(); ++i)
      REQUIRE(same_values(loaded[i].second.to(Device(kCPU)), expected[i].second.to(Device(kCPU))));
  }
}

TEST_CASE("inside full_parameters() forwards run no collective: ranks evaluate different numbers of batches",
          "[sharded][stage3][full_parameters]") {
  auto world = comm::init();
  const int rank = world->rank();
  auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_odd(21)), world,
                                                                 parallel::ShardingOptions().stage(3));
  auto bare = on_rank_device(make_odd(21));
  sharded->eval();
  bare->eval();
  Batch data = make_batch(6, 121).to(rank_device());
  {
    auto full = sharded->full_parameters();
    REQUIRE(sharded->memory().full_parameters > 0);
    for (int batch = 0; batch <= rank; ++batch) {  // rank r evaluates r + 1 batches
      NoGradGuard no_grad;
      require_close(sharded->forward(data.x).to(Device(kCPU)), bare->forward(data.x).to(Device(kCPU)), 1e-6, "logits");
    }
  }
  REQUIRE(sharded->memory().full_parameters == 0);  // freed when the scope ends
}

TEST_CASE("a parameter without a gradient is named; find_unused_parameters reduces zeros for it", "[sharded][unused]") {
  auto world = comm::init();
  Batch data = make_batch(8, 41).rank_shard(world->rank(), world->size());
  {
    auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(std::make_shared<TwoHeads>()), world);
    Tensor loss = cross_entropy(sharded->forward(data.x), data.y);
    REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("head_b.weight") && Catch::Contains("head_b.bias") &&
                                             Catch::Contains("find_unused_parameters") &&
                                             Catch::Contains("rank " + std::to_string(world->rank())) &&
                                             Catch::Contains("on " + rank_device().str()));
  }
  auto sharded = std::make_shared<parallel::ShardedDataParallel>(
      on_rank_device(std::make_shared<TwoHeads>()), world, parallel::ShardingOptions().find_unused_parameters(true));
  optim::SGD sgd(sharded->parameters(), optim::SGDOptions(0.1));
  for (int step = 0; step < 2; ++step) {
    sgd.zero_grad();
    cross_entropy(sharded->forward(data.x), data.y).backward();
    sgd.step();
  }
  for (auto& [name, p] : sharded->named_parameters())
    if (name.starts_with("head_b")) REQUIRE(p.grad().abs().sum().item<double>() == 0.0);
}

TEST_CASE("state_dict is full and bare; load_state_dict puts each rank's rows in its shards", "[sharded][state]") {
  auto world = comm::init();
  const int rank = world->rank();
  auto sharded = std::make_shared<parallel::ShardedDataParallel>(on_rank_device(make_odd(8)), world);
  auto bare = make_odd(8);
  NamedTensors state = sharded->state_dict();
  NamedTensors expected = bare->state_dict();
  REQUIRE(state.size() == expected.size());
  for (size_t i = 0; i < state.size(); ++i) {
    REQUIRE(state[i].first == expected[i].first);
    REQUIRE(state[i].second.sizes() == expected[i].second.sizes());
  }
  // Another model's values, loaded: the shards hold this rank's rows of them.
  auto other = make_odd(99);
  sharded->load_state_dict(other->state_dict());
  auto values = other->named_parameters();
  for (auto& [name, shard] : sharded->named_parameters()) {
    const parallel::DimZeroShard& s = sharded->shard_of(name);
    for (auto& [other_name, value] : values)
      if (other_name == name)
        REQUIRE(
            same_values(shard.to(Device(kCPU)).reshape({-1}),
                        value.reshape({s.rows, s.row_numel}).narrow(0, s.begin(rank), s.rows_of(rank)).reshape({-1})));
  }
  // local_shards(): the optimizer's tensors themselves, with their place in the full tensor.
  auto pieces = sharded->local_shards();
  auto named = sharded->named_parameters();
  REQUIRE(pieces.size() == named.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    REQUIRE(pieces[i].name == named[i].first);
    REQUIRE(pieces[i].local.unsafe_impl() == named[i].second.unsafe_impl());
    REQUIRE(pieces[i].row_begin == sharded->shard_of(pieces[i].name).begin(rank));
    REQUIRE(pieces[i].global_shape == sharded->shard_of(pieces[i].name).shape);
  }
  REQUIRE_THROWS_WITH(
      parallel::ShardedDataParallel(on_rank_device(make_odd(1)), world, parallel::ShardingOptions().stage(4)),
      Catch::Contains("stage must be 1") && Catch::Contains("or 3") && Catch::Contains("got 4"));
}

// Join with uneven inputs, and SyncBatchNorm against batch norm on the concatenated batch
// (run under mpirun; each rank on rank_device(), the references on the CPU).
#include <catch2/catch.hpp>

#include "comm/init.h"
#include "core/ember_core.h"
#include "parallel/ddp.h"
#include "parallel/join.h"
#include "parallel/sync_batch_norm.h"
#include "tests/parallel/ddp_helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("Join: ranks with different numbers of batches all finish with the same model", "[ddp][join]") {
  auto world = comm::init();
  const int ranks = world->size(), me = world->rank();
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_mlp(100 + me)), world);
  auto expected = make_mlp(100);
  // Rank r holds 2 + r batches of 4 examples.
  auto batch_of = [](int rank, int step) { return make_batch(4, 1000 + 10 * rank + step); };
  const double lr = 0.1;
  int64_t shadowed = 0;
  {
    parallel::Join join(*ddp);
    for (int step = 0; step < 2 + me; ++step) sgd_step(*ddp, batch_of(me, step).to(rank_device()), lr);
    shadowed = join.finish();
  }
  REQUIRE(shadowed == (ranks - 1) - me);
  // Reference: at step t the active ranks' gradients, joined ranks contributing zero, / world.
  for (int step = 0; step < 2 + ranks - 1; ++step) {
    expected->zero_grad();
    for (int r = 0; r < ranks; ++r)
      if (step < 2 + r) loss_of(*expected, batch_of(r, step)).backward();
    NoGradGuard no_grad;
    for (Tensor& p : expected->parameters()) p.sub_(p.grad(), lr / ranks);
  }
  require_same_parameters(*ddp, *expected, 1e-5);
}

TEST_CASE("SyncBatchNorm equals batch norm on the concatenated batch", "[sync_bn]") {
  auto world = comm::init();
  const int ranks = world->size(), me = world->rank();
  for (int64_t per_rank : {1, 3}) {
    INFO("per-rank batch " << per_rank);
    auto sync = on_rank_device(make_cnn(7));
    REQUIRE(parallel::convert_sync_batchnorm(*sync, world) == 1);
    REQUIRE(sync->repr().find("SyncBatchNorm(6") != std::string::npos);
    auto plain = make_cnn(7);
    Batch all = make_batch(per_rank * ranks, 61);
    Batch mine = all.rank_shard(me, ranks);
    Tensor x_sync = mine.x.clone().requires_grad_(), x_all = all.x.clone().requires_grad_();
    Tensor out_sync = sync->forward(x_sync), out_all = plain->forward(x_all);
    require_close(out_sync, out_all.narrow(0, me * per_rank, per_rank), 1e-5, "output");
    // Global mean loss: each rank's share is its mean scaled by per_rank / total.
    Tensor loss_sync = cross_entropy(out_sync, mine.y) * (1.0 / ranks);
    cross_entropy(out_all, all.y).backward();
    loss_sync.backward();
    require_close(x_sync.grad(), x_all.grad().narrow(0, me * per_rank, per_rank), 1e-4, "input grad");
    // Weight gradients: summing the ranks' shares gives the full-batch gradient.
    for (auto& [name, p] : sync->named_parameters()) {
      Tensor g = p.grad().clone();
      world->all_reduce(g)->wait();
      Tensor reference;
      for (auto& [other_name, q] : plain->named_parameters())
        if (other_name == name) reference = q;
      REQUIRE(reference.defined());
      require_close(g, reference.grad(), 1e-4, "grad " + name);
    }
    for (auto& [name, b] : sync->named_buffers()) {
      if (name.ends_with("num_batches_tracked")) continue;
      for (auto& [other_name, c] : plain->named_buffers())
        if (other_name == name) require_close(b, c, 1e-5, name);
    }
    // Evaluation issues no collective: the sequence number of collectives on the statistics' device
    // does not move (a barrier would count only those of the group's host backend).
    sync->eval();
    auto before = world->all_reduce(zeros({1}, rank_device()));
    before->wait();
    {
      NoGradGuard no_grad;
      sync->forward(mine.x);
    }
    auto after = world->all_reduce(zeros({1}, rank_device()));
    after->wait();
    REQUIRE(after->info().sequence == before->info().sequence + 1);
  }
}

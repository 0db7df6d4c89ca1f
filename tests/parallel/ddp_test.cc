// DistributedDataParallel under mpirun: N ranks x batch B/N must match 1 process x batch B;
// overlap, gradient-as-bucket-view, comm-hook compression, the unused-parameter error,
// parameter-mismatch detection, buffer broadcast and bare state_dict keys.
#include <catch2/catch.hpp>

#include <thread>

#include "comm/init.h"
#include "core/ember_core.h"
#include "models/small.h"
#include "nn/nn.h"
#include "parallel/ddp.h"
#include "tests/parallel/ddp_helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("N ranks x B/N equal one process x B (MLP and CNN, several bucket layouts)", "[ddp]") {
  auto world = comm::init();
  for (bool as_view : {false, true}) {
    for (double cap_mb : {0.001, 25.0}) {
      INFO("gradient_as_bucket_view=" << as_view << " bucket_cap_mb=" << cap_mb);
      parallel::DDPOptions options;
      options.gradient_as_bucket_view = as_view;
      options.first_bucket_mb = cap_mb;
      options.bucket_cap_mb = cap_mb;
      for (auto make : {make_mlp, make_plain_cnn}) {
        auto local = make(100 + world->rank());  // DDP replaces these with rank 0's (seed 100)
        auto ddp = std::make_shared<parallel::DistributedDataParallel>(local, world, options);
        auto expected = make(100);  // what rank 0 built, the common starting point
        Batch data = make_batch(16, 11);
        for (int step = 0; step < 4; ++step) {
          Batch shard = data.shard(world->rank(), world->size());
          sgd_step(*ddp, shard, 0.1);
          sgd_step(*expected, data, 0.1);
          require_same_parameters(*ddp, *expected, 1e-5);
        }
      }
    }
  }
}

TEST_CASE("bucket all-reduces start while backward is still running", "[ddp][overlap]") {
  auto world = comm::init();
  parallel::DDPOptions options;
  options.first_bucket_mb = 0.00001;  // a few floats: every parameter gets a bucket of its own
  options.bucket_cap_mb = 0.00002;
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(make_cnn(3), world, options);
  Batch data = make_batch(8, 5).shard(world->rank(), world->size());
  for (int step = 0; step < 3; ++step) sgd_step(*ddp, data, 0.05);
  const parallel::ReducerStats& stats = ddp->reducer().stats();
  INFO("buckets " << stats.buckets << ", launched during backward " << stats.launched_during_backward);
  REQUIRE(stats.buckets >= 3);
  REQUIRE(stats.launched_during_backward >= stats.buckets - 1);
  REQUIRE(stats.first_launch_to_end_of_backward.count() > 0);
}

TEST_CASE("fp16 and bf16 compression hooks stay within their precision", "[ddp][hooks]") {
  auto world = comm::init();
  for (auto [hook, tolerance] : {std::pair{parallel::CommHook(parallel::fp16_compress_hook), 2e-3},
                                 std::pair{parallel::CommHook(parallel::bf16_compress_hook), 2e-2}}) {
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(make_mlp(5), world);
    ddp->register_comm_hook(hook);
    auto expected = make_mlp(5);
    Batch data = make_batch(16, 31);
    ddp->zero_grad();
    loss_of(*ddp, data.shard(world->rank(), world->size())).backward();
    expected->zero_grad();
    for (int r = 0; r < world->size(); ++r) loss_of(*expected, data.shard(r, world->size())).backward();
    // Compression error is relative to the gradient's scale, not to each (possibly cancelling) element.
    auto got = ddp->named_parameters(), want = expected->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      Tensor reference = want[i].second.grad() * (1.0 / world->size());
      double scale = reference.abs().amax().item<double>();
      double error = (got[i].second.grad() - reference).abs().amax().item<double>();
      INFO(got[i].first << ": max error " << error << ", scale " << scale);
      REQUIRE(error <= tolerance * scale);
    }
  }
}

TEST_CASE("a hook's Work completes only after its decompression ran; a failed continuation is its error",
          "[ddp][hooks]") {
  auto world = comm::init();
  // Polling alone (no wait) must not report completion before the bucket holds the result.
  parallel::GradBucket bucket;
  bucket.buffer = full({64}, 1.0 + world->rank());
  comm::WorkPtr work = parallel::fp16_compress_hook(*world, bucket);
  while (!work->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double average = (world->size() + 1) / 2.0;
  REQUIRE(bucket.buffer.amin().item<double>() == Approx(average).epsilon(1e-3));
  REQUIRE(bucket.buffer.amax().item<double>() == Approx(average).epsilon(1e-3));
  REQUIRE(work->error().empty());
  work->wait();  // the continuation does not run twice
  REQUIRE(bucket.buffer.amax().item<double>() == Approx(average).epsilon(1e-3));

  comm::WorkPtr failing =
      parallel::then(world->all_reduce(ones({2})), [] { EMBER_FAIL("decompression failed"); });
  REQUIRE_THROWS_WITH(failing->wait(), Catch::Contains("decompression failed") && Catch::Contains("all_reduce #"));
  REQUIRE(failing->is_completed());
  REQUIRE_THAT(failing->error(), Catch::Contains("decompression failed"));
}

TEST_CASE("a parameter without a gradient is named instead of hanging", "[ddp][unused]") {
  auto world = comm::init();
  Batch data = make_batch(8, 41).shard(world->rank(), world->size());
  {
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(std::make_shared<TwoHeads>(), world);
    Tensor loss = cross_entropy(ddp->forward(data.x), data.y);
    REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("head_b.weight") && Catch::Contains("head_b.bias") &&
                                             Catch::Contains("find_unused_parameters") &&
                                             Catch::Contains("rank " + std::to_string(world->rank())));
  }
  parallel::DDPOptions options;
  options.find_unused_parameters = true;
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(std::make_shared<TwoHeads>(), world, options);
  for (int step = 0; step < 2; ++step) sgd_step(*ddp, data, 0.1);
  REQUIRE(ddp->module()->find_child("head_b")->parameters()[0].grad().abs().sum().item<double>() == 0.0);
}

TEST_CASE("ranks with different parameters are named at construction", "[ddp][mismatch]") {
  auto world = comm::init();
  if (world->size() < 2) return;
  auto module = models::MLP(16, std::vector<int64_t>{world->rank() == 1 ? 9 : 8}, 3).ptr();
  REQUIRE_THROWS_WITH(std::make_shared<parallel::DistributedDataParallel>(module, world),
                      Catch::Contains("ranks registered different parameters") &&
                          Catch::Contains("layers.1.weight [" + std::string(world->rank() == 1 ? "9" : "8")) &&
                          Catch::Contains("rank 1 has layers.1.weight [9, 16]"));
}

TEST_CASE("buffers come from rank 0 before each forward; state_dict keys are the bare module's", "[ddp][state]") {
  auto world = comm::init();
  auto model = make_cnn(6);
  {
    NoGradGuard no_grad;
    for (auto& [name, b] : model->named_buffers())
      if (name.ends_with("running_mean")) b.fill_(world->rank());
  }
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(model, world);
  // Construction broadcast rank 0's buffers already; skew them again, then a forward repairs them.
  {
    NoGradGuard no_grad;
    for (auto& [name, b] : model->named_buffers())
      if (name.ends_with("running_var")) b.fill_(1 + world->rank());
  }
  Batch data = make_batch(4, 51).shard(world->rank(), world->size());
  ddp->pre_forward();  // what every training forward starts with
  for (auto& [name, b] : model->named_buffers()) {
    if (!name.ends_with("running_var")) continue;
    Tensor gathered = empty({world->size() * b.numel()});
    world->all_gather_into_tensor(gathered, b.contiguous())->wait();
    REQUIRE(gathered.amax().item<double>() == gathered.amin().item<double>());
  }
  auto keys = [](const NamedTensors& s) {
    std::vector<std::string> k;
    for (auto& [name, t] : s) k.push_back(name);
    return k;
  };
  REQUIRE(keys(ddp->state_dict()) == keys(model->state_dict()));
  REQUIRE(keys(ddp->state_dict())[0] == "conv1.weight");
  // Rank 0's checkpoint loads straight into a bare single-process model.
  auto bare = make_cnn(99);
  bare->load_state_dict(ddp->state_dict());
  bare->eval();
  ddp->eval();
  NoGradGuard no_grad;
  Tensor a = bare->forward(data.x), b = ddp->forward(data.x);
  REQUIRE((a - b).abs().amax().item<double>() == 0.0);
}

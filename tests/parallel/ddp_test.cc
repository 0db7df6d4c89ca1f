// DistributedDataParallel under mpirun: N ranks x batch B/N must match 1 process x batch B;
// overlap, gradient-as-bucket-view, comm-hook compression, the unused-parameter error,
// parameter-mismatch detection, buffer broadcast and bare state_dict keys. Each rank's model is on
// rank_device() (CPU over MPI, or cuda:LOCAL_RANK over NCCL); references are CPU models.
#include <catch2/catch.hpp>

#include <thread>

#include "comm/init.h"
#include "core/autocast.h"
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
        auto local = on_rank_device(make(100 + world->rank()));  // DDP replaces these with rank 0's (seed 100)
        auto ddp = std::make_shared<parallel::DistributedDataParallel>(local, world, options);
        auto expected = make(100);  // what rank 0 built, the common starting point
        Batch data = make_batch(16, 11);
        for (int step = 0; step < 4; ++step) {
          sgd_step(*ddp, data.rank_shard(world->rank(), world->size()), 0.1);
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
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_cnn(3)), world, options);
  Batch data = make_batch(8, 5).rank_shard(world->rank(), world->size());
  for (int step = 0; step < 3; ++step) sgd_step(*ddp, data, 0.05);
  const parallel::ReducerStats& stats = ddp->reducer().stats();
  INFO("buckets " << stats.buckets << ", launched during backward " << stats.launched_during_backward);
  REQUIRE(stats.buckets >= 3);
  REQUIRE(stats.launched_during_backward >= stats.buckets - 1);
  REQUIRE(stats.first_launch_to_end_of_backward.count() > 0);
}

TEST_CASE("fp16 and bf16 compression hooks stay within their precision", "[ddp][hooks]") {
  auto world = comm::init();
  // Each rank's share is rounded once to 16 bits, then every step of the sum over ranks (float16
  // 2^-11, bfloat16 2^-8 relative), so the bound grows with the number of ranks.
  const double ranks = world->size();
  for (auto [hook, tolerance] : {std::pair{parallel::CommHook(parallel::fp16_compress_hook), 1e-3 * ranks},
                                 std::pair{parallel::CommHook(parallel::bf16_compress_hook), 1e-2 * ranks}}) {
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_mlp(5)), world);
    ddp->register_comm_hook(hook);
    auto expected = make_mlp(5);
    Batch data = make_batch(16, 31);
    ddp->zero_grad();
    loss_of(*ddp, data.rank_shard(world->rank(), world->size())).backward();
    expected->zero_grad();
    for (int r = 0; r < world->size(); ++r) loss_of(*expected, data.shard(r, world->size())).backward();
    // Compression error is relative to the gradient's scale, not to each (possibly cancelling) element.
    auto got = ddp->named_parameters(), want = expected->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      Tensor reference = want[i].second.grad() * (1.0 / world->size());
      double scale = reference.abs().amax().item<double>();
      double error = (got[i].second.grad().to(Device(kCPU)) - reference).abs().amax().item<double>();
      INFO(got[i].first << ": max error " << error << ", scale " << scale);
      REQUIRE(error <= tolerance * scale);
    }
  }
}

TEST_CASE("under autocast the buckets stay float32 and the compression hooks keep working", "[ddp][hooks][amp]") {
  auto world = comm::init();
  const DeviceType type = rank_device().type;
  for (bool compress : {false, true}) {
    INFO("fp16 compression hook: " << compress);
    parallel::DDPOptions options;
    options.gradient_as_bucket_view = true;  // the gradients are the buckets' views: their dtype is the bucket's
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_plain_cnn(7)), world, options);
    if (compress) ddp->register_comm_hook(parallel::fp16_compress_hook);
    auto expected = make_plain_cnn(7);
    Batch data = make_batch(16, 41);
    ddp->zero_grad();
    {
      AutocastGuard autocast(type, kBFloat16);
      Tensor loss = loss_of(*ddp, data.rank_shard(world->rank(), world->size()));
      REQUIRE(loss.dtype() == kFloat32);
      loss.backward();
    }
    // The reference runs under the CPU's bf16 autocast too: both round the same operands to bf16,
    // so what differs is float32 summation order (and a bf16 activation that rounds the other way
    // for it) and the hook's float16 rounding of each rank's share.
    expected->zero_grad();
    {
      AutocastGuard autocast(kCPU, kBFloat16);
      for (int r = 0; r < world->size(); ++r) loss_of(*expected, data.shard(r, world->size())).backward();
    }
    auto got = ddp->named_parameters(), want = expected->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(got[i].first);
      REQUIRE(got[i].second.grad().dtype() == kFloat32);
      Tensor reference = want[i].second.grad() * (1.0 / world->size());
      double scale = reference.abs().amax().item<double>();
      double error = (got[i].second.grad().to(Device(kCPU)) - reference).abs().amax().item<double>();
      INFO("max error " << error << ", scale " << scale);
      REQUIRE(error <= (0.02 + (compress ? 1e-3 * world->size() : 0.0)) * scale);
    }
  }
}

TEST_CASE("a hook's Work completes only after its decompression ran; a failed continuation is its error",
          "[ddp][hooks]") {
  auto world = comm::init();
  // Polling alone (no wait) must not report completion before the bucket holds the result.
  parallel::GradBucket bucket;
  bucket.buffer = full({64}, 1.0 + world->rank(), rank_device());
  comm::WorkPtr work = parallel::fp16_compress_hook(*world, bucket);
  while (!work->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double average = (world->size() + 1) / 2.0;
  REQUIRE(bucket.buffer.amin().item<double>() == Approx(average).epsilon(1e-3));
  REQUIRE(bucket.buffer.amax().item<double>() == Approx(average).epsilon(1e-3));
  REQUIRE(work->error().empty());
  work->wait();  // the continuation does not run twice
  REQUIRE(bucket.buffer.amax().item<double>() == Approx(average).epsilon(1e-3));

  comm::WorkPtr failing =
      parallel::then(world->all_reduce(ones({2}, rank_device())), [] { EMBER_FAIL("decompression failed"); });
  REQUIRE_THROWS_WITH(failing->wait(), Catch::Contains("decompression failed") && Catch::Contains("all_reduce #"));
  // On a device, wait() only ordered the current stream after the all-reduce: completion follows
  // once the device gets there, and the failed continuation must not keep it from ever completing.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!failing->is_completed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(failing->is_completed());
  REQUIRE_THAT(failing->error(), Catch::Contains("decompression failed"));
}

TEST_CASE("a parameter without a gradient is named instead of hanging", "[ddp][unused]") {
  auto world = comm::init();
  Batch data = make_batch(8, 41).rank_shard(world->rank(), world->size());
  {
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(std::make_shared<TwoHeads>()), world);
    Tensor loss = cross_entropy(ddp->forward(data.x), data.y);
    REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("head_b.weight") && Catch::Contains("head_b.bias") &&
                                             Catch::Contains("find_unused_parameters") &&
                                             Catch::Contains("rank " + std::to_string(world->rank())) &&
                                             Catch::Contains("on " + rank_device().str()));
  }
  parallel::DDPOptions options;
  options.find_unused_parameters = true;
  auto ddp =
      std::make_shared<parallel::DistributedDataParallel>(on_rank_device(std::make_shared<TwoHeads>()), world, options);
  for (int step = 0; step < 2; ++step) sgd_step(*ddp, data, 0.1);
  REQUIRE(ddp->module()->find_child("head_b")->parameters()[0].grad().abs().sum().item<double>() == 0.0);
}

TEST_CASE("ranks with different parameters are named at construction", "[ddp][mismatch]") {
  auto world = comm::init();
  if (world->size() < 2) return;
  auto module = on_rank_device(models::MLP(16, std::vector<int64_t>{world->rank() == 1 ? 9 : 8}, 3).ptr());
  REQUIRE_THROWS_WITH(std::make_shared<parallel::DistributedDataParallel>(module, world),
                      Catch::Contains("ranks registered different parameters") &&
                          Catch::Contains("layers.1.weight [" + std::string(world->rank() == 1 ? "9" : "8")) &&
                          Catch::Contains("rank 1 has layers.1.weight [9, 16]"));
}

TEST_CASE("buffers come from rank 0 before each forward; state_dict keys are the bare module's", "[ddp][state]") {
  auto world = comm::init();
  auto model = on_rank_device(make_cnn(6));
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
  Batch data = make_batch(4, 51).rank_shard(world->rank(), world->size());
  ddp->pre_forward();  // what every training forward starts with
  for (auto& [name, b] : model->named_buffers()) {
    if (!name.ends_with("running_var")) continue;
    Tensor gathered = empty({world->size() * b.numel()}, rank_device());
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
  // Rank 0's checkpoint loads straight into a bare single-process model (on the CPU: the
  // state crosses devices too).
  auto bare = make_cnn(99);
  bare->load_state_dict(ddp->state_dict());
  bare->eval();
  ddp->eval();
  NoGradGuard no_grad;
  require_close(bare->forward(data.x.to(Device(kCPU))), ddp->forward(data.x), 1e-5, "bare model output");
}

TEST_CASE("a module on several devices, or on another than the group's, is named with rank and device",
          "[ddp][device]") {
  auto world = comm::init();
  if (!rank_device().is_cuda() || world->size() < 2) return;  // one CPU: nothing to misplace
  const std::string rank = "rank " + std::to_string(world->rank());
  const Device other = Device::cuda((rank_device().index + 1) % world->size());
  auto split = on_rank_device(std::make_shared<TwoHeads>());
  split->find_child("head_a")->to(other);
  REQUIRE_THROWS_WITH(std::make_shared<parallel::DistributedDataParallel>(split, world),
                      Catch::Contains(rank) && Catch::Contains("several devices") &&
                          Catch::Contains("parameter 'body.weight' is on " + rank_device().str()) &&
                          Catch::Contains("parameter 'head_a.weight' is on " + other.str()));
  // The group's communicator lives on this rank's device once a collective has run there.
  world->all_reduce(zeros({1}, rank_device()))->wait();
  auto moved = std::make_shared<TwoHeads>();
  moved->to(other);
  REQUIRE_THROWS_WITH(std::make_shared<parallel::DistributedDataParallel>(moved, world),
                      Catch::Contains(rank) && Catch::Contains("the module is on " + other.str()) &&
                          Catch::Contains("parameter 'body.weight'"));
  // A group for GPUs only (EMBER_BACKEND=nccl) has no transport for a CPU module.
  if (comm::read_environment().backend != "nccl") return;
  REQUIRE_THROWS_WITH(std::make_shared<parallel::DistributedDataParallel>(make_mlp(1), world),
                      Catch::Contains(rank) && Catch::Contains("the module is on cpu (parameter '1.weight')"));
}

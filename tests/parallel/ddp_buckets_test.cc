// DDP's buckets under mpirun: gradients as bucket views (storage shared with the bucket, whatever
// the caller does with zero_grad), the bucket layout (1 MB first / 25 MB defaults, reverse
// registration order, the one rebuild in arrival order) and evidence that communication overlaps
// backward.
#include <catch2/catch.hpp>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "parallel/ddp.h"
#include "tests/parallel/ddp_helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// One SGD step where zero_grad() (set_to_none, the default) comes between forward and backward:
// backward then creates fresh .grad tensors that are not the buckets' views.
void sgd_step_zeroing_after_forward(nn::Module& model, const Batch& batch, double lr) {
  Tensor loss = loss_of(model, batch);
  model.zero_grad();
  loss.backward();
  NoGradGuard no_grad;
  for (Tensor& p : model.parameters())
    if (p.grad().defined()) p.sub_(p.grad(), lr);
}

// Every .grad is the view of its slot in its bucket: same storage, at the slot's address.
void require_grads_are_bucket_views(parallel::DistributedDataParallel& ddp) {
  parallel::Reducer& reducer = ddp.reducer();
  auto names = reducer.bucket_parameter_names();
  auto params = ddp.named_parameters();
  for (size_t b = 0; b < names.size(); ++b) {
    const Tensor& buffer = reducer.bucket_buffer(b);
    auto* base = static_cast<const char*>(buffer.data_ptr());
    size_t offset = 0;
    for (const std::string& name : names[b]) {
      const Tensor* param = nullptr;
      for (auto& [n, p] : params)
        if (n == name) param = &p;
      REQUIRE(param != nullptr);
      const Tensor& grad = param->grad();
      INFO("bucket " << b << " parameter " << name);
      REQUIRE(grad.defined());
      REQUIRE(grad.storage() == buffer.storage());
      REQUIRE(static_cast<const char*>(grad.data_ptr()) == base + offset);
      offset += grad.nbytes();
    }
    REQUIRE(offset == buffer.nbytes());
  }
}

}  // namespace

TEST_CASE("gradient_as_bucket_view: every .grad shares its bucket's storage after backward", "[ddp][view]") {
  auto world = comm::init();
  parallel::DDPOptions options;
  options.gradient_as_bucket_view = true;
  options.first_bucket_mb = 0.001;
  options.bucket_cap_mb = 0.001;
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(make_plain_cnn(12), world, options);
  REQUIRE(ddp->reducer().bucket_count() >= 2);
  Batch data = make_batch(8, 13).shard(world->rank(), world->size());
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step << " (zero_grad before forward)");
    sgd_step(*ddp, data, 0.05);
    require_grads_are_bucket_views(*ddp);
  }
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step << " (zero_grad between forward and backward)");
    sgd_step_zeroing_after_forward(*ddp, data, 0.05);
    require_grads_are_bucket_views(*ddp);
  }
}

TEST_CASE("gradient_as_bucket_view with zero_grad() between forward and backward matches one process",
          "[ddp][view]") {
  auto world = comm::init();
  for (bool as_view : {false, true}) {
    INFO("gradient_as_bucket_view=" << as_view);
    parallel::DDPOptions options;
    options.gradient_as_bucket_view = as_view;
    options.first_bucket_mb = 0.001;
    options.bucket_cap_mb = 0.001;
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(make_mlp(100 + world->rank()), world, options);
    auto expected = make_mlp(100);
    Batch data = make_batch(16, 14);
    for (int step = 0; step < 4; ++step) {
      INFO("step " << step);
      sgd_step_zeroing_after_forward(*ddp, data.shard(world->rank(), world->size()), 0.1);
      sgd_step_zeroing_after_forward(*expected, data, 0.1);
      require_same_parameters(*ddp, *expected, 1e-5);
    }
  }
}

TEST_CASE("no_sync accumulates locally and the next synced backward averages the sum", "[ddp][view]") {
  auto world = comm::init();
  for (bool as_view : {false, true}) {
    for (bool set_to_none : {false, true}) {
      // set_to_none: the no_sync pass makes local gradients, not bucket views; in place: with
      // gradient_as_bucket_view it accumulates straight into the views.
      INFO("gradient_as_bucket_view=" << as_view << " zero_grad(set_to_none=" << set_to_none << ")");
      parallel::DDPOptions options;
      options.gradient_as_bucket_view = as_view;
      auto ddp = std::make_shared<parallel::DistributedDataParallel>(make_mlp(4), world, options);
      auto expected = make_mlp(4);
      Batch first = make_batch(8, 21), second = make_batch(8, 22);
      ddp->zero_grad(set_to_none);
      {
        auto guard = ddp->no_sync();
        loss_of(*ddp, first.shard(world->rank(), world->size())).backward();
      }
      loss_of(*ddp, second.shard(world->rank(), world->size())).backward();
      // Reference: each rank's two micro-batch gradients, summed, averaged over ranks.
      expected->zero_grad();
      for (int r = 0; r < world->size(); ++r) {
        loss_of(*expected, first.shard(r, world->size())).backward();
        loss_of(*expected, second.shard(r, world->size())).backward();
      }
      require_same_gradients(*ddp, *expected, 1.0 / world->size(), 1e-5);
      if (as_view) require_grads_are_bucket_views(*ddp);
    }
  }
}

namespace {

// Cheap last layer, expensive convolutions before it: after the head's gradients (the first
// bucket) are ready, backward still has the convolutions' input and weight gradients to compute.
struct HeavyBottom : nn::Cloneable<HeavyBottom> {
  HeavyBottom() : Cloneable("HeavyBottom") { reset(); }
  void reset() override {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 3).padding(1)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(64, 64, 3).padding(1)));
    head = register_module("head", nn::Linear(64, 4));
  }
  Tensor forward(const Tensor& x) override {
    return head(adaptive_avg_pool2d(conv2(conv1(x).relu()).relu(), 1).flatten(1));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear head{nullptr};
};

}  // namespace

TEST_CASE("the first bucket's all-reduce has completed before backward ends", "[ddp][overlap]") {
  auto world = comm::init();
  parallel::DDPOptions options;
  options.first_bucket_mb = 0.00001;  // head.bias alone (16 bytes)
  options.bucket_cap_mb = 0.001;
  manual_seed(17);
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(std::make_shared<HeavyBottom>(), world, options);
  REQUIRE(ddp->reducer().bucket_count() >= 3);
  Generator g(18);
  Tensor x = randn({16, 3, 32, 32}, {}, &g);
  Tensor y = randint(0, 4, {16}, TensorOptions(kInt64), &g);
  // The ranks start each step together; then a 16-byte all-reduce has the whole convolution
  // backward (about 100 ms) to complete in. A loaded machine may stall one step, so one
  // step in four with the evidence is enough.
  size_t best = 0;
  for (int step = 0; step < 4; ++step) {
    world->barrier()->wait();
    ddp->zero_grad();
    cross_entropy(ddp->forward(x), y).backward();
    const parallel::ReducerStats& stats = ddp->reducer().stats();
    INFO("step " << step << ": " << stats.completed_before_end_of_backward << " of " << stats.buckets
                 << " buckets completed before the end of backward; first launch to end of backward "
                 << stats.first_launch_to_end_of_backward.count() / 1e6 << " ms");
    REQUIRE(stats.launched_during_backward >= stats.buckets - 1);
    best = std::max(best, stats.completed_before_end_of_backward);
  }
  REQUIRE(best >= 1);
}

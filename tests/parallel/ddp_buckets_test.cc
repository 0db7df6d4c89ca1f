// DDP's buckets under mpirun: gradients as bucket views (storage shared with the bucket, whatever
// the caller does with zero_grad), the bucket layout (1 MB first / 25 MB defaults, reverse
// registration order, the one rebuild in arrival order) and a first bucket whose all-reduce
// completes while backward still runs. Models run on rank_device() (CPU, or cuda:LOCAL_RANK over
// NCCL).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "comm/init.h"
#include "core/ember_core.h"
#include "core/profiler.h"
#include "nn/nn.h"
#include "parallel/bucket_autotune.h"
#include "parallel/ddp.h"
#include "tests/parallel/ddp_helpers.h"
#include "tests/trace_checks.h"

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
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_plain_cnn(12)), world, options);
  REQUIRE(ddp->reducer().bucket_count() >= 2);
  for (size_t b = 0; b < ddp->reducer().bucket_count(); ++b)
    REQUIRE(ddp->reducer().bucket_buffer(b).device() == rank_device());
  Batch data = make_batch(8, 13).rank_shard(world->rank(), world->size());
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

TEST_CASE("gradient_as_bucket_view with zero_grad() between forward and backward matches one process", "[ddp][view]") {
  auto world = comm::init();
  for (bool as_view : {false, true}) {
    INFO("gradient_as_bucket_view=" << as_view);
    parallel::DDPOptions options;
    options.gradient_as_bucket_view = as_view;
    options.first_bucket_mb = 0.001;
    options.bucket_cap_mb = 0.001;
    auto model = on_rank_device(make_mlp(100 + world->rank()));
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(model, world, options);
    auto expected = make_mlp(100);
    Batch data = make_batch(16, 14);
    for (int step = 0; step < 4; ++step) {
      INFO("step " << step);
      sgd_step_zeroing_after_forward(*ddp, data.rank_shard(world->rank(), world->size()), 0.1);
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
      auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_mlp(4)), world, options);
      auto expected = make_mlp(4);
      Batch first = make_batch(8, 21), second = make_batch(8, 22);
      ddp->zero_grad(set_to_none);
      {
        auto guard = ddp->no_sync();
        loss_of(*ddp, first.rank_shard(world->rank(), world->size())).backward();
      }
      loss_of(*ddp, second.rank_shard(world->rank(), world->size())).backward();
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

// A cheap last layer with convolutions before it: after the head's gradients (the first bucket)
// are ready, backward still has the convolutions' gradients to compute.
struct HeavyBottom : nn::Cloneable<HeavyBottom> {
  explicit HeavyBottom(int64_t channels) : Cloneable("HeavyBottom"), channels(channels) { reset(); }
  void reset() override {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, channels, 3).padding(1)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(channels, channels, 3).padding(1)));
    head = register_module("head", nn::Linear(channels, 4));
  }
  Tensor forward(const Tensor& x) override {
    return head(adaptive_avg_pool2d(conv2(conv1(x).relu()).relu(), 1).flatten(1));
  }
  int64_t channels;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear head{nullptr};
};

}  // namespace

TEST_CASE("the first bucket's all-reduce completes while backward is still running", "[ddp][overlap]") {
  auto world = comm::init();
  parallel::DDPOptions options;
  options.first_bucket_mb = 0.00001;  // one head parameter alone (16 bytes before the rebuild)
  options.bucket_cap_mb = 0.001;
  manual_seed(17);
  auto model = std::make_shared<HeavyBottom>(16);
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(model), world, options);
  REQUIRE(ddp->reducer().bucket_count() >= 3);
  // Events, not a race with compute: conv1.weight's gradient comes at the end of backward, and its
  // hook waits there (at most 60 s) for the first bucket's all-reduce to complete. Only buckets
  // launched during backward, with communication progressing meanwhile, let it through in time; a
  // reducer that launched them at the end of backward would leave every rank waiting out the bound.
  bool in_hook = false, reduced_in_hook = false;
  model->conv1->weight.register_post_accumulate_grad_hook([&](const Tensor&) {
    in_hook = true;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!ddp->reducer().bucket_reduced(0) && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    reduced_in_hook = ddp->reducer().bucket_reduced(0);
  });
  Generator g(18);
  Tensor x = randn({4, 3, 16, 16}, {}, &g).to(rank_device());
  Tensor y = randint(0, 4, {4}, TensorOptions(kInt64), &g).to(rank_device());
  for (int step = 0; step < 4; ++step) {  // before and after the buckets' rebuild
    in_hook = reduced_in_hook = false;
    ddp->zero_grad();
    cross_entropy(ddp->forward(x), y).backward();
    const parallel::ReducerStats& stats = ddp->reducer().stats();
    INFO("step " << step << ": " << stats.launched_during_backward << " of " << stats.buckets
                 << " buckets launched during backward, " << stats.completed_before_end_of_backward
                 << " completed before its end");
    REQUIRE(in_hook);
    {
      INFO("conv1.weight's hook waited 60 s for the first bucket's all-reduce to complete");
      REQUIRE(reduced_in_hook);
    }
    REQUIRE(stats.launched_during_backward >= stats.buckets - 1);
    REQUIRE(stats.completed_before_end_of_backward >= 1);
  }
}

// The timeline of that step (core/profiler.h): backward's range, each bucket's collective as an
// async span named for its bucket, and the end-of-backward wait. The hook above makes the first
// bucket complete inside backward, so its span must lie inside backward's range. Over NCCL each
// bucket's all-reduce is a range the device timed on the communicator's stream.
TEST_CASE("profiler: a DDP step's bucket collectives overlap its backward", "[ddp][overlap][profiler]") {
  auto world = comm::init();
  parallel::DDPOptions options;
  options.first_bucket_mb = 0.00001;
  options.bucket_cap_mb = 0.001;
  manual_seed(19);
  auto model = std::make_shared<HeavyBottom>(16);
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(model), world, options);
  model->conv1->weight.register_post_accumulate_grad_hook([&](const Tensor&) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!ddp->reducer().bucket_reduced(0) && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  Generator g(20);
  Tensor x = randn({4, 3, 16, 16}, {}, &g).to(rank_device());
  Tensor y = randint(0, 4, {4}, TensorOptions(kInt64), &g).to(rank_device());
  for (int step = 0; step < 2; ++step) {  // the buckets' rebuild comes after the first
    ddp->zero_grad();
    cross_entropy(ddp->forward(x), y).backward();
  }
  profiler::Session session({.rank = world->rank()});
  session.start();
  ddp->zero_grad();
  cross_entropy(ddp->forward(x), y).backward();
  session.stop();

  const std::vector<TraceEvent> events = parse_trace(session.chrome_trace());
  INFO(malformed(events));
  REQUIRE(malformed(events).empty());
  const TraceEvent* backward = nullptr;
  int waits = 0;
  for (const TraceEvent& e : events) {
    if (e.phase == "X" && e.name == "backward") backward = &e;
    waits += e.phase == "X" && e.category == "comm" && e.name.find("wait for buckets") != std::string::npos;
  }
  REQUIRE(backward != nullptr);
  CHECK(backward->pid == world->rank());
  CHECK(waits == 1);
  std::vector<TraceEvent> buckets;
  if (rank_device().is_cuda()) {
    // NCCL's collectives are timed by the device on the communicator's stream (host ranges show
    // when backward queued work, not when the device ran it, so no overlap is asked of them).
    const auto tracks = session.thread_names();
    for (const TraceEvent& e : events)
      if (e.phase == "X" && e.name.rfind("DDP bucket ", 0) == 0) {
        CHECK(tracks.at(static_cast<size_t>(e.tid)).rfind("cuda:", 0) == 0);
        CHECK(e.dur > 0);
        buckets.push_back(e);
      }
    CHECK(buckets.size() == ddp->reducer().bucket_count());
    return;
  }
  for (const TraceEvent& span : async_spans(events))
    if (span.name.rfind("DDP bucket ", 0) == 0) buckets.push_back(span);
  REQUIRE(buckets.size() == ddp->reducer().bucket_count());
  const TraceEvent* first = nullptr;
  for (const TraceEvent& b : buckets) {
    CHECK(b.name.find("all_reduce") != std::string::npos);
    if (b.name.rfind("DDP bucket 0:", 0) == 0) first = &b;
  }
  REQUIRE(first != nullptr);
  INFO("bucket 0 " << first->ts << " + " << first->dur << " us, backward " << backward->ts << " + " << backward->dur);
  CHECK(first->ts >= backward->ts);
  CHECK(first->end() <= backward->end());
}

namespace {

// Parameters p0, p1, ... of the given numbers of floats, multiplied into the input in
// `use_order` (so gradients arrive in the reverse of that order, whatever the registration).
struct Scales : nn::Module {
  explicit Scales(const std::vector<int64_t>& numels) : Module("Scales") {
    for (size_t i = 0; i < numels.size(); ++i) {
      register_parameter("p" + std::to_string(i), full({numels[i]}, 1.0 + 0.1 * static_cast<double>(i)));
      use_order.push_back(i);
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (size_t i : use_order) h = h * *find_parameter("p" + std::to_string(i));
    return h;
  }
  std::vector<size_t> use_order;
};

using Layout = std::vector<std::vector<std::string>>;

}  // namespace

TEST_CASE("bucket layout: 1 MB first, then 25 MB, in reverse registration order", "[ddp][layout]") {
  auto world = comm::init();
  const int64_t mib = 1024 * 1024 / 4;  // floats in 1 MiB
  {
    // p5 (64 B) + p4 (1 MiB) reach the first bucket's 1 MB; p3 + p2 (24 MiB) stay under 25 MB
    // and p1 takes the second bucket past it; p0 is left for a third.
    auto model = std::make_shared<Scales>(std::vector<int64_t>{16, 4 * mib, 12 * mib, 12 * mib, mib, 16});
    parallel::DistributedDataParallel ddp(on_rank_device(model), world);  // default options
    REQUIRE(ddp.reducer().bucket_count() == 3);
    REQUIRE(ddp.reducer().bucket_parameter_names() == Layout{{"p5", "p4"}, {"p3", "p2", "p1"}, {"p0"}});
  }
  {
    // Small caps: two 16-byte parameters per bucket, last registered first.
    auto model = std::make_shared<Scales>(std::vector<int64_t>{4, 4, 4, 4, 4});
    parallel::DDPOptions options;
    options.first_bucket_mb = 30.0 / (1024 * 1024);
    options.bucket_cap_mb = 30.0 / (1024 * 1024);
    parallel::DistributedDataParallel ddp(on_rank_device(model), world, options);
    REQUIRE(ddp.reducer().bucket_parameter_names() == Layout{{"p4", "p3"}, {"p2", "p1"}, {"p0"}});
  }
}

TEST_CASE("buckets are rebuilt once, after the first iteration, in rank 0's arrival order", "[ddp][layout]") {
  auto world = comm::init();
  auto model = std::make_shared<Scales>(std::vector<int64_t>{4, 4, 4, 4});
  parallel::DDPOptions options;
  options.first_bucket_mb = 1e-5;  // 10 bytes: one parameter per bucket
  options.bucket_cap_mb = 1e-5;
  parallel::DistributedDataParallel ddp(on_rank_device(model), world, options);
  REQUIRE(ddp.reducer().bucket_parameter_names() == Layout{{"p3"}, {"p2"}, {"p1"}, {"p0"}});
  // Rank 0 uses p1, p3, p0, p2 (gradients arrive p2, p0, p3, p1); the others another order.
  model->use_order = world->rank() == 0 ? std::vector<size_t>{1, 3, 0, 2} : std::vector<size_t>{0, 1, 2, 3};
  auto reference = std::make_shared<Scales>(std::vector<int64_t>{4, 4, 4, 4});
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    Tensor x = full({4}, 1.0 + world->rank(), rank_device());
    ddp.zero_grad();
    ddp.forward(x).sum().backward();
    REQUIRE(ddp.reducer().bucket_parameter_names() == Layout{{"p2"}, {"p0"}, {"p3"}, {"p1"}});
    REQUIRE_FALSE(ddp.reducer().rebuild_pending());
    // Whatever the layout, each gradient is the ranks' average: d/dp_i of prod(p) * x.
    reference->zero_grad();
    for (int r = 0; r < world->size(); ++r) reference->forward(full({4}, 1.0 + r)).sum().backward();
    require_same_gradients(ddp, *reference, 1.0 / world->size(), 1e-6);
    model->use_order = {3, 2, 1, 0};  // a later change of order does not rebuild again
  }
}

// bucket_cap_mb = kAuto: after the second backward (a measured timeline and all-reduces timed on
// the group) each trial layout runs (one untimed and one timed iteration here), then the fastest stays, the same on
// every rank (the slowest rank's times, agreed); training takes one process's steps throughout.
TEST_CASE("bucket_cap_mb = kAuto: every rank takes the same measured choice, and steps stay exact", "[ddp][autotune]") {
  auto world = comm::init();
  parallel::DDPOptions options;
  options.bucket_cap_mb = parallel::kAuto;
  options.autotune_trial_steps = 1;
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(on_rank_device(make_plain_cnn(31)), world, options);
  auto expected = make_plain_cnn(31);
  Batch data = make_batch(8, 32);
  int chosen_at = -1;
  for (int step = 0; step < 17; ++step) {
    INFO("step " << step);
    if (step <= 3) CHECK(ddp->reducer().bucket_choice() == nullptr);
    if (chosen_at < 0 && ddp->reducer().bucket_choice()) chosen_at = step;
    sgd_step(*ddp, data.rank_shard(world->rank(), world->size()), 0.05);
    sgd_step(*expected, data, 0.05);
    require_same_parameters(*ddp, *expected, 1e-5);
  }
  const parallel::BucketChoice* choice = ddp->reducer().bucket_choice();
  REQUIRE(choice != nullptr);
  // Two iterations, then two per distinct trial layout (an untimed one and one timed; at most seven).
  CHECK(chosen_at == 2 + 2 * static_cast<int>(choice->measured.size()));
  REQUIRE(choice->measured.size() >= 1);
  CHECK(choice->measured.front().cap_mb == 25);
  for (const parallel::BucketCandidate& trial : choice->measured) CHECK(trial.measured_s > 0);
  CHECK(choice->cost.points.size() >= 1);
  for (const auto& [bytes, seconds] : choice->cost.points) CHECK(seconds > 0);
  if (world->rank() == 0) CHECK(choice->candidates.size() >= 11);
  bool among_trials = false;
  for (const parallel::BucketCandidate& trial : choice->measured)
    among_trials |= trial.first_mb == choice->first_mb && trial.cap_mb == choice->cap_mb;
  CHECK(among_trials);
  // Every rank's layout (the bucket count, the caps, each bucket's parameter count, the trials'
  // times; a fixed length, so that the all-reduce matches whatever the layouts): summed, it is every
  // rank's own times the world size only if all are the same.
  std::vector<double> layout(64, 0.0);
  layout[0] = static_cast<double>(ddp->reducer().bucket_count()), layout[1] = choice->first_mb;
  layout[2] = choice->cap_mb;
  const auto names = ddp->reducer().bucket_parameter_names();
  for (size_t b = 0; b < names.size() && b + 3 < 32; ++b) layout[b + 3] = static_cast<double>(names[b].size());
  for (size_t t = 0; t < choice->measured.size(); ++t) layout[32 + t] = choice->measured[t].measured_s;
  Tensor mine = tensor(layout).to(rank_device());
  Tensor total = mine.clone();
  world->all_reduce(total)->wait();
  const std::vector<double> got = total.to(kCPU).to_vector<double>();
  for (size_t i = 0; i < layout.size(); ++i) CHECK(got[i] == Approx(layout[i] * world->size()).epsilon(1e-12));
}

// Bucketing, readiness tracking, launch order and the end-of-backward wait.
#include "parallel/reducer.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "autograd/engine.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/profiler.h"
#include "core/runtime.h"
#include "parallel/replica_sync.h"

namespace ember::parallel {

namespace {

constexpr double kNotReady = -1e300;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> parameters, std::shared_ptr<comm::ProcessGroup> group,
                 ReducerOptions options)
    : parameters_(std::move(parameters)), group_(std::move(group)), options_(options), hook_(allreduce_hook) {
  const size_t n = parameters_.size();
  // DDP has checked that the module lives on one device.
  if (n > 0) device_ = parameters_.front().second.device();
  ready_.assign(n, false);
  unused_.assign(n, false);
  for (const auto& [name, p] : parameters_) {
    EMBER_CHECK(p.is_contiguous(), "DistributedDataParallel: parameter '", name, "' must be contiguous");
    EMBER_CHECK(is_floating(p.dtype()), "DistributedDataParallel: parameter '", name, "' must be floating point");
  }
  EMBER_CHECK(
      options_.first_bucket_mb > 0 && (options_.bucket_cap_mb > 0 || autotuning()),
      "DistributedDataParallel: expected positive bucket sizes (or bucket_cap_mb = kAuto), got first_bucket_mb ",
      options_.first_bucket_mb, " and bucket_cap_mb ", options_.bucket_cap_mb);
  first_mb_ = options_.first_bucket_mb;
  cap_mb_ = autotuning() ? 25.0 : options_.bucket_cap_mb;
  std::vector<std::string> kinds;
  for (const auto& [name, p] : parameters_) {
    bytes_.push_back(static_cast<int64_t>(p.nbytes()));
    const std::string key = std::string(dtype_name(p.dtype())) + " " + p.device().str();
    const auto found = std::find(kinds.begin(), kinds.end(), key);
    kind_.push_back(static_cast<int>(found - kinds.begin()));
    if (found == kinds.end()) kinds.push_back(key);
  }
  // Reverse registration order: the last layers' gradients are ready first.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  build_buckets(order);
  for (size_t i = 0; i < n; ++i) {
    hook_handles_.push_back(
        parameters_[i].second.register_post_accumulate_grad_hook([this, i](const Tensor&) { mark_grad_ready(i); }));
  }
}

Reducer::~Reducer() {
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].second.remove_hook(hook_handles_[i]);
}

void Reducer::build_buckets(const std::vector<size_t>& order) {
  order_ = order;
  buckets_.clear();
  bucket_of_.assign(parameters_.size(), 0);
  slot_of_.assign(parameters_.size(), 0);
  for (std::vector<size_t>& params : partition_buckets(order, bytes_, kind_, first_mb_, cap_mb_)) {
    buckets_.emplace_back();
    buckets_.back().params = std::move(params);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    int64_t total = 0;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      bucket_of_[bucket.params[k]] = b;
      slot_of_[bucket.params[k]] = k;
      bucket.offsets.push_back(total);
      total += parameters_[bucket.params[k]].second.numel();
    }
    const Tensor& first = parameters_[bucket.params.front()].second;
    bucket.buffer = zeros({total}, first.options());
    bucket.pending = bucket.params.size();
  }
  stats_.buckets = buckets_.size();
  if (options_.gradient_as_bucket_view) point_grads_at_buckets();
}

// gradient_as_bucket_view: each .grad becomes a view into its bucket, keeping any value it had.
void Reducer::point_grads_at_buckets() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i].second;
    const Bucket& bucket = buckets_[bucket_of_[i]];
    Tensor view = bucket.buffer.narrow(0, bucket.offsets[slot_of_[i]], p.numel()).view(p.sizes());
    const Tensor& old = p.grad();
    if (old.defined() && old.unsafe_impl() != view.unsafe_impl())
      copy_into(view, old);
    else if (!old.defined())
      view.zero_();
    p.mutable_grad() = view;
  }
}

std::vector<std::vector<std::string>> Reducer::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> names;
  for (const Bucket& bucket : buckets_) {
    names.emplace_back();
    for (size_t i : bucket.params) names.back().push_back(parameters_[i].first);
  }
  return names;
}

bool Reducer::bucket_reduced(size_t b) const {
  EMBER_CHECK(b < buckets_.size(), "Reducer::bucket_reduced: no bucket ", b, " (there are ", buckets_.size(), ")");
  return b < next_bucket_ && buckets_[b].work != nullptr && buckets_[b].work->is_completed();
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  if (!sync_) return;
  if (options_.gradient_as_bucket_view) {
    // zero_grad(set_to_none) drops the views; bring them back before gradients accumulate.
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const Tensor& g = parameters_[i].second.grad();
      if (!g.defined() || g.storage() != buckets_[bucket_of_[i]].buffer.storage()) {
        point_grads_at_buckets();
        break;
      }
    }
  }
  std::fill(unused_.begin(), unused_.end(), false);
  if (!options_.find_unused_parameters) return;
  std::vector<const TensorImpl*> used = reachable_leaves(outputs);
  std::sort(used.begin(), used.end());
  for (size_t i = 0; i < parameters_.size(); ++i)
    unused_[i] = !std::binary_search(used.begin(), used.end(), parameters_[i].second.unsafe_impl());
}

void Reducer::mark_grad_ready(size_t index) {
  if (!sync_) return;  // no_sync(): gradients just accumulate locally
  if (!in_backward_) {
    in_backward_ = true;
    window_start_ = seconds_now();
    if (autotuning() && iterations_ == 1) timeline_.ready_s.assign(parameters_.size(), kNotReady);
    stats_.launched_during_backward = 0;
    autograd::queue_callback([this] { finalize(); });
    // Parameters the graph cannot reach are ready now, with zero gradient.
    for (size_t i = 0; i < parameters_.size(); ++i)
      if (unused_[i] && !ready_[i]) mark_grad_ready(i);
  }
  EMBER_CHECK(!ready_[index], "DistributedDataParallel (rank ", group_->rank(), " on ", device_, "): parameter '",
              parameters_[index].first,
              "' received its gradient twice in one backward pass (is it shared between modules that DDP "
              "sees separately, or was backward run twice without an optimizer step?)");
  ready_[index] = true;
  if (iterations_ == 0) arrival_order_.push_back(index);
  if (autotuning() && iterations_ == 1) timeline_.ready_s[index] = seconds_now();
  Bucket& bucket = buckets_[bucket_of_[index]];
  {
    NoGradGuard no_grad;
    Tensor& p = parameters_[index].second;
    Tensor slot = bucket.buffer.narrow(0, bucket.offsets[slot_of_[index]], p.numel());
    const Tensor& grad = p.grad();
    const bool is_slot = grad.defined() && grad.storage() == slot.storage() && grad.data_ptr() == slot.data_ptr() &&
                         grad.is_contiguous() && grad.numel() == slot.numel();
    if (!grad.defined() || unused_[index])
      slot.zero_();
    else if (!is_slot)
      copy_into(slot, grad.reshape({-1}));
    // gradient_as_bucket_view: a .grad that is not the slot's view (zero_grad() with set_to_none
    // between forward and backward made a fresh one, or the caller replaced it) was copied in
    // above; .grad becomes the view again, so it receives the averaged result.
    if (options_.gradient_as_bucket_view && !is_slot) p.mutable_grad() = slot.view(p.sizes());
  }
  if (--bucket.pending == 0) mark_bucket_ready(bucket_of_[index]);
}

void Reducer::mark_bucket_ready(size_t b) {
  buckets_[b].ready = true;
  launch_ready_buckets(true);
}

void Reducer::launch_ready_buckets(bool from_hook) {
  // Strictly in index order, so every rank issues the same all-reduce sequence.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].ready) {
    Bucket& bucket = buckets_[next_bucket_];
    GradBucket view;
    view.index = next_bucket_;
    view.buffer = bucket.buffer;
    for (size_t i : bucket.params) view.names.push_back(parameters_[i].first);
    view.is_last = next_bucket_ + 1 == buckets_.size();
    if (next_bucket_ == 0) first_launch_ = std::chrono::steady_clock::now();
    comm::OverlapScope overlap;  // backward goes on while this bucket reduces
    const profiler::Tag tag(profiler::active() ? "DDP bucket " + std::to_string(next_bucket_) : std::string());
    bucket.work = hook_(*group_, view);
    if (from_hook) ++stats_.launched_during_backward;
    ++next_bucket_;
  }
}

void Reducer::finalize() {
  auto end_of_backward = std::chrono::steady_clock::now();
  if (autotuning() && iterations_ == 1) timeline_.backward_end_s = seconds_now();
  stats_.completed_before_end_of_backward = 0;
  for (size_t b = 0; b < next_bucket_; ++b)
    if (buckets_[b].work->is_completed()) ++stats_.completed_before_end_of_backward;
  std::vector<std::string> missing;
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (!ready_[i]) missing.push_back(parameters_[i].first);
  if (!missing.empty()) {
    std::ostringstream names;
    for (size_t k = 0; k < missing.size(); ++k) names << (k ? ", " : "") << missing[k];
    reset_iteration();
    EMBER_FAIL("DistributedDataParallel (rank ", group_->rank(), " of ", group_->name(), " on ", device_,
               "): ", missing.size(), " parameter(s) received no gradient in this backward pass: ", names.str(),
               ". DDP cannot know whether other ranks used them, so it would wait forever; construct "
               "DistributedDataParallel with find_unused_parameters=true, or make every parameter take part in the "
               "loss.");
  }
  launch_ready_buckets(false);
  stats_.first_launch_to_end_of_backward =
      std::chrono::duration_cast<std::chrono::nanoseconds>(end_of_backward - first_launch_);
  auto wait_start = std::chrono::steady_clock::now();
  for (Bucket& bucket : buckets_) bucket.work->wait();
  auto done = std::chrono::steady_clock::now();
  profiler::complete("comm", "DDP: wait for buckets (exposed communication)", wait_start, done);
  stats_.wait_time = std::chrono::duration_cast<std::chrono::nanoseconds>(done - wait_start);
  stats_.comm_time = std::chrono::duration_cast<std::chrono::nanoseconds>(done - first_launch_);
  if (!options_.gradient_as_bucket_view) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      Tensor& p = parameters_[i].second;
      const Bucket& bucket = buckets_[bucket_of_[i]];
      Tensor averaged = bucket.buffer.narrow(0, bucket.offsets[slot_of_[i]], p.numel()).view(p.sizes());
      if (p.grad().defined())
        copy_into(p.mutable_grad(), averaged);
      else
        p.mutable_grad() = averaged.clone();
    }
  }
  // The trials' measure: from the first gradient to the averaged gradients, all on the device.
  double window = 0;
  if (autotuning() && !choice_ && iterations_ >= 2) {
    const DeviceRuntime* runtime = find_runtime(device_.type);
    if (runtime && runtime->synchronize && !device_.is_cpu()) runtime->synchronize(device_);
    window = seconds_now() - window_start_;
  }
  ++iterations_;
  reset_iteration();
  if (iterations_ == 1 && options_.rebuild_buckets && !rebuilt_) rebuild_from_first_iteration();
  autotune_after_iteration(window);
}

void Reducer::reset_iteration() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.ready = false;
    bucket.work = nullptr;
  }
  next_bucket_ = 0;
  in_backward_ = false;
}

void Reducer::rebuild_from_first_iteration() {
  // Rank 0's arrival order decides for everyone; bucket layouts must agree across ranks.
  const size_t n = parameters_.size();
  Tensor order = empty({static_cast<int64_t>(n)}, TensorOptions(kInt64));
  int64_t* data = order.data_ptr<int64_t>();
  std::vector<bool> placed(n, false);
  size_t k = 0;
  for (size_t i : arrival_order_) {
    data[k++] = static_cast<int64_t>(i);
    placed[i] = true;
  }
  for (size_t i = n; i-- > 0;)
    if (!placed[i]) data[k++] = static_cast<int64_t>(i);
  // Broadcast on the parameters' device (a group for GPUs carries no host tensors); the copy back
  // orders after it on the current stream.
  Tensor on_device = order.to(device_);
  group_->broadcast(on_device, 0)->wait();
  std::vector<int64_t> received = on_device.to_vector<int64_t>();
  std::vector<size_t> agreed(n);
  for (size_t i = 0; i < n; ++i) agreed[i] = static_cast<size_t>(received[i]);
  build_buckets(agreed);
  rebuilt_ = true;
  arrival_order_.clear();
}

void Reducer::shadow_backward() {
  // Zero gradients stand in for this rank's; the bucket collectives match the active ranks'.
  for (size_t b = 0; b < buckets_.size(); ++b) {
    GradBucket view;
    view.index = b;
    view.buffer = zeros_like(buckets_[b].buffer);
    view.is_last = b + 1 == buckets_.size();
    // In an OverlapScope like the active ranks' launches: MPI matches their non-blocking
    // all-reduces only with non-blocking ones.
    comm::OverlapScope overlap;
    hook_(*group_, view)->wait();
  }
  ++iterations_;
  if (iterations_ == 1 && options_.rebuild_buckets && !rebuilt_) rebuild_from_first_iteration();
  autotune_after_iteration(0);  // the same collectives and layouts as the active ranks'
}

}  // namespace ember::parallel

namespace ember::parallel {

AllReduceCost Reducer::measure_all_reduce() {
  // Sizes from a quarter MB to the whole model's gradients (the largest bucket there can be),
  // each all-reduced once untimed, then timed three times (the median kept). On a device the host
  // waits for the device after each: this runs once, outside any step.
  int64_t total = 0;
  for (int64_t b : bytes_) total += b;
  const DType dtype = parameters_.front().second.dtype();
  const int64_t element = static_cast<int64_t>(element_size(dtype));
  std::vector<int64_t> sizes;
  for (double mb : {0.25, 1.0, 5.0, 25.0, 100.0}) {
    const int64_t size = std::min<int64_t>(total, static_cast<int64_t>(mb * 1024 * 1024));
    if (sizes.empty() || size > sizes.back()) sizes.push_back(size);
  }
  const DeviceRuntime* runtime = find_runtime(device_.type);
  AllReduceCost cost;
  for (int64_t size : sizes) {
    Tensor buffer = zeros({std::max<int64_t>(1, size / element)}, TensorOptions(dtype).device(device_));
    std::vector<double> times;
    for (int rep = 0; rep < 4; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      comm::OverlapScope overlap;  // as the buckets' own all-reduces are issued
      group_->all_reduce(buffer, comm::ReduceOp::Avg)->wait();
      if (runtime && runtime->synchronize && !device_.is_cpu()) runtime->synchronize(device_);
      if (rep > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    cost.points.push_back({static_cast<double>(size), times[times.size() / 2]});
  }
  return cost;
}

void Reducer::autotune_after_iteration(double window_s) {
  if (!autotuning() || choice_ || iterations_ < 2) return;
  if (iterations_ == 2) {
    start_trials();
    return;
  }
  // Each layout's first iteration is not timed: it touches the new buckets' pages for the first
  // time (for ResNet-18's 43 MB, a cost the size of the differences between layouts).
  if (!trial_warmed_) {
    trial_warmed_ = true;
    return;
  }
  trial_seconds_[trial_].push_back(window_s);
  if (static_cast<int>(trial_seconds_[trial_].size()) < options_.autotune_trial_steps) return;
  trial_warmed_ = false;
  if (++trial_ < trials_.size()) {
    std::tie(first_mb_, cap_mb_) = trials_[trial_];
    build_buckets(order_);
    return;
  }
  finish_trials();
}

void Reducer::start_trials() {
  // The simulation's pick, from rank 0's timeline and all-reduce times (a rank 0 that measured no
  // backward, having joined out of data, picks the default).
  const AllReduceCost cost = measure_all_reduce();
  const bool measured = !timeline_.ready_s.empty() && std::none_of(timeline_.ready_s.begin(), timeline_.ready_s.end(),
                                                                   [](double r) { return r == kNotReady; });
  BucketChoice simulated;
  double pick[2] = {first_mb_, cap_mb_};
  if (group_->rank() == 0 && measured) {
    simulated = choose_buckets(order_, bytes_, kind_, timeline_, cost, first_mb_, cap_mb_);
    pick[0] = simulated.first_mb, pick[1] = simulated.cap_mb;
  }
  Tensor agreed = tensor(std::vector<double>{pick[0], pick[1]}).to(device_);
  group_->broadcast(agreed, 0)->wait();
  const std::vector<double> values = agreed.to_vector<double>();
  simulated.cost = cost;
  pending_ = std::move(simulated);
  // The trials: the default, each cap with the default first bucket, and the simulation's pick;
  // a candidate that makes the same buckets as an earlier one is left out. Every rank makes the
  // same list from the agreed order.
  std::vector<std::pair<double, double>> wanted = {{first_mb_, cap_mb_}};
  for (double cap : {1.0, 5.0, 10.0, 50.0, 100.0}) wanted.push_back({first_mb_, cap});
  wanted.push_back({values[0], values[1]});
  std::vector<std::vector<std::vector<size_t>>> layouts;
  trials_.clear();
  for (const auto& [first, cap] : wanted) {
    auto layout = partition_buckets(order_, bytes_, kind_, first, cap);
    if (std::find(layouts.begin(), layouts.end(), layout) != layouts.end()) continue;
    layouts.push_back(std::move(layout));
    trials_.push_back({first, cap});
  }
  trial_seconds_.assign(trials_.size(), {});
  trial_ = 0;
  std::tie(first_mb_, cap_mb_) = trials_[0];
  build_buckets(order_);
}

void Reducer::finish_trials() {
  // Each trial's median window, the slowest rank's, agreed by an all-reduce.
  std::vector<double> medians;
  for (std::vector<double>& seconds : trial_seconds_) {
    std::sort(seconds.begin(), seconds.end());
    medians.push_back(seconds[seconds.size() / 2]);
  }
  Tensor slowest = tensor(medians).to(device_);
  group_->all_reduce(slowest, comm::ReduceOp::Max)->wait();
  medians = slowest.to_vector<double>();
  size_t best = 0;
  for (size_t t = 1; t < trials_.size(); ++t)
    if (medians[t] < medians[best]) best = t;
  if (!(medians[best] < 0.97 * medians[0])) best = 0;  // the default unless clearly slower
  BucketChoice choice = std::move(*pending_);
  pending_.reset();
  for (size_t t = 0; t < trials_.size(); ++t) {
    const size_t buckets = partition_buckets(order_, bytes_, kind_, trials_[t].first, trials_[t].second).size();
    choice.measured.push_back({trials_[t].first, trials_[t].second, buckets, 0, medians[t]});
  }
  std::tie(first_mb_, cap_mb_) = trials_[best];
  choice.first_mb = first_mb_, choice.cap_mb = cap_mb_;
  build_buckets(order_);
  if (group_->rank() == 0)
    std::fprintf(stderr, "DistributedDataParallel (rank 0 of %s): buckets chosen by measurement: %s\n",
                 group_->name().c_str(), choice.report().c_str());
  choice_ = std::move(choice);
}

}  // namespace ember::parallel

// DDP construction checks, the forward bracket (buffer broadcast, unused-parameter search) and
// the delegation that keeps state_dict keys bare.
#include "parallel/ddp.h"

#include <sstream>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "parallel/replica_sync.h"

namespace ember::parallel {

namespace {

std::vector<std::pair<std::string, Tensor>> trainable(const nn::Module& module) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : module.named_parameters())
    if (p.requires_grad()) out.emplace_back(name, p);
  return out;
}

constexpr const char* kWho = "DistributedDataParallel";

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<comm::ProcessGroup> group, DDPOptions options)
    : Module("DistributedDataParallel"), module_(std::move(module)), group_(std::move(group)), options_(options) {
  EMBER_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  EMBER_CHECK(group_ != nullptr, "DistributedDataParallel: the process group is null (call comm::init() first)");
  device_ = module_device(*module_, group_->rank(), kWho);
  verify_same_parameters(*group_, device_, *module_, kWho);
  broadcast_state_from(0);
  ReducerOptions r;
  r.first_bucket_mb = options_.first_bucket_mb;
  r.bucket_cap_mb = options_.bucket_cap_mb;
  r.autotune_trial_steps = options_.autotune_trial_steps;
  r.find_unused_parameters = options_.find_unused_parameters;
  r.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  r.rebuild_buckets = options_.rebuild_buckets;
  reducer_ = std::make_unique<Reducer>(trainable(*module_), group_, r);
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::broadcast_state_from(int root) {
  std::vector<Tensor> state;
  for (auto& [name, p] : module_->named_parameters()) state.push_back(p);
  for (auto& [name, b] : module_->named_buffers()) state.push_back(b);
  broadcast_tensors(*group_, state, root);
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers) return;
  std::vector<Tensor> buffers;
  for (auto& [name, b] : module_->named_buffers()) buffers.push_back(b);
  if (!buffers.empty()) broadcast_tensors(*group_, buffers, 0);
}

int64_t DistributedDataParallel::all_reduce_scalar(int64_t value, comm::ReduceOp op) {
  Tensor scalar = full({1}, value, TensorOptions(kInt64).device(device_));
  group_->all_reduce(scalar, op)->wait();
  return scalar.item<int64_t>();  // a copy to the host, after the all-reduce on the current stream
}

int64_t DistributedDataParallel::count_active(bool active) {
  return all_reduce_scalar(active ? 1 : 0, comm::ReduceOp::Sum);
}

void DistributedDataParallel::pre_forward() {
  if (join_enabled_) count_active(true);
  if (is_training()) sync_buffers();
}

void DistributedDataParallel::post_forward(const std::vector<Tensor>& outputs) {
  if (is_training() && GradMode::is_enabled()) reducer_->prepare_for_backward(outputs);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  pre_forward();
  Tensor out = module_->forward(input);
  post_forward({out});
  return out;
}

std::vector<std::pair<std::string, Tensor>> DistributedDataParallel::named_parameters(bool recurse) const {
  return module_->named_parameters(recurse);
}

std::vector<std::pair<std::string, Tensor>> DistributedDataParallel::named_buffers(bool recurse) const {
  return module_->named_buffers(recurse);
}

NamedTensors DistributedDataParallel::state_dict() const { return module_->state_dict(); }

nn::LoadResult DistributedDataParallel::load_state_dict(const NamedTensors& state, bool strict) {
  return module_->load_state_dict(state, strict);
}

void DistributedDataParallel::train(bool on) {
  Module::train(on);
  module_->train(on);
}

std::string DistributedDataParallel::extra_repr() const {
  std::ostringstream s;
  s << "world_size=" << group_->size() << ", rank=" << group_->rank() << ", buckets=" << reducer_->bucket_count()
    << ", module=" << module_->type_name();
  return s.str();
}

}  // namespace ember::parallel

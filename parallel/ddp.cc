// DDP construction checks, the forward bracket (buffer broadcast, unused-parameter search) and
// the delegation that keeps state_dict keys bare.
#include "parallel/ddp.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::parallel {

namespace {

std::vector<std::pair<std::string, Tensor>> trainable(const nn::Module& module) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : module.named_parameters())
    if (p.requires_grad()) out.emplace_back(name, p);
  return out;
}

// The one device holding the module's parameters and buffers (the CPU for a module without any):
// buckets and collectives need one, and a process group reaches one device per rank.
Device device_of(const nn::Module& module, int rank) {
  std::string first;
  Device device(kCPU);
  auto visit = [&](const char* kind, const std::string& name, const Tensor& t) {
    if (!t.defined()) return;
    if (first.empty()) {
      first = std::string(kind) + " '" + name + "'";
      device = t.device();
      return;
    }
    EMBER_CHECK(t.device() == device, "DistributedDataParallel (rank ", rank,
                "): the module spans several devices: ", first, " is on ", device, " but ", kind, " '", name,
                "' is on ", t.device(),
                "; DDP runs one device per process (move the whole module with module->to(device))");
  };
  for (auto& [name, p] : module.named_parameters()) visit("parameter", name, p);
  for (auto& [name, b] : module.named_buffers()) visit("buffer", name, b);
  return device;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<comm::ProcessGroup> group, DDPOptions options)
    : Module("DistributedDataParallel"), module_(std::move(module)), group_(std::move(group)), options_(options) {
  EMBER_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  EMBER_CHECK(group_ != nullptr, "DistributedDataParallel: the process group is null (call comm::init() first)");
  device_ = device_of(*module_, group_->rank());
  verify_same_parameters();
  broadcast_state_from(0);
  ReducerOptions r;
  r.first_bucket_mb = options_.first_bucket_mb;
  r.bucket_cap_mb = options_.bucket_cap_mb;
  r.find_unused_parameters = options_.find_unused_parameters;
  r.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  r.rebuild_buckets = options_.rebuild_buckets;
  reducer_ = std::make_unique<Reducer>(trainable(*module_), group_, r);
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::verify_same_parameters() {
  // One text per rank; every rank compares and names the first parameter where another differs.
  std::ostringstream text;
  auto params = module_->named_parameters();
  for (auto& [name, p] : params) text << name << '\t' << shape_str(p.sizes()) << '\t' << dtype_name(p.dtype()) << '\n';
  std::string mine = text.str();
  std::vector<std::string> texts;
  try {
    texts = gather_texts(mine);
  } catch (const Error& e) {
    // The first collective: a group that cannot reach the module's device fails here.
    EMBER_FAIL("DistributedDataParallel (rank ", group_->rank(), "): the module is on ", device_,
               params.empty() ? std::string() : " (parameter '" + params.front().first + "')", "; process group ",
               group_->name(), " failed its first collective there: ", e.what());
  }
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  std::vector<std::string> own = lines(mine);
  for (int r = 0; r < group_->size(); ++r) {
    const std::string& theirs = texts[r];
    if (theirs == mine) continue;
    std::vector<std::string> other = lines(theirs);
    size_t k = 0;
    while (k < own.size() && k < other.size() && own[k] == other[k]) ++k;
    auto pretty = [](const std::string& line) {
      std::string s = line;
      std::replace(s.begin(), s.end(), '\t', ' ');
      return s.empty() ? std::string("(nothing)") : s;
    };
    EMBER_FAIL("DistributedDataParallel: ranks registered different parameters (", own.size(), " on rank ",
               group_->rank(), ", ", other.size(), " on rank ", r, "); first difference at parameter #", k, ": rank ",
               group_->rank(), " has ", pretty(k < own.size() ? own[k] : ""), ", rank ", r, " has ",
               pretty(k < other.size() ? other[k] : ""));
  }
}

std::vector<std::string> DistributedDataParallel::gather_texts(const std::string& text) {
  // Byte tensors on the module's device, so a group for GPUs needs no host transport. Reading
  // them goes through copies to the CPU, which order after the gathers on the current stream.
  const int ranks = group_->size();
  const TensorOptions lengths_options = TensorOptions(kInt64).device(device_);
  Tensor lengths = empty({ranks}, lengths_options);
  group_->all_gather_into_tensor(lengths, full({1}, static_cast<int64_t>(text.size()), lengths_options))->wait();
  std::vector<int64_t> sizes = lengths.to_vector<int64_t>();
  const int64_t longest = std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  Tensor padded = zeros({longest}, TensorOptions(kUInt8));
  std::memcpy(padded.data_ptr(), text.data(), text.size());
  Tensor gathered = empty({ranks * longest}, TensorOptions(kUInt8).device(device_));
  group_->all_gather_into_tensor(gathered, padded.to(device_))->wait();
  Tensor host = gathered.to(Device(kCPU));
  const char* bytes = static_cast<const char*>(host.data_ptr());
  std::vector<std::string> texts;
  for (int r = 0; r < ranks; ++r) texts.emplace_back(bytes + r * longest, static_cast<size_t>(sizes[r]));
  return texts;
}

void DistributedDataParallel::broadcast_state_from(int root) {
  std::vector<Tensor> state;
  for (auto& [name, p] : module_->named_parameters()) state.push_back(p);
  for (auto& [name, b] : module_->named_buffers()) state.push_back(b);
  broadcast_from(state, root);
}

void DistributedDataParallel::broadcast_from(const std::vector<Tensor>& tensors, int root) {
  // One broadcast per dtype over a flat copy: few large messages beat many small ones.
  NoGradGuard no_grad;
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors)
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) dtypes.push_back(t.dtype());
  for (DType dtype : dtypes) {
    std::vector<Tensor> group;
    for (const Tensor& t : tensors)
      if (t.dtype() == dtype && t.numel() > 0) group.push_back(t);
    if (group.empty()) continue;
    std::vector<Tensor> flat_parts;
    for (const Tensor& t : group) flat_parts.push_back(t.detach().reshape({-1}));
    Tensor flat = cat(flat_parts);
    group_->broadcast(flat, root)->wait();
    int64_t offset = 0;
    for (const Tensor& t : group) {
      Tensor target = t.detach();
      copy_into(target, flat.narrow(0, offset, t.numel()).view(t.sizes()));
      target.bump_version();
      offset += t.numel();
    }
  }
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers) return;
  std::vector<Tensor> buffers;
  for (auto& [name, b] : module_->named_buffers()) buffers.push_back(b);
  if (!buffers.empty()) broadcast_from(buffers, 0);
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

// Sharded data parallelism, stages 1 and 2: shards made from the module's parameters, the
// gradient buckets reduce-scattered while backward runs, the lazy all-gather before forward, the
// global gradient norm, and full state dicts.
#include "parallel/sharded_data_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "autograd/engine.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/profiler.h"
#include "parallel/replica_sync.h"

namespace ember::parallel {

namespace {

constexpr const char* kWho = "ShardedDataParallel";

}  // namespace

ShardedDataParallel::ShardedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<comm::ProcessGroup> group,
                                         ShardingOptions options)
    : Module("ShardedDataParallel"), module_(std::move(module)), group_(std::move(group)), options_(options) {
  EMBER_CHECK(module_ != nullptr, kWho, ": the module is null");
  EMBER_CHECK(group_ != nullptr, kWho, ": the process group is null (call comm::init() first)");
  EMBER_CHECK(options_.stage() >= 1 && options_.stage() <= 3, kWho, " (rank ", group_->rank(),
              "): stage must be 1 (optimizer state sharded), 2 (gradients too) or 3 (parameters too), got ",
              options_.stage());
  EMBER_CHECK(options_.bucket_cap_mb() > 0, kWho, ": bucket_cap_mb must be positive, got ", options_.bucket_cap_mb());
  if (options_.reduce_dtype())
    EMBER_CHECK(is_floating(*options_.reduce_dtype()), kWho, ": reduce_dtype must be floating, got ",
                dtype_name(*options_.reduce_dtype()));
  device_ = module_device(*module_, group_->rank(), kWho);
  verify_same_parameters(*group_, device_, *module_, kWho);
  {
    std::vector<Tensor> state;
    for (auto& [name, p] : module_->named_parameters()) state.push_back(p);
    for (auto& [name, b] : module_->named_buffers()) state.push_back(b);
    broadcast_tensors(*group_, state, 0);
  }
  for (auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    EMBER_CHECK(p.is_contiguous(), kWho, " (rank ", group_->rank(), "): parameter '", name, "' must be contiguous");
    EMBER_CHECK(is_floating(p.dtype()), kWho, " (rank ", group_->rank(), "): parameter '", name,
                "' must be floating point, got ", dtype_name(p.dtype()));
    Param param;
    param.name = name;
    param.full = p;
    params_.push_back(std::move(param));
  }
  shards_from_full();
  if (options_.param_dtype()) {
    EMBER_CHECK(is_floating(*options_.param_dtype()), kWho, ": param_dtype must be floating, got ",
                dtype_name(*options_.param_dtype()));
    NoGradGuard no_grad;
    for (Param& p : params_) p.full.set_data(p.full.detach().to(*options_.param_dtype()));
  }
  if (options_.stage() == 3) {
    EMBER_CHECK(options_.limit_all_gathers() >= 1, kWho, ": limit_all_gathers must be at least 1, got ",
                options_.limit_all_gathers());
    build_units();
    pending_.resize(units_.size());
  }
  build_buckets();
  ready_.assign(params_.size(), false);
  unused_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].hook =
        params_[i].full.register_post_accumulate_grad_hook([this, i](const Tensor&) { mark_grad_ready(i); });
  if (options_.stage() == 3) free_all_units();
}

ShardedDataParallel::~ShardedDataParallel() {
  for (Param& p : params_) p.full.remove_hook(p.hook);
  for (Unit& u : units_)
    if (u.module != nullptr) {
      u.module->remove_forward_hook(u.pre_hook);
      u.module->remove_forward_hook(u.post_hook);
    }
}

void ShardedDataParallel::shards_from_full() {
  // Copies into existing shards keep the optimizer's references to them valid.
  NoGradGuard no_grad;
  const int rank = group_->rank();
  for (Param& p : params_) {
    DimZeroShard s = DimZeroShard::of(p.full.sizes(), group_->size());
    Tensor rows = p.full.detach().reshape({s.rows, s.row_numel}).narrow(0, s.begin(rank), s.rows_of(rank));
    Tensor mine = rows.reshape(s.shard_shape(rank));
    if (p.shard.defined()) {
      copy_into(p.shard, mine);
      p.shard.bump_version();
    } else {
      p.shard = ember::clone(mine, /*contiguous=*/true);
      p.shard.requires_grad_(true);
    }
  }
}

void ShardedDataParallel::build_buckets() {
  const int ranks = group_->size();
  const double cap = options_.bucket_cap_mb() * 1024.0 * 1024.0;
  std::vector<size_t> current;
  size_t bytes = 0;
  auto close = [&] {
    if (current.empty()) return;
    for (size_t i : current)
      EMBER_CHECK(params_[i].full.dtype() == params_[current.front()].full.dtype(), kWho, " (rank ", group_->rank(),
                  "): parameters '", params_[current.front()].name, "' and '", params_[i].name,
                  "' share a unit but not a dtype (", dtype_name(params_[current.front()].full.dtype()), " and ",
                  dtype_name(params_[i].full.dtype()), "); a unit gathers one flat buffer");
    std::vector<Shape> shapes;
    for (size_t i : current) shapes.push_back(params_[i].full.sizes());
    DType dtype = params_[current.front()].full.dtype();
    Bucket bucket{current, ShardedLayout(shapes, ranks), options_.reduce_dtype().value_or(dtype)};
    bucket.pending = current.size();
    for (size_t k = 0; k < current.size(); ++k) {
      params_[current[k]].bucket = buckets_.size();
      params_[current[k]].slot = k;
    }
    buckets_.push_back(std::move(bucket));
    current.clear();
    bytes = 0;
  };
  if (options_.stage() == 3) {
    // One bucket per unit: a unit's gradients are reduce-scattered as soon as they are all there.
    for (const std::vector<size_t>& unit : unit_buckets()) {
      current = unit;
      close();
    }
    for (Unit& u : units_) u.bucket = params_[u.params.front()].bucket;
    return;
  }
  // Reverse registration order: the last layers' gradients are ready first. One dtype per bucket.
  for (size_t n = params_.size(); n-- > 0;) {
    const Tensor& p = params_[n].full;
    if (!current.empty() && params_[current.front()].full.dtype() != p.dtype()) close();
    current.push_back(n);
    bytes += p.nbytes();
    if (static_cast<double>(bytes) >= cap) close();
  }
  close();
  if (options_.stage() == 1) {
    // ZeRO-1 keeps full-size gradients: the buckets stay allocated from the start.
    for (Bucket& b : buckets_) {
      b.grad_input = empty({b.layout.flat_numel()}, TensorOptions(b.wire).device(device_));
      b.layout.zero_padding(b.grad_input);
    }
  }
}

void ShardedDataParallel::pre_forward() {
  gather(false);
  if (!forward_order_.empty()) order_known_ = true;
  drain_gathers();
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].module == nullptr) gather_unit(u);  // the root unit: its parameters stay until backward
  if (is_training()) sync_buffers();
}

void ShardedDataParallel::post_forward(const std::vector<Tensor>& outputs) {
  std::fill(unused_.begin(), unused_.end(), false);
  if (!is_training() || !GradMode::is_enabled() || !sync_ || !options_.find_unused_parameters()) return;
  std::vector<const TensorImpl*> used = reachable_leaves(outputs);
  std::sort(used.begin(), used.end());
  for (size_t i = 0; i < params_.size(); ++i)
    unused_[i] = !std::binary_search(used.begin(), used.end(), params_[i].full.unsafe_impl());
}

Tensor ShardedDataParallel::forward(const Tensor& input) {
  pre_forward();
  Tensor out = module_->forward(input);
  post_forward({out});
  return out;
}

void ShardedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers()) return;
  std::vector<Tensor> buffers;
  for (auto& [name, b] : module_->named_buffers()) buffers.push_back(b);
  if (!buffers.empty()) broadcast_tensors(*group_, buffers, 0);
}

void ShardedDataParallel::mark_grad_ready(size_t index) {
  if (!sync_) return;  // no_sync(): the full .grad accumulates locally
  if (!in_backward_) {
    in_backward_ = true;
    autograd::queue_callback([this] { finalize(); });
    for (size_t i = 0; i < params_.size(); ++i)
      if (unused_[i] && !ready_[i]) mark_grad_ready(i);
  }
  Param& p = params_[index];
  EMBER_CHECK(!ready_[index], kWho, " (rank ", group_->rank(), " on ", device_, "): parameter '", p.name,
              "' received its gradient twice in one backward pass (is it shared between modules, or was backward run "
              "twice without an optimizer step?)");
  ready_[index] = true;
  Bucket& b = buckets_[p.bucket];
  {
    NoGradGuard no_grad;
    if (!b.grad_input.defined()) {
      b.grad_input = empty({b.layout.flat_numel()}, TensorOptions(b.wire).device(device_));
      b.layout.zero_padding(b.grad_input);
    }
    const Tensor& grad = p.full.grad();
    if (grad.defined() && !unused_[index])
      b.layout.scatter_full(p.slot, grad, b.grad_input);
    else
      b.layout.scatter_full(p.slot, zeros(p.full.sizes(), TensorOptions(b.wire).device(device_)), b.grad_input);
    // The shard's .grad receives this rank's part; the full gradient is not kept.
    p.full.mutable_grad() = Tensor();
    // Stage 3: every node that reads the parameter has run before its gradient is final.
    if (options_.stage() == 3 && !hold_full_) p.full.storage()->release_bytes();
  }
  if (--b.pending == 0) {
    b.ready = true;
    launch_ready_buckets();
  }
}

void ShardedDataParallel::launch_ready_buckets() {
  // Strictly in index order, so every rank issues the same reduce-scatter sequence.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].ready) {
    Bucket& b = buckets_[next_bucket_];
    NoGradGuard no_grad;
    comm::ReduceOp op = comm::ReduceOp::Avg;
    if (b.wire != params_[b.params.front()].full.dtype()) {
      b.grad_input.div_(scalar_tensor(static_cast<double>(group_->size()), b.wire, device_));
      op = comm::ReduceOp::Sum;
    }
    b.grad_output = empty({b.layout.section_numel()}, TensorOptions(b.wire).device(device_));
    {
      comm::OverlapScope overlap;  // backward goes on while this bucket reduces
      const profiler::Tag tag(profiler::active() ? "sharded gradient bucket " + std::to_string(next_bucket_) : "");
      b.work = group_->reduce_scatter_tensor(b.grad_output, b.grad_input, op);
    }
    ++next_bucket_;
    // Stages 2 and 3 keep gradients sharded while backward still runs: finished buckets hand over
    // their rows at once, and at most kBucketsInFlight full-size buckets wait for their reduce-scatter.
    constexpr size_t kBucketsInFlight = 2;
    while (options_.stage() >= 2 && next_harvest_ < next_bucket_ &&
           (next_bucket_ - next_harvest_ > kBucketsInFlight || buckets_[next_harvest_].work->is_completed()))
      harvest(next_harvest_++);
  }
}

void ShardedDataParallel::harvest(size_t index) {
  Bucket& b = buckets_[index];
  b.work->wait();
  NoGradGuard no_grad;
  const int rank = group_->rank();
  for (size_t k = 0; k < b.params.size(); ++k) {
    Param& p = params_[b.params[k]];
    Tensor part = b.layout.shard_in_section(k, b.grad_output, rank);
    Tensor& grad = p.shard.mutable_grad();
    if (grad.defined())
      grad.add_(part.to(grad.dtype()));
    else
      grad = part.dtype() == p.shard.dtype() ? ember::clone(part, /*contiguous=*/true) : part.to(p.shard.dtype());
  }
  b.grad_output = Tensor();
  b.work = nullptr;
  if (options_.stage() >= 2) b.grad_input = Tensor();
}

void ShardedDataParallel::finalize() {
  std::vector<std::string> missing;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) missing.push_back(params_[i].name);
  if (!missing.empty()) {
    std::ostringstream names;
    for (size_t k = 0; k < missing.size(); ++k) names << (k ? ", " : "") << missing[k];
    reset_iteration();
    EMBER_FAIL(kWho, " (rank ", group_->rank(), " of ", group_->name(), " on ", device_, "): ", missing.size(),
               " parameter(s) received no gradient in this backward pass: ", names.str(),
               ". The other ranks' reduce-scatters would wait for them forever; construct it with "
               "ShardingOptions().find_unused_parameters(true), or make every parameter take part in the loss.");
  }
  launch_ready_buckets();
  drain_gathers();
  while (next_harvest_ < buckets_.size()) harvest(next_harvest_++);
  stale_ = true;
  reset_iteration();
}

void ShardedDataParallel::reset_iteration() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.ready = false;
  }
  next_bucket_ = 0;
  next_harvest_ = 0;
  in_backward_ = false;
}

void ShardedDataParallel::gather_parameters() { gather(false); }

ShardedDataParallel::PendingGather ShardedDataParallel::start_bucket_gather(const Bucket& b, DType dtype) const {
  NoGradGuard no_grad;
  TensorOptions options = TensorOptions(dtype).device(device_);
  std::vector<Tensor> shards;
  for (size_t i : b.params) shards.push_back(params_[i].shard);
  PendingGather g;
  g.section = empty({b.layout.section_numel()}, options);
  b.layout.pack_section(shards, g.section, group_->rank());
  g.flat = empty({b.layout.flat_numel()}, options);
  g.work = group_->all_gather_into_tensor(g.flat, g.section);
  return g;
}

void ShardedDataParallel::gather(bool force) const {
  if (options_.stage() == 3 || (!stale_ && !force)) return;
  NoGradGuard no_grad;
  std::vector<PendingGather> gathers;
  for (const Bucket& b : buckets_) gathers.push_back(start_bucket_gather(b, params_[b.params.front()].full.dtype()));
  for (size_t n = 0; n < buckets_.size(); ++n) {
    gathers[n].work->wait();
    const Bucket& b = buckets_[n];
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& full = params_[b.params[k]].full;
      b.layout.gather_full(k, gathers[n].flat, full);
      full.bump_version();
    }
  }
  stale_ = false;
}

double ShardedDataParallel::clip_grad_norm_(double max_norm, double norm_type, bool error_if_nonfinite) {
  EMBER_CHECK(norm_type > 0, kWho, "::clip_grad_norm_: norm_type must be positive, got ", norm_type);
  const bool inf_norm = std::isinf(norm_type);
  NoGradGuard no_grad;
  // Partial sums in float64 on the device, one all-reduce, one read.
  Tensor local = zeros({1}, TensorOptions(kFloat64).device(device_));
  for (const Param& p : params_) {
    const Tensor& g = p.shard.grad();
    if (!g.defined() || g.numel() == 0) continue;
    Tensor a = g.to(kFloat64).abs();
    if (inf_norm)
      local = maximum(local, a.max().reshape({1}));
    else
      local.add_(a.pow(norm_type).sum().reshape({1}));
  }
  group_->all_reduce(local, inf_norm ? comm::ReduceOp::Max : comm::ReduceOp::Sum)->wait();
  double total = local.item<double>();
  if (!inf_norm) total = std::pow(total, 1.0 / norm_type);
  if (error_if_nonfinite)
    EMBER_CHECK(std::isfinite(total), kWho, "::clip_grad_norm_ (rank ", group_->rank(), "): the total norm of order ",
                norm_type, " of the sharded gradients is ", total, "; expected a finite norm");
  double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (Param& p : params_) {
      Tensor& g = p.shard.mutable_grad();
      if (g.defined()) g.mul_(scalar_tensor(coef, g.dtype(), device_));
    }
  return total;
}

std::vector<std::pair<std::string, Tensor>> ShardedDataParallel::named_parameters(bool) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Param& p : params_) out.emplace_back(p.name, p.shard);
  return out;
}

std::vector<std::pair<std::string, Tensor>> ShardedDataParallel::named_buffers(bool recurse) const {
  return module_->named_buffers(recurse);
}

NamedTensors ShardedDataParallel::state_dict() const {
  // Parameters from the shards, one all-gather per bucket, so the values are the optimizer's own
  // (not the gathered copies, which param_dtype may have rounded) and stage 3 gathers no unit.
  NoGradGuard no_grad;
  std::unordered_map<std::string, Tensor> gathered;
  for (const Bucket& b : buckets_) {
    PendingGather g = start_bucket_gather(b, params_[b.params.front()].shard.dtype());
    g.work->wait();
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Param& p = params_[b.params[k]];
      Tensor value = empty(p.full.sizes(), g.flat.options());
      b.layout.gather_full(k, g.flat, value);
      gathered.emplace(p.name, value);
    }
  }
  NamedTensors state = module_->state_dict();
  for (auto& [name, t] : state)
    if (auto found = gathered.find(name); found != gathered.end()) t = found->second;
  return state;
}

nn::LoadResult ShardedDataParallel::load_state_dict(const NamedTensors& state, bool strict) {
  // The module checks names and shapes and takes the buffers; stage 3's parameters get bytes to
  // be written into and are freed again (the next forward gathers them from the shards).
  if (options_.stage() == 3)
    for (Param& p : params_) p.full.storage()->materialize();
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : state) by_name.emplace(name, &t);
  nn::LoadResult result;
  if (options_.param_dtype()) {
    // The module holds the parameters in param_dtype; its check must not see the shards' dtype
    // as a mismatch.
    std::unordered_map<std::string, bool> sharded;
    for (const Param& p : params_) sharded[p.name] = true;
    NamedTensors cast = state;
    for (auto& [name, t] : cast)
      if (sharded.count(name) && is_floating(t.dtype())) t = t.to(*options_.param_dtype());
    result = module_->load_state_dict(cast, strict);
  } else {
    result = module_->load_state_dict(state, strict);
  }
  NoGradGuard no_grad;
  const int rank = group_->rank();
  for (Param& p : params_) {
    auto found = by_name.find(p.name);
    if (found == by_name.end()) continue;
    const DimZeroShard& s = buckets_[p.bucket].layout.shard(p.slot);
    Tensor rows = found->second->reshape({s.rows, s.row_numel}).narrow(0, s.begin(rank), s.rows_of(rank));
    copy_into(p.shard, rows.reshape(s.shard_shape(rank)));
    p.shard.bump_version();
  }
  stale_ = true;
  if (options_.stage() == 3) free_all_units();
  return result;
}

void ShardedDataParallel::shards_changed() {
  stale_ = true;
  if (options_.stage() == 3) free_all_units();  // gathered copies would be out of date
}

void ShardedDataParallel::train(bool on) {
  Module::train(on);
  module_->train(on);
}

ShardedMemory ShardedDataParallel::memory() const {
  ShardedMemory m;
  for (const Param& p : params_) {
    if (!p.full.storage()->released()) m.full_parameters += p.full.nbytes();
    m.shards += p.shard.nbytes();
    if (p.shard.grad().defined()) m.shard_grads += p.shard.grad().nbytes();
  }
  for (const Bucket& b : buckets_)
    if (b.grad_input.defined()) m.gradient_buckets += b.grad_input.nbytes();
  for (const PendingGather& g : pending_)
    if (g.work != nullptr) m.gathers_in_flight += g.section.nbytes() + g.flat.nbytes();
  return m;
}

const DimZeroShard& ShardedDataParallel::shard_of(const std::string& name) const {
  for (const Param& p : params_)
    if (p.name == name) return buckets_[p.bucket].layout.shard(p.slot);
  EMBER_FAIL(kWho, "::shard_of: no trainable parameter named '", name, "'");
}

std::vector<LocalShard> ShardedDataParallel::local_shards() const {
  std::vector<LocalShard> out;
  for (const Param& p : params_)
    out.push_back({p.name, p.full.sizes(), buckets_[p.bucket].layout.shard(p.slot).begin(group_->rank()), p.shard});
  return out;
}

std::string ShardedDataParallel::extra_repr() const {
  std::ostringstream s;
  s << "stage=" << options_.stage() << ", world_size=" << group_->size() << ", rank=" << group_->rank()
    << ", buckets=" << buckets_.size() << ", module=" << module_->type_name();
  return s.str();
}

}  // namespace ember::parallel

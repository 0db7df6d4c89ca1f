// Stage 3 of ShardedDataParallel: choosing the units, and gathering and freeing each unit's
// parameters around its forward and its backward.
#include <algorithm>
#include <unordered_map>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/profiler.h"
#include "parallel/sharded_data_parallel.h"

namespace ember::parallel {

namespace {

constexpr const char* kWho = "ShardedDataParallel";

bool inside(const std::string& name, const std::string& module_path) {
  return module_path.empty() || name.compare(0, module_path.size() + 1, module_path + ".") == 0;
}

}  // namespace

void ShardedDataParallel::build_units() {
  auto modules = module_->named_modules();  // depth first, the wrapped module ("") first
  std::vector<std::string> chosen;
  auto owner = [&](const std::string& param) {
    // The innermost chosen module holding it ("" when none).
    std::string best;
    for (const std::string& m : chosen)
      if (inside(param, m) && m.size() > best.size()) best = m;
    return best;
  };
  const auto& types = options_.wrap_module_types();
  if (!types.empty()) {
    for (auto& [path, m] : modules)
      if (!path.empty() && std::find(types.begin(), types.end(), m->type_name()) != types.end()) chosen.push_back(path);
  } else if (options_.wrap_min_params() > 0) {
    // Children before parents: a module takes what its chosen descendants left.
    for (size_t k = modules.size(); k-- > 1;) {
      int64_t left = 0;
      for (const Param& p : params_)
        if (inside(p.name, modules[k].first) && owner(p.name).empty()) left += p.full.numel();
      if (left >= options_.wrap_min_params()) chosen.push_back(modules[k].first);
    }
  } else {
    for (auto& [path, m] : module_->named_children()) chosen.push_back(path);
  }
  std::unordered_map<std::string, size_t> unit_of_path;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    const Storage& storage = p.full.storage();
    EMBER_CHECK(p.full.storage_offset() == 0 && storage->nbytes() == p.full.nbytes(), kWho, " (rank ", group_->rank(),
                "): stage 3 frees each parameter's memory between uses, but parameter '", p.name,
                "' shares its storage with other tensors (", storage->nbytes(), " bytes for its ", p.full.nbytes(),
                ")");
    std::string path = owner(p.name);
    auto [it, fresh] = unit_of_path.emplace(path, units_.size());
    if (fresh) {
      Unit unit;
      unit.name = path;
      for (auto& [module_path, m] : modules)
        if (!path.empty() && module_path == path) unit.module = m.get();
      units_.push_back(std::move(unit));
    }
    p.unit = it->second;
    units_[it->second].params.push_back(i);
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    if (unit.module == nullptr) continue;
    unit.pre_hook = unit.module->register_forward_pre_hook([this, u](nn::Module&) { before_unit_forward(u); });
    unit.post_hook = unit.module->register_forward_hook(
        [this, u](nn::Module&, const std::vector<Tensor>& outputs) { after_unit_forward(u, outputs); });
  }
}

std::vector<std::vector<size_t>> ShardedDataParallel::unit_buckets() const {
  // Backward meets the units in reverse; the root unit's parameters (stem and head, typically)
  // are complete only at the very end.
  std::vector<std::vector<size_t>> out;
  for (size_t u = units_.size(); u-- > 0;)
    if (units_[u].module != nullptr) out.push_back(units_[u].params);
  for (const Unit& unit : units_)
    if (unit.module == nullptr) out.push_back(unit.params);
  return out;
}

std::vector<std::string> ShardedDataParallel::unit_names() const {
  std::vector<std::string> names;
  for (const Unit& unit : units_) names.push_back(unit.name);
  return names;
}

bool ShardedDataParallel::unit_materialized(size_t u) const {
  for (size_t i : units_[u].params)
    if (params_[i].full.storage()->released()) return false;
  return true;
}

void ShardedDataParallel::start_gather(size_t u, bool prefetch) const {
  if (pending_[u].work != nullptr || unit_materialized(u)) return;
  const Bucket& b = buckets_[units_[u].bucket];
  // Every unit gather runs in an OverlapScope, prefetched or not, so that MPI matches them all
  // as non-blocking collectives.
  comm::OverlapScope overlap;
  const profiler::Tag tag(profiler::active() ? std::string(prefetch ? "sharded prefetch" : "sharded gather") +
                                                   " of unit " + std::to_string(u)
                                             : "");
  pending_[u] = start_bucket_gather(b, params_[b.params.front()].full.dtype());
  ++stats_.unit_gathers;
  if (prefetch) ++stats_.prefetched;
}

void ShardedDataParallel::gather_unit(size_t u) const {
  start_gather(u, false);
  if (pending_[u].work == nullptr) return;  // in place already
  PendingGather g = std::move(pending_[u]);
  pending_[u] = PendingGather();
  const Unit& unit = units_[u];
  try {
    g.work->wait();
  } catch (const Error& e) {
    EMBER_FAIL(kWho, " (rank ", group_->rank(), " on ", device_, "): gathering unit '",
               unit.name.empty() ? "(root)" : unit.name, "' (parameter '", params_[unit.params.front()].name, "' and ",
               unit.params.size() - 1, " more) failed: ", e.what());
  }
  NoGradGuard no_grad;
  const Bucket& b = buckets_[unit.bucket];
  for (size_t k = 0; k < b.params.size(); ++k) {
    const Tensor& full = params_[b.params[k]].full;
    full.storage()->materialize();
    b.layout.gather_full(k, g.flat, full);
  }
}

void ShardedDataParallel::prefetch_after(size_t u, int direction) const {
  if (!options_.prefetch() || !order_known_) return;
  auto at = std::find(forward_order_.begin(), forward_order_.end(), u);
  if (at == forward_order_.end()) return;
  const ptrdiff_t next = (at - forward_order_.begin()) + direction;
  if (next < 0 || next >= static_cast<ptrdiff_t>(forward_order_.size())) return;
  int in_flight = 0;
  for (const PendingGather& g : pending_) in_flight += g.work != nullptr;
  if (in_flight >= options_.limit_all_gathers()) return;
  start_gather(forward_order_[next], true);
}

void ShardedDataParallel::drain_gathers() const {
  // A prefetched unit the pass did not use: its gather still completes on every rank.
  for (PendingGather& g : pending_)
    if (g.work != nullptr) {
      g.work->wait();
      g = PendingGather();
    }
}

void ShardedDataParallel::before_unit_forward(size_t u) {
  if (!order_known_ && is_training() &&
      std::find(forward_order_.begin(), forward_order_.end(), u) == forward_order_.end())
    forward_order_.push_back(u);
  gather_unit(u);
  prefetch_after(u, +1);
}

void ShardedDataParallel::free_unit(size_t u) const {
  if (pending_[u].work != nullptr) {
    pending_[u].work->wait();
    pending_[u] = PendingGather();
  }
  for (size_t i : units_[u].params) params_[i].full.storage()->release_bytes();
}

void ShardedDataParallel::gather_all_units() const {
  for (size_t u = 0; u < units_.size(); ++u) gather_unit(u);
}

ShardedDataParallel::FullParameters::FullParameters(ShardedDataParallel& owner)
    : owner_(owner), previous_(owner.hold_full_) {
  owner_.gather(false);
  owner_.drain_gathers();
  owner_.gather_all_units();
  owner_.hold_full_ = true;
}

ShardedDataParallel::FullParameters::~FullParameters() {
  owner_.hold_full_ = previous_;
  if (!previous_) owner_.free_all_units();
}

void ShardedDataParallel::free_all_units() const {
  for (size_t u = 0; u < units_.size(); ++u) free_unit(u);
}

void ShardedDataParallel::after_unit_forward(size_t u, const std::vector<Tensor>& outputs) {
  if (options_.reshard_after_forward() && !hold_full_) free_unit(u);
  if (!GradMode::is_enabled()) return;
  // Backward reaches the unit through its outputs' gradients: gather it again there (once; the
  // gather is a no-op while the parameters are in place).
  for (const Tensor& out : outputs)
    if (out.defined() && out.requires_grad() && !out.is_leaf())
      out.register_hook([this, u](const Tensor&) {
        gather_unit(u);
        prefetch_after(u, -1);
        return Tensor();
      });
}

}  // namespace ember::parallel

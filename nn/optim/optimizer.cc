// Optimizer: parameter groups, per-parameter state, zero_grad, and state_dict save/load.
#include "nn/optim/optimizer.h"

#include <algorithm>
#include <unordered_set>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/shape.h"

namespace ember::optim {

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
  defaults_->validate(name_.c_str());
  size_t count = 0;
  for (const ParamGroup& group : groups) count += group.params().size();
  EMBER_CHECK(count > 0, name_, ": got an empty parameter list");
  for (const ParamGroup& group : groups) add_param_group(group);
}

Optimizer::~Optimizer() = default;

void Optimizer::add_param_group(const ParamGroup& group) {
  ParamGroup added = group;
  if (!added.has_options()) added.set_options(defaults_->clone());
  const OptimizerOptions& options = added.options();
  EMBER_CHECK(std::string(options.type_name()) == defaults_->type_name(), name_, ": parameter group ", groups_.size(),
              " has ", options.type_name(), ", expected ", defaults_->type_name());
  options.validate(name_.c_str());

  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& existing : groups_) {
    for (const Tensor& p : existing.params()) seen.insert(p.unsafe_impl());
  }
  for (size_t i = 0; i < added.params().size(); ++i) {
    const Tensor& p = added.params()[i];
    const std::string where =
        name_ + ": parameter " + std::to_string(i) + " of group " + std::to_string(groups_.size());
    EMBER_CHECK(p.defined(), where, " is undefined");
    EMBER_CHECK(p.is_floating_point(), where, ": expected a floating-point tensor, got ", dtype_name(p.dtype()));
    EMBER_CHECK(p.is_leaf(), where, ": can't optimize a non-leaf tensor (it has a grad_fn)");
    EMBER_CHECK(seen.insert(p.unsafe_impl()).second, where, ": appears more than once across the parameter groups");
  }
  groups_.push_back(std::move(added));
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const ParamGroup& group : groups_) all.insert(all.end(), group.params().begin(), group.params().end());
  return all;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    for (const Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
        continue;
      }
      // A grad built with create_graph has history; zeroing it must not write into that graph.
      if (p.grad().grad_fn()) p.set_grad(p.grad().detach());
      p.mutable_grad().zero_();
    }
  }
}

ParamState& Optimizer::state(const Tensor& param) { return state_[param.unsafe_impl()]; }

const ParamState* Optimizer::find_state(const Tensor& param) const {
  auto it = state_.find(param.unsafe_impl());
  return it == state_.end() ? nullptr : &it->second;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  json::Value groups = json::Value::array();
  int64_t index = 0;
  for (const ParamGroup& group : groups_) {
    json::Value entry = group.options().to_json();
    json::Value ids = json::Value::array();
    for (const Tensor& p : group.params()) {
      ids.items().push_back(json::Value::integer(index));
      if (const ParamState* st = find_state(p)) {
        const std::string prefix = "state." + std::to_string(index) + ".";
        for (const auto& [name, t] : st->tensors) out.tensors.emplace_back(prefix + name, t.detach().clone());
        out.tensors.emplace_back(prefix + "step", scalar_tensor(st->step, kInt64));
      }
      ++index;
    }
    entry.set("params", std::move(ids));
    groups.items().push_back(std::move(entry));
  }
  out.json.set("optimizer", json::Value::string(name_));
  out.json.set("param_groups", std::move(groups));
  return out;
}

namespace {

// "state.<index>.<name>" -> (index, name); raises naming the key otherwise.
std::pair<size_t, std::string> parse_state_key(const std::string& key, size_t num_params, const std::string& where) {
  const std::string prefix = "state.";
  const size_t dot = key.find('.', prefix.size());
  EMBER_CHECK(key.compare(0, prefix.size(), prefix) == 0 && dot != std::string::npos && dot > prefix.size() &&
                  dot + 1 < key.size(),
              where, ": expected tensor names \"state.<index>.<name>\", got \"", key, "\"");
  const std::string digits = key.substr(prefix.size(), dot - prefix.size());
  const bool all_digits = std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  EMBER_CHECK(all_digits && digits.size() <= 18, where, ": expected a parameter index in \"", key, "\"");
  const size_t index = std::stoull(digits);
  EMBER_CHECK(index < num_params, where, ": \"", key, "\" names parameter ", index, " but the optimizer has ",
              num_params);
  return {index, key.substr(dot + 1)};
}

}  // namespace

void Optimizer::load_state_dict(const StateDict& state) {
  const std::string where = name_ + ".load_state_dict";
  const json::Value& kind = json_member(state.json, "optimizer", where);
  EMBER_CHECK(kind.is_string() && kind.as_string() == name_, where, ": expected the state of a ", name_,
              " optimizer, got ", kind.dump());
  const json::Value& saved_groups = json_member(state.json, "param_groups", where);
  EMBER_CHECK(saved_groups.is_array() && saved_groups.items().size() == groups_.size(), where, ": expected ",
              groups_.size(), " parameter groups, got ", saved_groups.dump());

  // Everything is checked and built first, so a bad state leaves the optimizer untouched.
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  std::vector<Tensor> params;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const json::Value& saved = saved_groups.items()[g];
    const json::Value& ids = json_member(saved, "params", where);
    EMBER_CHECK(ids.is_array() && ids.items().size() == groups_[g].params().size(), where, ": parameter group ", g,
                " has ", groups_[g].params().size(), " parameters but the saved group lists ", ids.dump());
    std::unique_ptr<OptimizerOptions> o = groups_[g].options().clone();
    o->load_json(saved);
    o->validate(where.c_str());
    options.push_back(std::move(o));
    params.insert(params.end(), groups_[g].params().begin(), groups_[g].params().end());
  }

  const std::vector<std::string> names = state_names();
  std::vector<ParamState> loaded(params.size());
  std::vector<bool> has_state(params.size(), false), has_step(params.size(), false);
  for (const auto& [key, value] : state.tensors) {
    auto [index, name] = parse_state_key(key, params.size(), where);
    const Tensor& p = params[index];
    has_state[index] = true;
    if (name == "step") {
      EMBER_CHECK(value.numel() == 1 && !value.is_floating_point(), where, ": expected \"", key,
                  "\" to hold one integer, got ", dtype_name(value.dtype()), " of shape ", shape_str(value.sizes()));
      loaded[index].step = value.to(kInt64).item<int64_t>();
      EMBER_CHECK(loaded[index].step >= 0, where, ": \"", key, "\" is negative: ", loaded[index].step);
      has_step[index] = true;
      continue;
    }
    EMBER_CHECK(std::find(names.begin(), names.end(), name) != names.end(), where, ": \"", key,
                "\" is not a state tensor of ", name_);
    EMBER_CHECK(value.sizes() == p.sizes(), where, ": expected \"", key, "\" of shape ", shape_str(p.sizes()),
                " like its parameter, got ", shape_str(value.sizes()));
    EMBER_CHECK(value.is_floating_point(), where, ": expected \"", key, "\" to be floating-point, got ",
                dtype_name(value.dtype()));
    loaded[index].tensors[name] = clone(to_device(value.detach(), p.device()).to(p.dtype()), /*contiguous=*/true);
  }
  std::unordered_map<const TensorImpl*, ParamState> restored;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!has_state[i]) continue;
    EMBER_CHECK(has_step[i], where, ": the state of parameter ", i, " has no \"state.", i, ".step\" entry");
    restored[params[i].unsafe_impl()] = std::move(loaded[i]);
  }

  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].set_options(std::move(options[g]));
  state_ = std::move(restored);
}

void update_param_in_place(const Tensor& param, const std::function<void(const Tensor&, const Tensor&)>& update) {
  NoGradGuard no_grad;
  Tensor grad = param.grad().is_contiguous() ? param.grad().detach() : param.grad().contiguous();
  Tensor data = param.detach();  // same storage and version counter, no autograd identity
  if (data.is_contiguous()) {
    update(data, grad);
    return;
  }
  // The kernels walk one dense block; a strided parameter is updated through a contiguous copy.
  Tensor work = data.contiguous();
  update(work, grad);
  copy_into(data, work);
  data.bump_version();
}

}  // namespace ember::optim

// Adam: option checks (PyTorch's), and the per-parameter update shared with AdamW.
#include "nn/optim/adam.h"

#include "core/factory.h"
#include "core/fused_update.h"

namespace ember::optim {

namespace detail {

void validate_adam_options(const char* optimizer, double lr, const Betas& betas, double eps, double weight_decay) {
  const auto [beta1, beta2] = betas;
  EMBER_CHECK(lr >= 0.0, optimizer, ": invalid lr: expected >= 0, got ", lr);
  EMBER_CHECK(eps >= 0.0, optimizer, ": invalid eps: expected >= 0, got ", eps);
  EMBER_CHECK(beta1 >= 0.0 && beta1 < 1.0, optimizer, ": invalid beta1 (betas[0]): expected in [0, 1), got ", beta1);
  EMBER_CHECK(beta2 >= 0.0 && beta2 < 1.0, optimizer, ": invalid beta2 (betas[1]): expected in [0, 1), got ", beta2);
  EMBER_CHECK(weight_decay >= 0.0, optimizer, ": invalid weight_decay: expected >= 0, got ", weight_decay);
}

json::Value adam_options_to_json(double lr, const Betas& betas, double eps, double weight_decay, bool amsgrad,
                                 bool maximize) {
  json::Value o = json::Value::object();
  o.set("lr", json::Value::number(lr));
  o.set("betas", json_array({std::get<0>(betas), std::get<1>(betas)}));
  o.set("eps", json::Value::number(eps));
  o.set("weight_decay", json::Value::number(weight_decay));
  o.set("amsgrad", json::Value::boolean(amsgrad));
  o.set("maximize", json::Value::boolean(maximize));
  return o;
}

void adam_options_from_json(const json::Value& object, const std::string& where, double& lr, Betas& betas,
                            double& eps, double& weight_decay, bool& amsgrad, bool& maximize) {
  const std::vector<double> saved_betas = json_numbers(object, "betas", where);
  EMBER_CHECK(saved_betas.size() == 2, where, ": expected \"betas\" to hold 2 numbers, got ", saved_betas.size());
  lr = json_number(object, "lr", where);
  betas = {saved_betas[0], saved_betas[1]};
  eps = json_number(object, "eps", where);
  weight_decay = json_number(object, "weight_decay", where);
  amsgrad = json_bool(object, "amsgrad", where);
  maximize = json_bool(object, "maximize", where);
}

void adam_update_param(Optimizer& optimizer, const Tensor& param, AdamUpdateArgs args) {
  ParamState& st = optimizer.state(param);
  // State is created zeroed on first use, and max_exp_avg_sq also when amsgrad is switched on later.
  auto state_tensor = [&](const char* name) -> Tensor& {
    Tensor& t = st.tensors[name];
    if (!t.defined()) t = zeros(param.sizes(), param.options());
    return t;
  };
  const Tensor& exp_avg = state_tensor("exp_avg");
  const Tensor& exp_avg_sq = state_tensor("exp_avg_sq");
  const Tensor max_exp_avg_sq = args.amsgrad ? state_tensor("max_exp_avg_sq") : Tensor();
  args.step = st.step + 1;
  update_param_in_place(param, [&](const Tensor& data, const Tensor& grad) {
    fused_adam_update_(data, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
  });
  st.step = args.step;
}

}  // namespace detail

void AdamOptions::validate(const char* optimizer) const {
  detail::validate_adam_options(optimizer, lr_, betas_, eps_, weight_decay_);
}

json::Value AdamOptions::to_json() const {
  return detail::adam_options_to_json(lr_, betas_, eps_, weight_decay_, amsgrad_, maximize_);
}

void AdamOptions::load_json(const json::Value& object) {
  detail::adam_options_from_json(object, "AdamOptions", lr_, betas_, eps_, weight_decay_, amsgrad_, maximize_);
}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Optimizer("Adam", std::move(groups), defaults.clone()) {}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& defaults)
    : Optimizer("Adam", {ParamGroup(std::move(params))}, defaults.clone()) {}

void Adam::step() {
  for (ParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    AdamUpdateArgs args;
    args.lr = o.lr();
    args.beta1 = std::get<0>(o.betas());
    args.beta2 = std::get<1>(o.betas());
    args.eps = o.eps();
    args.weight_decay = o.weight_decay();
    args.decoupled_weight_decay = false;
    args.amsgrad = o.amsgrad();
    args.maximize = o.maximize();
    for (const Tensor& p : group.params()) {
      if (p.grad().defined()) detail::adam_update_param(*this, p, args);
    }
  }
}

}  // namespace ember::optim

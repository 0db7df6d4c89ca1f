// Adam and AdamW: option checks (PyTorch's), their JSON form, and the per-parameter update.
#include "nn/optim/adam.h"

#include "core/factory.h"
#include "core/fused_update.h"

namespace ember::optim {

template <bool D>
void AdamOptionsFor<D>::validate(const char* optimizer) const {
  const auto [beta1, beta2] = betas_;
  EMBER_CHECK(lr_ >= 0.0, optimizer, ": invalid lr: expected >= 0, got ", lr_);
  EMBER_CHECK(eps_ >= 0.0, optimizer, ": invalid eps: expected >= 0, got ", eps_);
  EMBER_CHECK(beta1 >= 0.0 && beta1 < 1.0, optimizer, ": invalid beta1 (betas[0]): expected in [0, 1), got ", beta1);
  EMBER_CHECK(beta2 >= 0.0 && beta2 < 1.0, optimizer, ": invalid beta2 (betas[1]): expected in [0, 1), got ", beta2);
  EMBER_CHECK(weight_decay_ >= 0.0, optimizer, ": invalid weight_decay: expected >= 0, got ", weight_decay_);
}

template <bool D>
json::Value AdamOptionsFor<D>::to_json() const {
  json::Value o = json::Value::object();
  o.set("lr", json::Value::number(lr_));
  o.set("betas", json_array({std::get<0>(betas_), std::get<1>(betas_)}));
  o.set("eps", json::Value::number(eps_));
  o.set("weight_decay", json::Value::number(weight_decay_));
  o.set("amsgrad", json::Value::boolean(amsgrad_));
  o.set("maximize", json::Value::boolean(maximize_));
  return o;
}

template <bool D>
void AdamOptionsFor<D>::load_json(const json::Value& object) {
  const std::string where = type_name();
  const std::vector<double> saved_betas = json_numbers(object, "betas", where);
  EMBER_CHECK(saved_betas.size() == 2, where, ": expected \"betas\" to hold 2 numbers, got ", saved_betas.size());
  lr_ = json_number(object, "lr", where);
  betas_ = {saved_betas[0], saved_betas[1]};
  eps_ = json_number(object, "eps", where);
  weight_decay_ = json_number(object, "weight_decay", where);
  amsgrad_ = json_bool(object, "amsgrad", where);
  maximize_ = json_bool(object, "maximize", where);
}

template <bool D>
AdamFor<D>::AdamFor(std::vector<ParamGroup> groups, const Options& defaults)
    : Optimizer(D ? "AdamW" : "Adam", std::move(groups), defaults.clone()) {}

template <bool D>
AdamFor<D>::AdamFor(std::vector<Tensor> params, const Options& defaults)
    : Optimizer(D ? "AdamW" : "Adam", {ParamGroup(std::move(params))}, defaults.clone()) {}

template <bool D>
void AdamFor<D>::step() {
  for (ParamGroup& group : param_groups()) {
    const auto& o = static_cast<const Options&>(group.options());
    AdamUpdateArgs args;
    args.lr = o.lr();
    args.beta1 = std::get<0>(o.betas());
    args.beta2 = std::get<1>(o.betas());
    args.eps = o.eps();
    args.weight_decay = o.weight_decay();
    args.decoupled_weight_decay = D;
    args.amsgrad = o.amsgrad();
    args.maximize = o.maximize();
    for (const Tensor& param : group.params()) {
      if (!param.grad().defined()) continue;
      ParamState& st = state(param);
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
  }
}

template class AdamOptionsFor<false>;
template class AdamOptionsFor<true>;
template class AdamFor<false>;
template class AdamFor<true>;

}  // namespace ember::optim

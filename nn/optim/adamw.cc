// AdamW: its options and step; the update itself is Adam's with decoupled weight decay.
#include "nn/optim/adamw.h"

namespace ember::optim {

void AdamWOptions::validate(const char* optimizer) const {
  detail::validate_adam_options(optimizer, lr_, betas_, eps_, weight_decay_);
}

json::Value AdamWOptions::to_json() const {
  return detail::adam_options_to_json(lr_, betas_, eps_, weight_decay_, amsgrad_, maximize_);
}

void AdamWOptions::load_json(const json::Value& object) {
  detail::adam_options_from_json(object, "AdamWOptions", lr_, betas_, eps_, weight_decay_, amsgrad_, maximize_);
}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults)
    : Optimizer("AdamW", std::move(groups), defaults.clone()) {}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& defaults)
    : Optimizer("AdamW", {ParamGroup(std::move(params))}, defaults.clone()) {}

void AdamW::step() {
  for (ParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    AdamUpdateArgs args;
    args.lr = o.lr();
    args.beta1 = std::get<0>(o.betas());
    args.beta2 = std::get<1>(o.betas());
    args.eps = o.eps();
    args.weight_decay = o.weight_decay();
    args.decoupled_weight_decay = true;
    args.amsgrad = o.amsgrad();
    args.maximize = o.maximize();
    for (const Tensor& p : group.params()) {
      if (p.grad().defined()) detail::adam_update_param(*this, p, args);
    }
  }
}

}  // namespace ember::optim

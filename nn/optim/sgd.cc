// SGD: option checks (PyTorch's), and the step that hands each parameter to the fused kernel.
#include "nn/optim/sgd.h"

#include "core/factory.h"
#include "core/fused_update.h"

namespace ember::optim {

void SGDOptions::validate(const char* optimizer) const {
  EMBER_CHECK(lr_ >= 0.0, optimizer, ": invalid lr: expected >= 0, got ", lr_);
  EMBER_CHECK(momentum_ >= 0.0, optimizer, ": invalid momentum: expected >= 0, got ", momentum_);
  EMBER_CHECK(dampening_ == dampening_, optimizer, ": invalid dampening: got NaN");
  EMBER_CHECK(weight_decay_ >= 0.0, optimizer, ": invalid weight_decay: expected >= 0, got ", weight_decay_);
  EMBER_CHECK(!nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0), optimizer,
              ": nesterov requires momentum > 0 and dampening == 0, got momentum ", momentum_, " and dampening ",
              dampening_);
}

json::Value SGDOptions::to_json() const {
  json::Value o = json::Value::object();
  o.set("lr", json::Value::number(lr_));
  o.set("momentum", json::Value::number(momentum_));
  o.set("dampening", json::Value::number(dampening_));
  o.set("weight_decay", json::Value::number(weight_decay_));
  o.set("nesterov", json::Value::boolean(nesterov_));
  o.set("maximize", json::Value::boolean(maximize_));
  return o;
}

void SGDOptions::load_json(const json::Value& object) {
  const std::string where = "SGDOptions";
  lr_ = json_number(object, "lr", where);
  momentum_ = json_number(object, "momentum", where);
  dampening_ = json_number(object, "dampening", where);
  weight_decay_ = json_number(object, "weight_decay", where);
  nesterov_ = json_bool(object, "nesterov", where);
  maximize_ = json_bool(object, "maximize", where);
}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults)
    : Optimizer("SGD", std::move(groups), defaults.clone()) {}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& defaults)
    : Optimizer("SGD", {ParamGroup(std::move(params))}, defaults.clone()) {}

void SGD::step() {
  for (ParamGroup& group : param_groups()) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    SgdUpdateArgs args;
    args.lr = o.lr();
    args.momentum = o.momentum();
    args.dampening = o.dampening();
    args.weight_decay = o.weight_decay();
    args.nesterov = o.nesterov();
    args.maximize = o.maximize();
    for (const Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      Tensor buffer;
      args.first_step = false;
      if (args.momentum != 0.0) {
        auto it = st.tensors.find("momentum_buffer");
        args.first_step = it == st.tensors.end();
        // The first step writes the whole buffer (it becomes the gradient), so it starts uninitialised.
        buffer = args.first_step ? empty(p.sizes(), p.options()) : it->second;
      }
      update_param_in_place(
          p, [&](const Tensor& data, const Tensor& grad) { fused_sgd_update_(data, grad, buffer, args); });
      if (args.first_step) st.tensors["momentum_buffer"] = buffer;
      ++st.step;
    }
  }
}

}  // namespace ember::optim

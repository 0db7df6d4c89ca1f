// Optimizer: the base of SGD, Adam and AdamW. It owns the parameter groups and the per-parameter
// state, and saves both; subclasses only write step(). Parameters are plain leaf tensors: no
// dependency on nn::Module.
//
//   ember::optim::SGD optimizer(model_parameters, ember::optim::SGDOptions(0.1).momentum(0.9));
//   optimizer.zero_grad();
//   loss.backward();
//   optimizer.step();
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "nn/optim/optimizer_options.h"
#include "nn/optim/param_group.h"
#include "nn/optim/state_dict.h"

namespace ember::optim {

// What an optimizer keeps for one parameter: its update count and named state tensors
// ("momentum_buffer", "exp_avg", ...), each contiguous and of the parameter's shape and dtype.
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;
};

class Optimizer {
 public:
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer();

  // One update of every parameter that has a .grad; the others are skipped and keep their state.
  virtual void step() = 0;
  // Clears every .grad: drops it (set_to_none), or zeroes it in place.
  void zero_grad(bool set_to_none = true);
  // Takes the defaults for a group without options; raises on an invalid option, a non-leaf or
  // non-floating parameter, or a parameter already in some group.
  void add_param_group(const ParamGroup& group);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  const std::string& name() const { return name_; }
  std::vector<Tensor> parameters() const;  // every group's, in order

  // The state of `param`, created empty on first use.
  ParamState& state(const Tensor& param);
  const ParamState* find_state(const Tensor& param) const;  // null when it has none yet

  // A snapshot (copies): "state.<i>.<name>" tensors and an int64 "state.<i>.step" for the i-th
  // parameter across groups, as PyTorch numbers them, plus JSON
  // {"optimizer": name, "param_groups": [{hyper-parameters..., "params": [i, ...]}, ...]}.
  StateDict state_dict() const;
  // Restores a state_dict() of the same optimizer over groups of the same sizes: hyper-parameters
  // and state replace the current ones; state tensors take each parameter's dtype and device.
  void load_state_dict(const StateDict& state);

 protected:
  Optimizer(std::string name, std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  // The state tensor names this optimizer may keep; load_state_dict rejects others.
  virtual std::vector<std::string> state_names() const = 0;

 private:
  std::string name_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

// Runs a fused update on `param` in place: update(param data, grad) gets a contiguous view of the
// data (or a contiguous copy written back afterwards) and a contiguous grad. No autograd recording.
void update_param_in_place(const Tensor& param, const std::function<void(const Tensor&, const Tensor&)>& update);

}  // namespace ember::optim

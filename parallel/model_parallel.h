// ModelParallel: a Sequential placed by hand across devices, one stage of consecutive layers per
// device, run in order on the caller's thread (no micro-batches: one device works at a time; see
// parallel::Pipeline for overlapping stages).
//
//   nn::Sequential seq = models::as_sequential(model);
//   auto placed = std::make_shared<parallel::ModelParallel>(seq, std::vector<Device>{
//       Device::cuda(0), Device::cuda(1)});          // layers balanced by parameter count
//   optim::SGD opt(placed->parameters(), ...);      // each parameter updated on its own device
//   Tensor loss = cross_entropy(placed->forward(x), y.to(placed->devices().back()));
//   loss.backward();                                 // the gradient crosses back through to()
//
// The activation moves between stages with the differentiable Tensor::to, so the backward runs
// each stage's part on that stage's device. Devices may repeat and may include the CPU.
// state_dict() and the named lists have the bare Sequential's keys (and so, for as_sequential's
// form, the model's): checkpoints load into the unsplit model and back. The placement is fixed:
// to(Device) raises.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/modules/container.h"
#include "nn/module.h"

namespace ember::parallel {

class ModelParallel : public nn::Module {
 public:
  // `balance`: layers per stage, one entry per device, each at least 1, summing to the
  // Sequential's size; empty: balance_by_parameters(sequential, devices.size()).
  ModelParallel(nn::Sequential sequential, std::vector<Device> devices, std::vector<int64_t> balance = {});

  // The input moves to the first stage's device; the output is on the last stage's.
  Tensor forward(const Tensor& input) override;

  int64_t num_stages() const { return static_cast<int64_t>(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }
  const std::vector<int64_t>& balance() const { return balance_; }
  // Stage i's layers (the Sequential's own modules, under their names in it).
  const nn::Sequential& stage(int64_t i) const;
  const nn::Sequential& sequential() const { return sequential_; }

  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const override;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const override;
  NamedTensors state_dict() const override;
  nn::LoadResult load_state_dict(const NamedTensors& state, bool strict = true) override;
  using nn::Module::to;
  void to(Device device) override;
  std::string extra_repr() const override;

 private:
  nn::Sequential sequential_;
  std::vector<Device> devices_;
  std::vector<int64_t> balance_;
  std::vector<nn::Sequential> stages_;
};

}  // namespace ember::parallel

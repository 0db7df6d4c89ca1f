// GradScaler: dynamic loss scaling for mixed-precision training, PyTorch's torch.amp.GradScaler.
// The loss is multiplied by the scale before backward, so that small float16 gradients do not
// flush to zero; step() divides the gradients by it again and skips the optimizer's step when any
// gradient overflowed (an inf or a NaN); update() then multiplies the scale by backoff_factor
// after a skipped step, or by growth_factor after growth_interval clean steps in a row.
//
//   ember::amp::GradScaler scaler;                          // 2^16, x2 every 2000 clean steps
//   for (...) {
//     optimizer.zero_grad();
//     scaler.scale(loss_of(model, batch)).backward();
//     scaler.unscale_(optimizer);                            // optional: true grads for clipping
//     ember::optim::clip_grad_norm_(optimizer.parameters(), 1.0);
//     scaler.step(optimizer);                                // skipped if a grad was inf or NaN
//     scaler.update();
//   }
//
// The scale is a float32 kept on the host and changed as PyTorch's CPU kernel changes its float32
// scale tensor; scale() multiplies by it without a device round trip. Gradients are unscaled and
// checked on their devices (core/amp_unscale.h), and each step reads one flag per optimizer.
// Under DDP, set_found_inf_reducer (parallel/grad_scaler_sync.h) makes every rank skip together.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "core/tensor.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/state_dict.h"
#include "nn/options.h"

namespace ember::amp {

class GradScalerOptions {
 public:
  EMBER_ARG(double, init_scale) = 65536.0;
  EMBER_ARG(double, growth_factor) = 2.0;   // must be > 1
  EMBER_ARG(double, backoff_factor) = 0.5;  // must be < 1
  EMBER_ARG(int64_t, growth_interval) = 2000;
  // Disabled: scale() returns the loss, step() just steps, the rest does nothing.
  EMBER_ARG(bool, enabled) = true;
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {});

  // loss * scale, for backward (a floating-point loss on any device). The first call starts the
  // scale; unscale_, step and update raise before it.
  Tensor scale(const Tensor& loss);
  // Divides every .grad of the optimizer's parameters by the scale in place and records whether
  // any held an inf or a NaN; at most once per optimizer between two update() calls.
  void unscale_(optim::Optimizer& optimizer);
  // unscale_ unless done already, then optimizer.step() unless a gradient was an inf or a NaN.
  // Returns whether the optimizer stepped. Reads the recorded flag from the device.
  bool step(optim::Optimizer& optimizer);
  // Adjusts the scale from this iteration's flags (or sets it to new_scale) and forgets them.
  void update(std::optional<float> new_scale = std::nullopt);

  float get_scale() const;  // 1 when disabled
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double factor) { growth_factor_ = factor; }
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double factor) { backoff_factor_ = factor; }
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t interval) { growth_interval_ = interval; }
  // Clean steps in a row since the scale last changed (PyTorch's _growth_tracker).
  int64_t growth_tracker() const;
  bool is_enabled() const { return enabled_; }

  // JSON with PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval and
  // _growth_tracker (nothing when disabled); no tensors. Save it after update().
  optim::StateDict state_dict() const;
  // Restores a state_dict(); raises naming the key when one is missing or mistyped. Does nothing
  // when disabled.
  void load_state_dict(const optim::StateDict& state);

  // Called by unscale_ with the optimizer's found-inf flag (a one-element float32 tensor on its
  // gradients' device; nonzero means skip) before anything reads it, to combine it with other
  // processes' flags in place: every rank of a DDP job must reach the same decision.
  using FoundInfReducer = std::function<void(Tensor& found_inf)>;
  void set_found_inf_reducer(FoundInfReducer reducer) { found_inf_reducer_ = std::move(reducer); }

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    Tensor found_inf;                     // undefined: no parameter had a gradient
    std::optional<float> found_inf_read;  // its value, once read
  };

  void require_started(const char* call) const;
  float read_found_inf(OptimizerState& state);

  bool enabled_;
  double growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  // Before the first scale() the scale and tracker are these (as PyTorch creates its tensors lazily).
  double init_scale_;
  int64_t init_growth_tracker_ = 0;
  bool started_ = false;
  float scale_ = 0.0f;
  int32_t growth_tracker_ = 0;
  std::map<const optim::Optimizer*, OptimizerState> optimizer_states_;
  FoundInfReducer found_inf_reducer_;
};

}  // namespace ember::amp

// GradScaler, following torch/amp/grad_scaler.py call by call; the scale arithmetic is that of
// PyTorch's CPU kernel (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp).
#include "nn/amp/grad_scaler.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/amp_unscale.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::amp {

GradScaler::GradScaler(const GradScalerOptions& options)
    : enabled_(options.enabled()),
      growth_factor_(options.growth_factor()),
      backoff_factor_(options.backoff_factor()),
      growth_interval_(options.growth_interval()),
      init_scale_(options.init_scale()) {
  if (!enabled_) return;
  EMBER_CHECK(growth_factor_ > 1.0, "GradScaler: expected growth_factor > 1, got ", growth_factor_);
  EMBER_CHECK(backoff_factor_ < 1.0, "GradScaler: expected backoff_factor < 1, got ", backoff_factor_);
}

void GradScaler::require_started(const char* call) const {
  EMBER_CHECK(started_, "GradScaler::", call,
              ": the scale is not set yet; call scaler.scale(loss) (and backward on it) earlier in the iteration");
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!enabled_) return loss;
  EMBER_CHECK(loss.defined(), "GradScaler::scale: the loss is undefined");
  EMBER_CHECK(loss.is_floating_point(), "GradScaler::scale: expected a floating-point loss, got ",
              dtype_name(loss.dtype()));
  if (!started_) {
    scale_ = static_cast<float>(init_scale_);
    growth_tracker_ = static_cast<int32_t>(init_growth_tracker_);
    started_ = true;
  }
  // A 0-dim CPU float32 operand: its value goes with the kernel launch on any device, and it
  // promotes like PyTorch's 0-dim float32 scale tensor (a 0-dim float16 loss becomes float32).
  return loss * full({}, scale_, kFloat32);
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  require_started("unscale_");
  OptimizerState& state = optimizer_states_[&optimizer];
  EMBER_CHECK(state.stage != Stage::Unscaled,
              "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update()");
  EMBER_CHECK(state.stage != Stage::Stepped, "GradScaler::unscale_: unscale_() is being called after step()");

  std::vector<Tensor> grads;
  const std::vector<Tensor> params = optimizer.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& grad = params[i].grad();
    if (!grad.defined()) continue;
    // As PyTorch: float16 gradients mean float16 parameters, whose update would lose what the
    // scale saved; autocast keeps parameters in float32.
    EMBER_CHECK(grad.dtype() != kFloat16, "GradScaler::unscale_: parameter ", i, " of ", optimizer.name(),
                " has a float16 gradient; expected float32, float64 or bfloat16 gradients (keep the parameters in "
                "float32 and run the forward under autocast)");
    EMBER_CHECK(grad.dtype() == kFloat32 || grad.dtype() == kFloat64 || grad.dtype() == kBFloat16,
                "GradScaler::unscale_: parameter ", i, " of ", optimizer.name(), " has a ", dtype_name(grad.dtype()),
                " gradient; expected float32, float64 or bfloat16 gradients");
    grads.push_back(grad);
  }
  // The reciprocal in double, rounded once to float32, as PyTorch computes it.
  const Tensor inv_scale = full({}, static_cast<float>(1.0 / static_cast<double>(scale_)), kFloat32);
  std::vector<Tensor> found = amp_unscale_(grads, inv_scale);
  if (!found.empty()) {
    NoGradGuard no_grad;
    Tensor combined = found[0];
    for (size_t d = 1; d < found.size(); ++d) combined = combined + found[d].to(combined.device());
    if (found_inf_reducer_) found_inf_reducer_(combined);
    state.found_inf = combined;
  }
  state.stage = Stage::Unscaled;
}

float GradScaler::read_found_inf(OptimizerState& state) {
  if (!state.found_inf_read) state.found_inf_read = state.found_inf.item<float>();
  return *state.found_inf_read;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  require_started("step");
  OptimizerState& state = optimizer_states_[&optimizer];
  EMBER_CHECK(state.stage != Stage::Stepped,
              "GradScaler::step: step() has already been called since the last update()");
  if (state.stage == Stage::Ready) unscale_(optimizer);
  EMBER_CHECK(state.found_inf.defined(), "GradScaler::step: no inf checks were recorded for this optimizer (",
              optimizer.name(), "): none of its parameters has a gradient");
  const bool clean = read_found_inf(state) == 0.0f;
  if (clean) optimizer.step();
  state.stage = Stage::Stepped;
  return clean;
}

void GradScaler::update(std::optional<float> new_scale) {
  if (!enabled_) return;
  require_started("update");
  if (new_scale) {
    scale_ = *new_scale;
  } else {
    bool recorded = false;
    float found_inf = 0.0f;  // the flags' sum, as PyTorch adds them in float32
    for (auto& [optimizer, state] : optimizer_states_) {
      if (!state.found_inf.defined()) continue;
      recorded = true;
      found_inf += read_found_inf(state);
    }
    EMBER_CHECK(recorded,
                "GradScaler::update: no inf checks were recorded prior to update(); call step() or unscale_() on an "
                "optimizer whose parameters have gradients first");
    // In double, then rounded to float32, as PyTorch's CPU kernel multiplies its float scale by
    // the double factors.
    if (found_inf != 0.0f) {
      scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
      growth_tracker_ = 0;
    } else {
      const int32_t successful = growth_tracker_ + 1;
      if (successful == growth_interval_) {
        const float grown = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
        if (std::isfinite(grown)) scale_ = grown;  // never past float32's range
        growth_tracker_ = 0;
      } else {
        growth_tracker_ = successful;
      }
    }
  }
  optimizer_states_.clear();
}

float GradScaler::get_scale() const {
  if (!enabled_) return 1.0f;
  return started_ ? scale_ : static_cast<float>(init_scale_);
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled_) return 0;
  return started_ ? growth_tracker_ : init_growth_tracker_;
}

optim::StateDict GradScaler::state_dict() const {
  optim::StateDict state;
  if (!enabled_) return state;
  // Before the first scale() PyTorch saves the initial scale unrounded.
  const double scale = started_ ? static_cast<double>(scale_) : init_scale_;
  state.json = json::Value::object({{"scale", json::Value::number(scale)},
                                    {"growth_factor", json::Value::number(growth_factor_)},
                                    {"backoff_factor", json::Value::number(backoff_factor_)},
                                    {"growth_interval", json::Value::integer(growth_interval_)},
                                    {"_growth_tracker", json::Value::integer(growth_tracker())}});
  return state;
}

void GradScaler::load_state_dict(const optim::StateDict& state) {
  if (!enabled_) return;
  const std::string where = "GradScaler::load_state_dict";
  const json::Value& saved = state.json;
  EMBER_CHECK(saved.is_object(), where, ": expected a JSON object, got ", saved.dump());
  EMBER_CHECK(!saved.members().empty(), where,
              ": the state dict is empty, possibly because it was saved from a disabled GradScaler");
  // Every key read before anything changes.
  const double scale = optim::json_number(saved, "scale", where);
  const double growth_factor = optim::json_number(saved, "growth_factor", where);
  const double backoff_factor = optim::json_number(saved, "backoff_factor", where);
  const int64_t growth_interval = optim::json_int(saved, "growth_interval", where);
  const int64_t tracker = optim::json_int(saved, "_growth_tracker", where);
  // PyTorch keeps the tracker in an int32 tensor.
  EMBER_CHECK(tracker >= 0 && tracker <= std::numeric_limits<int32_t>::max(), where,
              ": expected \"_growth_tracker\" to be a count of steps (0 to 2^31 - 1), got ", tracker);
  init_scale_ = scale;
  growth_factor_ = growth_factor;
  backoff_factor_ = backoff_factor;
  growth_interval_ = growth_interval;
  init_growth_tracker_ = tracker;
  if (started_) {
    scale_ = static_cast<float>(scale);
    growth_tracker_ = static_cast<int32_t>(tracker);
  }
}

}  // namespace ember::amp

// OneCycleLR: piecewise cosine or linear annealing of the lr (and inversely the momentum) between
// the phase ends PyTorch uses: pct_start * total - 1, (2 * pct_start * total - 2,) total - 1.
#include "nn/optim/one_cycle_lr.h"

#include <cmath>

namespace ember::optim {

namespace {

constexpr double kPi = 3.141592653589793;  // math.pi

// Each phase anneals from one anchor value to another; anchors are per group.
enum class Anchor { Initial, Max, Min };

struct Phase {
  double end_step;
  Anchor start_lr, end_lr;
  bool start_at_max_momentum, end_at_max_momentum;
};

double anneal(AnnealStrategy strategy, double start, double end, double pct) {
  if (strategy == AnnealStrategy::Cos) {
    const double cos_out = std::cos(kPi * pct) + 1.0;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr), total_steps, options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       OneCycleLROptions options)
    : LRScheduler("OneCycleLR", optimizer), max_lrs_(std::move(max_lrs)), total_steps_(total_steps), options_(options) {
  EMBER_CHECK(max_lrs_.size() == num_groups(), "OneCycleLR: expected ", num_groups(),
              " max_lr values (one per parameter group), got ", max_lrs_.size());
  check_config();
  // The schedule starts from max_lr / div_factor, not from the optimizer's lr.
  std::vector<double> initial;
  for (double max_lr : max_lrs_) initial.push_back(max_lr / options_.div_factor());
  set_base_lrs(std::move(initial));
  initial_step();
}

void OneCycleLR::check_config() const {
  EMBER_CHECK(total_steps_ > 0, "OneCycleLR: invalid total_steps: expected > 0, got ", total_steps_);
  const double pct = options_.pct_start();
  EMBER_CHECK(pct >= 0.0 && pct <= 1.0, "OneCycleLR: invalid pct_start: expected in [0, 1], got ", pct);
  if (options_.cycle_momentum()) {
    for (const ParamGroup& group : optimizer().param_groups()) {
      EMBER_CHECK(group.options().has_momentum(),
                  "OneCycleLR: cycle_momentum needs an optimizer with a momentum "
                  "(SGD's momentum or Adam's beta1), got ",
                  group.options().type_name());
    }
  }
}

std::vector<double> OneCycleLR::compute_lrs(int64_t epoch) {
  EMBER_CHECK(epoch <= total_steps_, "OneCycleLR: tried to step ", epoch, " times, but total_steps is ", total_steps_);
  const double total = static_cast<double>(total_steps_);
  const double pct_start = options_.pct_start();
  std::vector<Phase> phases;
  if (options_.three_phase()) {
    phases = {{pct_start * total - 1, Anchor::Initial, Anchor::Max, true, false},
              {2 * pct_start * total - 2, Anchor::Max, Anchor::Initial, false, true},
              {total - 1, Anchor::Initial, Anchor::Min, true, true}};
  } else {
    phases = {{pct_start * total - 1, Anchor::Initial, Anchor::Max, true, false},
              {total - 1, Anchor::Max, Anchor::Min, false, true}};
  }

  const double step = static_cast<double>(epoch);
  double start_step = 0;
  size_t phase = 0;
  while (phase + 1 < phases.size() && step > phases[phase].end_step) start_step = phases[phase++].end_step;
  const Phase& p = phases[phase];
  EMBER_CHECK(p.end_step != start_step, "OneCycleLR: phase ", phase, " of the schedule is empty (pct_start ", pct_start,
              ", total_steps ", total_steps_, ")");
  const double pct = (step - start_step) / (p.end_step - start_step);

  std::vector<double> lrs;
  std::vector<ParamGroup>& groups = optimizer().param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const double initial = base_lrs()[g];
    auto value = [&](Anchor a) {
      return a == Anchor::Initial ? initial : a == Anchor::Max ? max_lrs_[g] : initial / options_.final_div_factor();
    };
    lrs.push_back(anneal(options_.anneal_strategy(), value(p.start_lr), value(p.end_lr), pct));
    if (options_.cycle_momentum()) {
      const double start = p.start_at_max_momentum ? options_.max_momentum() : options_.base_momentum();
      const double end = p.end_at_max_momentum ? options_.max_momentum() : options_.base_momentum();
      groups[g].options().set_momentum(anneal(options_.anneal_strategy(), start, end, pct));
    }
  }
  return lrs;
}

void OneCycleLR::save_config(json::Value& object) const {
  object.set("max_lrs", json_array(max_lrs_));
  object.set("total_steps", json::Value::integer(total_steps_));
  object.set("pct_start", json::Value::number(options_.pct_start()));
  object.set("anneal_strategy",
             json::Value::string(options_.anneal_strategy() == AnnealStrategy::Cos ? "cos" : "linear"));
  object.set("cycle_momentum", json::Value::boolean(options_.cycle_momentum()));
  object.set("base_momentum", json::Value::number(options_.base_momentum()));
  object.set("max_momentum", json::Value::number(options_.max_momentum()));
  object.set("div_factor", json::Value::number(options_.div_factor()));
  object.set("final_div_factor", json::Value::number(options_.final_div_factor()));
  object.set("three_phase", json::Value::boolean(options_.three_phase()));
}

void OneCycleLR::load_config(const json::Value& object) {
  const std::string where = "OneCycleLR.load_state_dict";
  std::vector<double> max_lrs = json_numbers(object, "max_lrs", where);
  EMBER_CHECK(max_lrs.size() == num_groups(), where, ": expected ", num_groups(), " max_lrs, got ", max_lrs.size());
  const json::Value& anneal_strategy = json_member(object, "anneal_strategy", where);
  EMBER_CHECK(
      anneal_strategy.is_string() && (anneal_strategy.as_string() == "cos" || anneal_strategy.as_string() == "linear"),
      where, ": expected \"anneal_strategy\" \"cos\" or \"linear\", got ", anneal_strategy.dump());
  max_lrs_ = std::move(max_lrs);
  total_steps_ = json_int(object, "total_steps", where);
  options_.pct_start(json_number(object, "pct_start", where))
      .anneal_strategy(anneal_strategy.as_string() == "cos" ? AnnealStrategy::Cos : AnnealStrategy::Linear)
      .cycle_momentum(json_bool(object, "cycle_momentum", where))
      .base_momentum(json_number(object, "base_momentum", where))
      .max_momentum(json_number(object, "max_momentum", where))
      .div_factor(json_number(object, "div_factor", where))
      .final_div_factor(json_number(object, "final_div_factor", where))
      .three_phase(json_bool(object, "three_phase", where));
  check_config();
}

}  // namespace ember::optim

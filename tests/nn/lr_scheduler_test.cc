// LR schedules against PyTorch 1.13: the sequences below were printed by
// tools/golden/make_lr_golden.py (torch.optim.lr_scheduler, stepping after optimizer.step()). Ember
// uses the closed forms, PyTorch mostly the recursive ones, so they agree to rounding (1e-12
// relative). Also: a schedule resumed from its state_dict continues the same sequence bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "core/ember_core.h"
#include "nn/optim/optim.h"

using namespace ember;
using namespace ember::optim;

namespace {

// ---- printed by tools/golden/make_lr_golden.py ----
// StepLR
const std::vector<double> kStepLRGroup0 = {0.1,   0.1,   0.1,   0.05,   0.05,   0.05,
                                           0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125};
const std::vector<double> kStepLRGroup1 = {0.02,  0.02,  0.02,  0.01,   0.01,   0.01,
                                           0.005, 0.005, 0.005, 0.0025, 0.0025, 0.0025};

// MultiStepLR
const std::vector<double> kMultiStepLRGroup0 = {0.1,
                                                0.1,
                                                0.010000000000000002,
                                                0.010000000000000002,
                                                0.010000000000000002,
                                                0.00010000000000000005,
                                                0.00010000000000000005,
                                                0.00010000000000000005,
                                                0.00010000000000000005,
                                                1.0000000000000006e-05,
                                                1.0000000000000006e-05,
                                                1.0000000000000006e-05};

// CosineAnnealingLR
const std::vector<double> kCosineAnnealingLRGroup0 = {0.1,
                                                      0.09757729755661011,
                                                      0.0905463412215599,
                                                      0.07959536998847742,
                                                      0.0657963412215599,
                                                      0.0505,
                                                      0.03520365877844011,
                                                      0.02140463001152259,
                                                      0.010453658778440109,
                                                      0.0034227024433899004,
                                                      0.001,
                                                      0.0034227024433899004,
                                                      0.01045365877844014,
                                                      0.02140463001152267,
                                                      0.035203658778440255,
                                                      0.05050000000000022,
                                                      0.06579634122156018,
                                                      0.07959536998847777,
                                                      0.09054634122156031,
                                                      0.09757729755661054,
                                                      0.10000000000000045,
                                                      0.09757729755661054,
                                                      0.09054634122156033,
                                                      0.07959536998847778,
                                                      0.0657963412215602};
const std::vector<double> kCosineAnnealingLRGroup1 = {0.05,
                                                      0.04880088464923127,
                                                      0.045320916362186214,
                                                      0.039900738681165594,
                                                      0.03307091636218621,
                                                      0.0255,
                                                      0.01792908363781379,
                                                      0.01109926131883441,
                                                      0.005679083637813789,
                                                      0.0021991153507687385,
                                                      0.001,
                                                      0.0021991153507687385,
                                                      0.005679083637813806,
                                                      0.011099261318834451,
                                                      0.017929083637813863,
                                                      0.025500000000000106,
                                                      0.03307091636218635,
                                                      0.03990073868116576,
                                                      0.045320916362186416,
                                                      0.04880088464923148,
                                                      0.05000000000000022,
                                                      0.04880088464923148,
                                                      0.04532091636218642,
                                                      0.03990073868116577,
                                                      0.033070916362186356};

// OneCycleCosSGD
const std::vector<double> kOneCycleCosSGDGroup0 = {0.040000000000000036,
                                                   0.1316718427000253,
                                                   0.3716718427000253,
                                                   0.6683281572999747,
                                                   0.9083281572999747,
                                                   1.0,
                                                   0.9874640062350873,
                                                   0.9504846320134737,
                                                   0.89091617757105,
                                                   0.8117456539497631,
                                                   0.7169430017913008,
                                                   0.6112620219362893,
                                                   0.500002,
                                                   0.38874197806371075,
                                                   0.28306099820869923,
                                                   0.18825834605023697,
                                                   0.10908782242895004,
                                                   0.049519367986526286,
                                                   0.012539993764912554,
                                                   4e-06,
                                                   0.012539993764912554};
const std::vector<double> kOneCycleCosSGDMomentum = {0.95,
                                                     0.9404508497187474,
                                                     0.9154508497187474,
                                                     0.8845491502812526,
                                                     0.8595491502812526,
                                                     0.85,
                                                     0.8512536043909088,
                                                     0.854951556604879,
                                                     0.8609084258765984,
                                                     0.8688255099070633,
                                                     0.878305813044122,
                                                     0.8888739533021842,
                                                     0.8999999999999999,
                                                     0.9111260466978157,
                                                     0.9216941869558779,
                                                     0.9311744900929366,
                                                     0.9390915741234015,
                                                     0.945048443395121,
                                                     0.9487463956090911,
                                                     0.95,
                                                     0.9487463956090911};

// OneCycleLinearThreePhaseAdam
const std::vector<double> kOneCycleLinearThreePhaseAdamGroup0 = {0.001,
                                                                 0.004,
                                                                 0.007,
                                                                 0.010000000000000002,
                                                                 0.007,
                                                                 0.004,
                                                                 0.0009999999999999992,
                                                                 0.0008900000000000001,
                                                                 0.0007800000000000001,
                                                                 0.00067,
                                                                 0.0005600000000000001,
                                                                 0.00045,
                                                                 0.00034,
                                                                 0.00023000000000000006,
                                                                 0.0001200000000000001,
                                                                 1.0000000000000026e-05,
                                                                 -0.00010000000000000005};
const std::vector<double> kOneCycleLinearThreePhaseAdamGroup1 = {0.002,
                                                                 0.008,
                                                                 0.014,
                                                                 0.020000000000000004,
                                                                 0.014,
                                                                 0.008,
                                                                 0.0019999999999999983,
                                                                 0.0017800000000000001,
                                                                 0.0015600000000000002,
                                                                 0.00134,
                                                                 0.0011200000000000001,
                                                                 0.0009,
                                                                 0.00068,
                                                                 0.0004600000000000001,
                                                                 0.0002400000000000002,
                                                                 2.0000000000000052e-05,
                                                                 -0.0002000000000000001};
const std::vector<double> kOneCycleLinearThreePhaseAdamMomentum = {0.9,
                                                                   0.8666666666666667,
                                                                   0.8333333333333334,
                                                                   0.8,
                                                                   0.8333333333333334,
                                                                   0.8666666666666667,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9,
                                                                   0.9};

// WarmupCosine
const std::vector<double> kWarmupCosineGroup0 = {0.05,
                                                 0.1625,
                                                 0.275,
                                                 0.38750000000000007,
                                                 0.5,
                                                 0.4809698831278217,
                                                 0.42677669529663687,
                                                 0.34567085809127246,
                                                 0.25,
                                                 0.15432914190872757,
                                                 0.07322330470336313,
                                                 0.01903011687217832,
                                                 0.0,
                                                 0.019030116872178315,
                                                 0.07322330470336319,
                                                 0.15432914190872765};

// WarmupMultiStep
const std::vector<double> kWarmupMultiStepGroup0 = {
    0.05, 0.1, 0.15000000000000002, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05};

// ---- end of generated values ----

std::vector<ParamGroup> groups_with_lrs(const std::vector<double>& lrs) {
  std::vector<ParamGroup> groups;
  for (double lr : lrs) groups.emplace_back(std::vector<Tensor>{zeros({2}).requires_grad_()}, SGDOptions(lr));
  return groups;
}

std::unique_ptr<SGD> sgd_with_lrs(const std::vector<double>& lrs, double momentum = 0.0) {
  return std::make_unique<SGD>(groups_with_lrs(lrs), SGDOptions(lrs[0]).momentum(momentum));
}

void require_close(double actual, double expected, const std::string& what) {
  INFO(what << ": " << actual << " vs " << expected);
  REQUIRE(std::abs(actual - expected) <= 1e-12 * std::abs(expected) + 1e-18);
}

// Epoch 0 is the state right after construction; then one step() per further value.
void check_sequence(LRScheduler& schedule, const std::vector<std::vector<double>>& per_group,
                    const std::vector<double>* momentum = nullptr) {
  Optimizer& optimizer = schedule.optimizer();
  for (size_t epoch = 0; epoch < per_group[0].size(); ++epoch) {
    if (epoch > 0) schedule.step();
    REQUIRE(schedule.last_epoch() == static_cast<int64_t>(epoch));
    for (size_t g = 0; g < per_group.size(); ++g) {
      const std::string what = "epoch " + std::to_string(epoch) + " group " + std::to_string(g);
      require_close(schedule.get_last_lr()[g], per_group[g][epoch], what);
      REQUIRE(optimizer.param_groups()[g].options().get_lr() == schedule.get_last_lr()[g]);
    }
    if (momentum) {
      require_close(optimizer.param_groups()[0].options().get_momentum(), (*momentum)[epoch],
                    "momentum at epoch " + std::to_string(epoch));
    }
  }
}

StateDict round_trip(const StateDict& state) {
  std::vector<uint8_t> bytes = serialize_state_dict(state);
  return parse_state_dict(bytes.data(), bytes.size(), "scheduler state");
}

// Runs `total` steps straight, and again as `split` steps + state_dict + a fresh optimizer and
// schedule that load it + the rest: lrs and momenta must match bit for bit.
template <typename MakeOptimizer, typename MakeSchedule>
void check_resume(const MakeOptimizer& make_optimizer, const MakeSchedule& make_schedule, int split, int total) {
  auto straight_opt = make_optimizer();
  auto straight = make_schedule(*straight_opt);
  std::vector<std::vector<double>> lrs;
  std::vector<double> momenta;
  for (int i = 0; i <= total; ++i) {
    if (i > 0) straight->step();
    lrs.push_back(straight->get_last_lr());
    momenta.push_back(straight_opt->param_groups()[0].options().get_momentum());
  }

  auto first_opt = make_optimizer();
  auto first = make_schedule(*first_opt);
  for (int i = 0; i < split; ++i) first->step();
  StateDict saved = round_trip(first->state_dict());

  auto resumed_opt = make_optimizer();  // its lrs are back at epoch 0 until the state is loaded
  auto resumed = make_schedule(*resumed_opt);
  resumed->load_state_dict(saved);
  REQUIRE(resumed->last_epoch() == split);
  REQUIRE(resumed->get_last_lr() == lrs[split]);
  REQUIRE(resumed_opt->param_groups()[0].options().get_lr() == lrs[split][0]);
  REQUIRE(resumed_opt->param_groups()[0].options().get_momentum() == momenta[split]);
  for (int i = split + 1; i <= total; ++i) {
    resumed->step();
    REQUIRE(resumed->get_last_lr() == lrs[i]);
    for (size_t g = 0; g < lrs[i].size(); ++g) REQUIRE(resumed_opt->param_groups()[g].options().get_lr() == lrs[i][g]);
    REQUIRE(resumed_opt->param_groups()[0].options().get_momentum() == momenta[i]);
  }
}

}  // namespace

TEST_CASE("StepLR matches PyTorch", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.1, 0.02});
  StepLR schedule(*sgd, 3, 0.5);
  check_sequence(schedule, {kStepLRGroup0, kStepLRGroup1});
}

TEST_CASE("MultiStepLR matches PyTorch, a repeated milestone decaying twice", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.1});
  MultiStepLR schedule(*sgd, {9, 2, 5, 5}, 0.1);  // unsorted on purpose
  check_sequence(schedule, {kMultiStepLRGroup0});
}

TEST_CASE("CosineAnnealingLR matches PyTorch, past T_max too", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.1, 0.05});
  CosineAnnealingLR schedule(*sgd, 10, 0.001);
  check_sequence(schedule, {kCosineAnnealingLRGroup0, kCosineAnnealingLRGroup1});
}

TEST_CASE("OneCycleLR (cos) matches PyTorch and cycles SGD's momentum", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.5}, 0.9);
  OneCycleLR schedule(*sgd, 1.0, 20);
  check_sequence(schedule, {kOneCycleCosSGDGroup0}, &kOneCycleCosSGDMomentum);
  REQUIRE_THROWS_WITH(schedule.step(), Catch::Contains("tried to step 21 times, but total_steps is 20"));
  REQUIRE(schedule.last_epoch() == 20);
}

TEST_CASE("OneCycleLR (linear, three phases) matches PyTorch and cycles Adam's beta1", "[optim][lr]") {
  std::vector<ParamGroup> groups;
  for (int g = 0; g < 2; ++g) groups.emplace_back(std::vector<Tensor>{zeros({2}).requires_grad_()});
  Adam adam(groups, AdamOptions(0.001));
  OneCycleLR schedule(adam, {0.01, 0.02}, 16,
                      OneCycleLROptions()
                          .pct_start(0.25)
                          .anneal_strategy(AnnealStrategy::Linear)
                          .div_factor(10.0)
                          .final_div_factor(100.0)
                          .three_phase(true)
                          .base_momentum(0.8)
                          .max_momentum(0.9));
  check_sequence(schedule, {kOneCycleLinearThreePhaseAdamGroup0, kOneCycleLinearThreePhaseAdamGroup1},
                 &kOneCycleLinearThreePhaseAdamMomentum);
  REQUIRE(std::get<1>(static_cast<const AdamOptions&>(adam.param_groups()[0].options()).betas()) == 0.999);
}

TEST_CASE("LinearWarmup then CosineAnnealingLR matches PyTorch's SequentialLR(LinearLR, ...)", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.5});
  LinearWarmup schedule(*sgd, 4, 0.1, std::make_unique<CosineAnnealingLR>(*sgd, 8, 0.0));
  check_sequence(schedule, {kWarmupCosineGroup0});
  REQUIRE(schedule.after()->last_epoch() == 15 - 4);
}

TEST_CASE("LinearWarmup then MultiStepLR matches PyTorch's SequentialLR(LinearLR, ...)", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.2});
  LinearWarmup schedule(*sgd, 3, 0.25, std::make_unique<MultiStepLR>(*sgd, std::vector<int64_t>{3, 6}, 0.5));
  check_sequence(schedule, {kWarmupMultiStepGroup0});
}

TEST_CASE("LinearWarmup alone ramps and then holds", "[optim][lr]") {
  auto sgd = sgd_with_lrs({1.0});
  LinearWarmup schedule(*sgd, 4, 0.0);
  std::vector<double> lrs = {schedule.get_last_lr()[0]};
  for (int i = 0; i < 6; ++i) {
    schedule.step();
    lrs.push_back(schedule.get_last_lr()[0]);
  }
  REQUIRE(lrs == std::vector<double>{0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0});
}

TEST_CASE("a schedule resumed from its state_dict continues the same sequence", "[optim][lr]") {
  auto make_sgd = [] { return sgd_with_lrs({0.1, 0.02}, 0.9); };
  SECTION("StepLR") {
    check_resume(
        make_sgd, [](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); }, 5, 12);
  }
  SECTION("MultiStepLR") {
    check_resume(
        make_sgd,
        [](Optimizer& o) {
          return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{2, 4, 4});
        },
        3, 8);
  }
  SECTION("CosineAnnealingLR") {
    check_resume(
        make_sgd, [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 10, 1e-3); }, 7, 25);
  }
  SECTION("OneCycleLR, with its momentum") {
    check_resume(
        make_sgd, [](Optimizer& o) { return std::make_unique<OneCycleLR>(o, 1.0, 30); }, 11, 30);
  }
  SECTION("LinearWarmup, in the warm-up and in the wrapped schedule") {
    auto make = [](Optimizer& o) {
      return std::make_unique<LinearWarmup>(o, 5, 0.1, std::make_unique<CosineAnnealingLR>(o, 10));
    };
    check_resume(make_sgd, make, 3, 20);
    check_resume(make_sgd, make, 9, 20);
  }
}

TEST_CASE("invalid schedules are rejected", "[optim][lr]") {
  auto sgd = sgd_with_lrs({0.1, 0.02}, 0.9);
  REQUIRE_THROWS_WITH(StepLR(*sgd, 0), Catch::Contains("StepLR: invalid step_size"));
  REQUIRE_THROWS_WITH(CosineAnnealingLR(*sgd, 0), Catch::Contains("invalid T_max"));
  REQUIRE_THROWS_WITH(OneCycleLR(*sgd, 1.0, 0), Catch::Contains("invalid total_steps"));
  REQUIRE_THROWS_WITH(OneCycleLR(*sgd, 1.0, 10, OneCycleLROptions().pct_start(1.5)), Catch::Contains("pct_start"));
  REQUIRE_THROWS_WITH(OneCycleLR(*sgd, std::vector<double>{1.0}, 10), Catch::Contains("expected 2 max_lr values"));
  REQUIRE_THROWS_WITH(LinearWarmup(*sgd, 5, 1.5), Catch::Contains("invalid start_factor"));
  auto other = sgd_with_lrs({0.1, 0.02});
  REQUIRE_THROWS_WITH(LinearWarmup(*sgd, 5, 0.1, std::make_unique<StepLR>(*other, 2)),
                      Catch::Contains("same optimizer"));

  StepLR step(*sgd, 2);
  CosineAnnealingLR cosine(*sgd, 10);
  REQUIRE_THROWS_WITH(step.load_state_dict(cosine.state_dict()), Catch::Contains("expected the state of a StepLR"));
}

// ModelParallel: checking the balance, placing each stage's layers, and the stage-by-stage forward.
#include "parallel/model_parallel.h"

#include <sstream>

#include "core/runtime.h"
#include "parallel/pipeline.h"

namespace ember::parallel {

namespace {

template <typename T>
std::string list_of(const std::vector<T>& items) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < items.size(); ++i) out << (i ? ", " : "") << items[i];
  out << "]";
  return out.str();
}

}  // namespace

ModelParallel::ModelParallel(nn::Sequential sequential, std::vector<Device> devices, std::vector<int64_t> balance)
    : Module("ModelParallel"),
      sequential_(std::move(sequential)),
      devices_(std::move(devices)),
      balance_(std::move(balance)) {
  EMBER_CHECK(!sequential_.is_empty(), "ModelParallel: the Sequential is an empty holder");
  EMBER_CHECK(!devices_.empty(), "ModelParallel: no devices given; expected one device per stage");
  for (size_t i = 0; i < devices_.size(); ++i) {
    try {
      runtime_for(devices_[i], "ModelParallel");
    } catch (const Error& e) {
      EMBER_FAIL("ModelParallel: devices[", i, "] is ", devices_[i], ", which is not available: ", e.what());
    }
  }
  const int64_t layers = static_cast<int64_t>(sequential_->size()), stages = num_stages();
  EMBER_CHECK(stages <= layers, "ModelParallel: ", stages, " devices ", list_of(devices_), " make ", stages,
              " stages, but the Sequential has only ", layers, " layer", layers == 1 ? "" : "s",
              "; each stage needs at least one");
  if (balance_.empty()) balance_ = balance_by_parameters(sequential_, stages);
  EMBER_CHECK(static_cast<int64_t>(balance_.size()) == stages, "ModelParallel: balance ", list_of(balance_), " has ",
              balance_.size(), " entries for ", stages, " devices ", list_of(devices_), "; expected one per device");
  int64_t total = 0;
  for (size_t i = 0; i < balance_.size(); ++i) {
    EMBER_CHECK(balance_[i] >= 1, "ModelParallel: balance ", list_of(balance_), " gives stage ", i, " (", devices_[i],
                ") ", balance_[i], " layers; each stage needs at least one");
    total += balance_[i];
  }
  EMBER_CHECK(total == layers, "ModelParallel: balance ", list_of(balance_), " sums to ", total,
              " layers, but the Sequential has ", layers);

  register_module("sequential", sequential_);
  size_t next = 0;
  for (size_t i = 0; i < balance_.size(); ++i) {
    nn::Sequential stage;
    for (int64_t j = 0; j < balance_[i]; ++j, ++next) stage->push_back(sequential_->name(next), (*sequential_)[next]);
    stage->to(devices_[i]);
    stages_.push_back(stage);
  }
  // A module listed in two stages on different devices ends on the later one's device.
  for (size_t i = 0; i < stages_.size(); ++i) {
    for (bool parameters : {true, false}) {
      for (const auto& [name, t] : parameters ? stages_[i]->named_parameters() : stages_[i]->named_buffers()) {
        EMBER_CHECK(t.device() == devices_[i], "ModelParallel: stage ", i, "'s ", parameters ? "parameter" : "buffer",
                    " '", name, "' is on ", t.device(), " instead of ", devices_[i],
                    ": a module shared by stages on different devices cannot live on both");
      }
    }
  }
}

Tensor ModelParallel::forward(const Tensor& input) {
  Tensor x = input;
  int64_t first = 0;
  for (size_t i = 0; i < stages_.size(); ++i) {
    // Differentiable: the backward of the copy brings the gradient back to the previous device.
    x = x.to(devices_[i]);
    try {
      x = stages_[i]->forward(x);
    } catch (const Error& e) {
      EMBER_FAIL("ModelParallel: stage ", i, " on ", devices_[i], " (layers ", first, " to ", first + balance_[i] - 1,
                 "): ", e.what());
    }
    first += balance_[i];
  }
  return x;
}

const nn::Sequential& ModelParallel::stage(int64_t i) const {
  EMBER_CHECK(i >= 0 && i < num_stages(), "ModelParallel: stage ", i, " is out of range for ", num_stages(), " stages");
  return stages_[static_cast<size_t>(i)];
}

std::vector<std::pair<std::string, Tensor>> ModelParallel::named_parameters(bool recurse) const {
  return sequential_->named_parameters(recurse);
}

std::vector<std::pair<std::string, Tensor>> ModelParallel::named_buffers(bool recurse) const {
  return sequential_->named_buffers(recurse);
}

NamedTensors ModelParallel::state_dict() const { return sequential_->state_dict(); }

nn::LoadResult ModelParallel::load_state_dict(const NamedTensors& state, bool strict) {
  return sequential_->load_state_dict(state, strict);
}

void ModelParallel::to(Device device) {
  std::ostringstream placement;
  for (size_t i = 0; i < devices_.size(); ++i) placement << (i ? ", " : "") << "stage " << i << " on " << devices_[i];
  EMBER_FAIL("ModelParallel::to(", device, "): the placement is fixed at construction (", placement.str(),
             "); build a new ModelParallel to place the layers elsewhere");
}

std::string ModelParallel::extra_repr() const {
  return "devices=" + list_of(devices_) + ", balance=" + list_of(balance_);
}

}  // namespace ember::parallel

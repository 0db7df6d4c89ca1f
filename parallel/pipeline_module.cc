// The Pipeline as an nn::Module: splitting the Sequential into stages on their devices (checked
// against the schedule's virtual stages), and the bare Sequential's parameters, state and modes.
#include <sstream>

#include "core/runtime.h"
#include "parallel/pipeline.h"

namespace ember::parallel {

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream out;
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  return out.str();
}

}  // namespace

Pipeline::Pipeline(nn::Sequential sequential, std::vector<Device> devices, int64_t chunks, Schedule schedule,
                   PipelineOptions options)
    : Module("Pipeline"),
      sequential_(std::move(sequential)),
      devices_(std::move(devices)),
      chunks_(chunks),
      schedule_(schedule),
      virtual_stages_(options.virtual_stages),
      options_(std::move(options)) {
  EMBER_CHECK(sequential_.ptr() != nullptr, "Pipeline: the Sequential is null");
  EMBER_CHECK(!devices_.empty(), "Pipeline: no devices given");
  EMBER_CHECK(chunks_ >= 1, "Pipeline: chunks must be at least 1, got ", chunks_);
  EMBER_CHECK(options_.dim >= 0, "Pipeline: dim must be non-negative, got ", options_.dim);
  const int64_t v = virtual_stages_;
  EMBER_CHECK(v >= 1, "Pipeline: virtual_stages must be at least 1, got ", v);
  EMBER_CHECK(schedule_ != Schedule::kInterleaved1F1B || v >= 2,
              "Pipeline: the interleaved schedule needs virtual_stages >= 2 (model chunks per device), got ", v,
              "; with 1 use Schedule::k1F1B");
  EMBER_CHECK(schedule_ != Schedule::k1F1B || v == 1, "Pipeline: 1f1b holds one model chunk per device, got ",
              "virtual_stages ", v, "; use Schedule::kInterleaved1F1B");
  EMBER_CHECK(schedule_ != Schedule::kAuto || (v == 1 && options_.balance.empty()),
              "Pipeline: Schedule::kAuto chooses the virtual stages and the balance; got virtual_stages ", v,
              " and a balance of ", options_.balance.size(), " stages (expected 1 and none)");
  EMBER_CHECK(options_.memory_budget >= 0, "Pipeline: memory_budget must be non-negative bytes (0: none), got ",
              options_.memory_budget);
  for (int64_t m : options_.auto_chunks)
    EMBER_CHECK(m >= 1, "Pipeline: auto_chunks must be positive micro-batch counts, got ", m);
  const int64_t layers = static_cast<int64_t>(sequential_->size());
  const int64_t stages = static_cast<int64_t>(devices_.size()) * v;
  EMBER_CHECK(layers >= stages, "Pipeline: ", stages, " stages (", devices_.size(), " devices x ", v,
              " virtual stages) need at least ", stages, " layers, the Sequential has ", layers);
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device d = devices_[i];
    if (!d.is_cuda()) continue;
    const bool linked = has_backend(d.type);
    EMBER_CHECK(
        linked && d.index < device_count(d.type), "Pipeline: devices[", i, "] is ", d, ", which is not available (",
        linked ? std::to_string(device_count(d.type)) + " CUDA devices" : std::string("no CUDA backend linked"), ")");
  }
  balance_ = options_.balance.empty() ? balance_by_parameters(sequential_, stages) : options_.balance;
  EMBER_CHECK(static_cast<int64_t>(balance_.size()) == stages, "Pipeline: the balance has ", balance_.size(),
              " stages (", join(balance_), "), the devices x virtual stages ", stages);
  int64_t sum = 0;
  for (size_t i = 0; i < balance_.size(); ++i) {
    EMBER_CHECK(balance_[i] >= 1, "Pipeline: stage ", i, " of the balance (", join(balance_), ") has ", balance_[i],
                " layers; every stage needs at least one");
    sum += balance_[i];
  }
  EMBER_CHECK(sum == layers, "Pipeline: the balance (", join(balance_), ") covers ", sum,
              " layers, the Sequential has ", layers);
  place_stages();
  start_executor();
}

void Pipeline::place_stages() {
  stages_.clear();
  int64_t next = 0;
  for (size_t s = 0; s < balance_.size(); ++s) {
    nn::Sequential stage;
    for (int64_t k = 0; k < balance_[s]; ++k, ++next) {
      const size_t i = static_cast<size_t>(next);
      stage->push_back(sequential_->name(i), (*sequential_)[i]);  // the model's own keys per stage
    }
    stage->to(stage_device(static_cast<int64_t>(s)));
    stages_.push_back(stage);
  }
  checked_micro_batches_.clear();
  ++placements_;
}

std::vector<std::pair<std::string, Tensor>> Pipeline::named_parameters(bool recurse) const {
  return sequential_->named_parameters(recurse);
}

std::vector<std::pair<std::string, Tensor>> Pipeline::named_buffers(bool recurse) const {
  return sequential_->named_buffers(recurse);
}

NamedTensors Pipeline::state_dict() const { return sequential_->state_dict(); }

nn::LoadResult Pipeline::load_state_dict(const NamedTensors& state, bool strict) {
  return sequential_->load_state_dict(state, strict);
}

void Pipeline::train(bool on) {
  Module::train(on);
  sequential_->train(on);
}

void Pipeline::to(Device device) {
  std::ostringstream where;
  for (size_t i = 0; i < devices_.size(); ++i) where << (i ? ", " : "") << devices_[i];
  EMBER_FAIL("Pipeline::to(", device, "): a Pipeline's stages stay on the devices it was built with (", where.str(),
             "); build a new Pipeline to move them");
}

void Pipeline::to(DType dtype) { sequential_->to(dtype); }

std::string Pipeline::extra_repr() const {
  std::ostringstream out;
  out << "stages=" << devices_.size() << ", balance=[" << join(balance_) << "], chunks=" << chunks_
      << ", schedule=" << schedule_name(schedule_)
      << (virtual_stages_ > 1 ? ", virtual_stages=" + std::to_string(virtual_stages_) : std::string())
      << (options_.checkpoint ? ", checkpoint" : "") << (options_.deferred_batch_norm ? ", deferred_batch_norm" : "");
  return out.str();
}

}  // namespace ember::parallel

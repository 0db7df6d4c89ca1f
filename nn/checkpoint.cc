// One file holds every part: tensors under prefixes, JSON for the rest. Loading parses and
// validates the whole file (core/safetensors) before touching the model.
#include "nn/checkpoint.h"

#include <algorithm>

#include "core/io/file_io.h"
#include "core/io/safetensors.h"
#include "core/kernel_select.h"

namespace ember::nn {

namespace {

constexpr const char* kMetadataKey = "ember.checkpoint";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";

NamedTensors with_prefix(const NamedTensors& tensors, const std::string& prefix) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(prefix + name, t);
  return out;
}

NamedTensors take_prefix(const NamedTensors& tensors, const std::string& prefix) {
  NamedTensors out;
  for (const auto& [name, t] : tensors)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

int64_t member_int(const json::Value& object, const char* key, const std::string& path) {
  const json::Value* v = object.find(key);
  EMBER_CHECK(v && v->is_integer(), "load_checkpoint: '", path, "': field \"", key, "\" is missing or not an integer");
  return v->as_int();
}

}  // namespace

json::Value training_metadata(const TrainingState& state, const optim::LRScheduler* scheduler,
                              const Generator* generator, const amp::GradScaler* scaler) {
  json::Value meta = json::Value::object();
  meta.set("epoch", json::Value::integer(state.epoch));
  meta.set("step", json::Value::integer(state.step));
  json::Value loader = json::Value::object();
  loader.set("epoch", json::Value::integer(state.loader_epoch));
  loader.set("batches", json::Value::integer(state.loader_batches));
  meta.set("loader", std::move(loader));
  meta.set("extra", state.extra);
  std::vector<std::pair<std::string, json::Value>> kernels;
  for (const auto& [key, name] : kernel_select::in_force()) kernels.emplace_back(key, json::Value::string(name));
  meta.set("kernels", json::Value::object(std::move(kernels)));
  if (scheduler) meta.set("scheduler", scheduler->state_dict().json);
  if (scaler) meta.set("grad_scaler", scaler->state_dict().json);
  if (generator) {
    auto rng = generator->state();
    // As strings: JSON numbers cannot carry every uint64 exactly.
    meta.set("rng", json::Value::array(
                        {json::Value::string(std::to_string(rng[0])), json::Value::string(std::to_string(rng[1]))}));
  }
  return meta;
}

void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* scheduler, const TrainingState& state, const Generator* generator,
                     const amp::GradScaler* scaler) {
  NamedTensors tensors = with_prefix(model.state_dict(), kModelPrefix);
  json::Value meta = training_metadata(state, scheduler, generator, scaler);
  meta.set("version", json::Value::integer(1));
  if (optimizer) {
    optim::StateDict saved = optimizer->state_dict();
    NamedTensors prefixed = with_prefix(saved.tensors, kOptimizerPrefix);
    tensors.insert(tensors.end(), prefixed.begin(), prefixed.end());
    meta.set("optimizer", saved.json);
  }
  save_safetensors(path, tensors, {{kMetadataKey, meta.dump()}});
}

namespace {

json::Value checkpoint_metadata(const SafetensorsFile& file, const std::string& path) {
  auto it = file.metadata.find(kMetadataKey);
  EMBER_CHECK(it != file.metadata.end(), "load_checkpoint: '", path,
              "' is a safetensors file but not an Ember "
              "training checkpoint (no \"",
              kMetadataKey, "\" metadata); use load_model_weights for weights only");
  json::Value meta = json::parse(it->second, "load_checkpoint: '" + path + "' metadata");
  EMBER_CHECK(meta.is_object() && member_int(meta, "version", path) == 1, "load_checkpoint: '", path,
              "': unsupported checkpoint version");
  return meta;
}

TrainingState state_of(const json::Value& meta, const std::string& path) {
  TrainingState state;
  state.epoch = member_int(meta, "epoch", path);
  state.step = member_int(meta, "step", path);
  const json::Value* loader = meta.find("loader");
  EMBER_CHECK(loader && loader->is_object(), "load_checkpoint: '", path, "': missing loader position");
  state.loader_epoch = member_int(*loader, "epoch", path);
  state.loader_batches = member_int(*loader, "batches", path);
  if (const json::Value* extra = meta.find("extra")) state.extra = *extra;
  if (const json::Value* kernels = meta.find("kernels")) {  // absent before kernel decisions were saved
    EMBER_CHECK(kernels->is_object(), "load_checkpoint: '", path, "': field \"kernels\" is not an object");
    for (const auto& [key, name] : kernels->members()) {
      EMBER_CHECK(name.is_string(), "load_checkpoint: '", path, "': the kernel decision for '", key,
                  "' is not a string");
      state.kernels[key] = name.as_string();
    }
  }
  return state;
}

}  // namespace

TrainingState read_training_state(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  return state_of(checkpoint_metadata(file, path), path);
}

TrainingState check_training_metadata(const json::Value& meta, const std::string& source, bool scheduler,
                                      bool generator, bool scaler) {
  EMBER_CHECK(!scheduler || meta.find("scheduler"), "load_checkpoint: '", source, "' holds no LR-schedule state");
  EMBER_CHECK(!generator || meta.find("rng"), "load_checkpoint: '", source, "' holds no random-generator state");
  EMBER_CHECK(!scaler || meta.find("grad_scaler"), "load_checkpoint: '", source, "' holds no gradient-scaler state");
  if (generator) {
    const json::Value* rng = meta.find("rng");
    EMBER_CHECK(
        rng->is_array() && rng->items().size() == 2 && rng->items()[0].is_string() && rng->items()[1].is_string(),
        "load_checkpoint: '", source, "': malformed random-generator state");
  }
  return state_of(meta, source);
}

void restore_training_metadata(const json::Value& meta, const TrainingState& state, optim::LRScheduler* scheduler,
                               Generator* generator, amp::GradScaler* scaler) {
  if (scheduler) {
    optim::StateDict saved;
    saved.json = *meta.find("scheduler");
    scheduler->load_state_dict(saved);
  }
  if (scaler) {
    optim::StateDict saved;
    saved.json = *meta.find("grad_scaler");
    scaler->load_state_dict(saved);
  }
  if (generator) {
    const json::Value* rng = meta.find("rng");
    generator->set_state({std::stoull(rng->items()[0].as_string()), std::stoull(rng->items()[1].as_string())});
  }
  kernel_select::adopt(state.kernels);
}

TrainingState load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer,
                              optim::LRScheduler* scheduler, Generator* generator, amp::GradScaler* scaler) {
  SafetensorsFile file = load_safetensors(path);
  json::Value meta = checkpoint_metadata(file, path);
  // Validate every part before changing anything.
  NamedTensors model_state = take_prefix(file.tensors, kModelPrefix);
  EMBER_CHECK(!optimizer || meta.find("optimizer"), "load_checkpoint: '", path, "' holds no optimizer state");
  TrainingState state = check_training_metadata(meta, path, scheduler, generator, scaler);

  model.load_state_dict(model_state, /*strict=*/true);
  if (optimizer) {
    optim::StateDict saved;
    saved.tensors = take_prefix(file.tensors, kOptimizerPrefix);
    saved.json = *meta.find("optimizer");
    optimizer->load_state_dict(saved);
  }
  restore_training_metadata(meta, state, scheduler, generator, scaler);
  return state;
}

void load_model_weights(const std::string& path, Module& model) {
  SafetensorsFile file = load_safetensors(path);
  NamedTensors state = file.metadata.count(kMetadataKey) ? take_prefix(file.tensors, kModelPrefix) : file.tensors;
  model.load_state_dict(state, /*strict=*/true);
}

NamedTensors load_checkpoint(const std::string& path, Device device) {
  SafetensorsFile file = load_safetensors(path);
  NamedTensors state = file.metadata.count(kMetadataKey) ? take_prefix(file.tensors, kModelPrefix) : file.tensors;
  const bool wrapped = !state.empty() && std::all_of(state.begin(), state.end(), [](const auto& entry) {
    return entry.first.rfind("module.", 0) == 0;
  });
  if (wrapped) state = strip_prefix(state, "module.");
  for (auto& entry : state) entry.second = entry.second.to(device);
  return state;
}

}  // namespace ember::nn

// What the save and the load of sharded checkpoints (sharded_checkpoint_save.cc,
// sharded_checkpoint_load.cc) agree on: the names inside the files and the index's reader, and
// how an optimizer's parameters are named. Internal to //parallel:distributed.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/io/json.h"
#include "nn/optim/optimizer.h"
#include "parallel/sharded_data_parallel.h"

namespace ember::parallel::sharded_format {

constexpr const char* kFormat = "ember.sharded_checkpoint";
constexpr const char* kIndex = "index.json";
constexpr const char* kFileKey = "ember.sharded_checkpoint";
constexpr const char* kParam = "param.";
constexpr const char* kOptim = "optim.";
constexpr const char* kReplicated = "replicated.";

// index.json of `dir`, its format and version checked.
json::Value read_index(const std::string& dir);

// The names of the optimizer's parameters, group by group, from `names` (its tensors must all be
// there: the optimizer must be over the model's parameters); `who` names the caller in errors.
std::vector<std::vector<std::string>> group_names(const optim::Optimizer& optimizer,
                                                  const std::unordered_map<const TensorImpl*, std::string>& names,
                                                  const char* who);

// The tensors a sharded model keeps whole on every rank: buffers and frozen parameters.
NamedTensors replicated_of(const ShardedDataParallel& model);

}  // namespace ember::parallel::sharded_format

// The parts the save and the load of sharded checkpoints share.
#include "parallel/sharded_checkpoint_format.h"

#include <filesystem>
#include <unordered_set>

#include "core/io/file_io.h"
#include "nn/optim/state_dict.h"

namespace ember::parallel::sharded_format {

json::Value read_index(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kIndex).string();
  std::vector<uint8_t> bytes = read_file(path);
  json::Value index = json::parse(std::string(bytes.begin(), bytes.end()), "load_sharded_checkpoint: '" + path + "'");
  const json::Value* format = index.is_object() ? index.find("format") : nullptr;
  EMBER_CHECK(format && format->is_string() && format->as_string() == kFormat, "load_sharded_checkpoint: '", path,
              "' is not an Ember sharded-checkpoint index (expected \"format\": \"", kFormat, "\")");
  EMBER_CHECK(optim::json_int(index, "version", path) == 1, "load_sharded_checkpoint: '", path,
              "': unsupported version");
  return index;
}

std::vector<std::vector<std::string>> group_names(const optim::Optimizer& optimizer,
                                                  const std::unordered_map<const TensorImpl*, std::string>& names,
                                                  const char* who) {
  std::vector<std::vector<std::string>> out;
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    out.emplace_back();
    for (const Tensor& p : optimizer.param_groups()[g].params()) {
      auto it = names.find(p.unsafe_impl());
      EMBER_CHECK(it != names.end(), who, ": parameter group ", g, " of the ", optimizer.name(),
                  " optimizer holds a tensor that is not one of the model's parameters (build the optimizer over "
                  "the sharded model's parameters())");
      out.back().push_back(it->second);
    }
  }
  return out;
}

// The tensors a sharded model keeps whole on every rank: buffers and frozen parameters.

NamedTensors replicated_of(const ShardedDataParallel& model) {
  std::unordered_set<std::string> sharded;
  for (const LocalShard& s : model.local_shards()) sharded.insert(s.name);
  NamedTensors out;
  for (const auto& [name, p] : model.module()->named_parameters())
    if (!sharded.count(name)) out.emplace_back(name, p);
  for (const auto& [name, b] : model.module()->named_buffers()) out.emplace_back(name, b);
  return out;
}

}  // namespace ember::parallel::sharded_format

// Saving sharded checkpoints: each rank's file of its rows, written atomically, then the index
// rank 0 writes once every file is there (parallel/sharded_checkpoint.h).
#include <cstdio>
#include <filesystem>

#include "core/factory.h"
#include "core/io/file_io.h"
#include "core/io/safetensors.h"
#include "parallel/sharded_checkpoint.h"
#include "parallel/sharded_checkpoint_format.h"

namespace ember::parallel {

namespace fs = std::filesystem;
using namespace sharded_format;

struct AsyncShardedCheckpoint::Pending {
  std::string dir;
  std::string file;  // this rank's, within dir
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;
  std::string index;  // rank 0: index.json's text
  std::string error;  // set by the writer
};

namespace {

std::string shard_file_name(int rank, int world, int64_t serial) {
  char name[96];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.s%lld.safetensors", rank, world,
                static_cast<long long>(serial));
  return name;
}

json::Value shape_json(const Shape& shape) {
  json::Value out = json::Value::array();
  for (int64_t d : shape) out.items().push_back(json::Value::integer(d));
  return out;
}

Tensor host_copy(const Tensor& t) {
  Tensor d = t.detach();
  return d.device().is_cpu() ? d.contiguous().clone() : d.to(Device(kCPU));
}

// The serial number the next save of `dir` writes under: one past the index's.
int64_t next_serial(const std::string& dir) {
  if (!fs::exists(fs::path(dir) / kIndex)) return 1;
  try {
    return optim::json_int(read_index(dir), "serial", dir) + 1;
  } catch (const Error&) {
    return 1;  // an unreadable index names no files worth keeping apart from
  }
}

// Which optimizer parameter is which shard: the optimizer must be over the model's shards.

std::unique_ptr<AsyncShardedCheckpoint::Pending> capture(const std::string& dir, const ShardedDataParallel& model,
                                                         const optim::Optimizer* optimizer,
                                                         const optim::LRScheduler* scheduler,
                                                         const nn::TrainingState& state, const Generator* generator,
                                                         const amp::GradScaler* scaler) {
  constexpr const char* kWho = "save_sharded_checkpoint";
  comm::ProcessGroup& group = *model.process_group();
  const int rank = group.rank(), world = group.size();
  auto pending = std::make_unique<AsyncShardedCheckpoint::Pending>();
  pending->dir = dir;
  // Rank 0 picks the serial (and makes the directory) so that every rank names its file alike; -1
  // tells the others it could not, so that they raise instead of waiting for it.
  int64_t serial = 0;
  std::string failure;
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      failure = ec.message();
    else
      serial = next_serial(dir);
  }
  Tensor agreed = tensor<int64_t>({failure.empty() ? serial : int64_t{-1}}, {1}).to(model.device());
  group.broadcast(agreed, 0)->wait();
  serial = agreed.to(Device(kCPU)).item<int64_t>();
  EMBER_CHECK(serial > 0, kWho, " (rank ", rank, "): rank 0 could not create '", dir, "'",
              failure.empty() ? "" : ": " + failure);
  pending->file = shard_file_name(rank, world, serial);

  const std::vector<LocalShard> shards = model.local_shards();
  std::unordered_map<const TensorImpl*, std::string> names;
  for (const LocalShard& s : shards) {
    names.emplace(s.local.unsafe_impl(), s.name);
    pending->tensors.emplace_back(kParam + s.name, host_copy(s.local));
  }
  json::Value steps = json::Value::object();
  std::vector<std::vector<std::string>> listed;  // the optimizer's groups, by parameter name
  if (optimizer) {
    listed = group_names(*optimizer, names, kWho);  // checked on every rank, before any file is written
    for (const LocalShard& s : shards) {
      const optim::ParamState* st = optimizer->find_state(s.local);
      if (!st) continue;
      json::Value entry = json::Value::object();
      entry.set("step", json::Value::integer(st->step));
      json::Value list = json::Value::array();
      for (const auto& [name, t] : st->tensors) {
        pending->tensors.emplace_back(kOptim + s.name + "." + name, host_copy(t));
        list.items().push_back(json::Value::string(name));
      }
      entry.set("tensors", std::move(list));
      steps.set(s.name, std::move(entry));
    }
  }
  const NamedTensors replicated_tensors = rank == 0 ? replicated_of(model) : NamedTensors{};
  for (const auto& [name, t] : replicated_tensors) pending->tensors.emplace_back(kReplicated + name, host_copy(t));

  json::Value meta = json::Value::object();
  meta.set("rank", json::Value::integer(rank));
  meta.set("world_size", json::Value::integer(world));
  meta.set("serial", json::Value::integer(serial));
  if (generator) {
    auto rng = generator->state();
    meta.set("rng", json::Value::array(
                        {json::Value::string(std::to_string(rng[0])), json::Value::string(std::to_string(rng[1]))}));
  }
  pending->metadata[kFileKey] = meta.dump();
  if (rank != 0) return pending;

  json::Value index = json::Value::object();
  index.set("format", json::Value::string(kFormat));
  index.set("version", json::Value::integer(1));
  index.set("world_size", json::Value::integer(world));
  index.set("serial", json::Value::integer(serial));
  json::Value files = json::Value::array();
  for (int r = 0; r < world; ++r) files.items().push_back(json::Value::string(shard_file_name(r, world, serial)));
  index.set("files", std::move(files));
  json::Value params = json::Value::object();
  for (const LocalShard& s : shards) {
    const DimZeroShard& split = model.shard_of(s.name);
    json::Value rows = json::Value::array();
    for (int r = 0; r < world; ++r)
      rows.items().push_back(json::Value::array(
          {json::Value::integer(split.begin(r)), json::Value::integer(split.begin(r) + split.rows_of(r))}));
    json::Value entry = json::Value::object();
    entry.set("shape", shape_json(s.global_shape));
    entry.set("rows", std::move(rows));
    params.set(s.name, std::move(entry));
  }
  index.set("parameters", std::move(params));
  json::Value replicated = json::Value::array();
  for (const auto& [name, t] : replicated_tensors) replicated.items().push_back(json::Value::string(name));
  index.set("replicated", std::move(replicated));
  if (optimizer) {
    json::Value groups = json::Value::array();
    for (size_t g = 0; g < listed.size(); ++g) {
      json::Value entry = optimizer->param_groups()[g].options().to_json();
      json::Value ids = json::Value::array();
      for (const std::string& name : listed[g]) ids.items().push_back(json::Value::string(name));
      entry.set("params", std::move(ids));
      groups.items().push_back(std::move(entry));
    }
    json::Value opt = json::Value::object();
    opt.set("name", json::Value::string(optimizer->name()));
    opt.set("param_groups", std::move(groups));
    opt.set("state", std::move(steps));  // rank 0 owns row 0 of every parameter, so its state is complete
    index.set("optimizer", std::move(opt));
  }
  index.set("training", nn::training_metadata(state, scheduler, nullptr, scaler));
  index.set("rng", json::Value::boolean(generator != nullptr));
  pending->index = index.dump();
  return pending;
}

void write(AsyncShardedCheckpoint::Pending& pending) {
  try {
    save_safetensors((fs::path(pending.dir) / pending.file).string(), pending.tensors, pending.metadata);
  } catch (const std::exception& e) {
    pending.error = e.what();
  }
  pending.tensors.clear();  // the host copies go as soon as they are on disk
}

// Collective: whether every rank wrote its file (one flag per rank, summed), then rank 0 writes
// the index and removes the files no index names; a second sum carries its outcome and keeps every
// rank here until the checkpoint is complete.
void commit(const ShardedDataParallel& model, AsyncShardedCheckpoint::Pending& pending) {
  constexpr const char* kWho = "save_sharded_checkpoint";
  comm::ProcessGroup& group = *model.process_group();
  const int rank = group.rank(), world = group.size();
  std::vector<int64_t> flags(world, 0);
  flags[rank] = pending.error.empty() ? 0 : 1;
  Tensor failed = tensor<int64_t>(flags, {world}).to(model.device());
  group.all_reduce(failed)->wait();
  Tensor host = failed.to(Device(kCPU));
  std::string ranks;
  for (int r = 0; r < world; ++r)
    if (host.select(0, r).item<int64_t>() != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  EMBER_CHECK(pending.error.empty(), kWho, " (rank ", rank, "): could not write '", pending.dir, "/", pending.file,
              "': ", pending.error,
              "; no index was written, so the directory's previous checkpoint stays the one that loads");
  EMBER_CHECK(ranks.empty(), kWho, " (rank ", rank, "): rank(s) ", ranks, " of ", world,
              " could not write their shard of '", pending.dir,
              "'; no index was written, so the directory's previous checkpoint stays the one that loads");

  std::string index_error;
  if (rank == 0) {
    try {
      const std::vector<uint8_t> bytes(pending.index.begin(), pending.index.end());
      write_file_atomic((fs::path(pending.dir) / kIndex).string(), bytes);
      // Only now may the files of earlier saves (or of saves that died) go.
      const std::string keep_suffix = pending.file.substr(pending.file.find(".s"));
      for (const auto& entry : fs::directory_iterator(pending.dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("shard-", 0) == 0 && name.size() > keep_suffix.size() &&
            name.compare(name.size() - keep_suffix.size(), keep_suffix.size(), keep_suffix) != 0) {
          std::error_code ec;
          fs::remove(entry.path(), ec);
        }
      }
    } catch (const std::exception& e) {
      index_error = e.what();
    }
  }
  Tensor index_failed = tensor<int64_t>({index_error.empty() ? int64_t{0} : int64_t{1}}, {1}).to(model.device());
  group.all_reduce(index_failed)->wait();
  EMBER_CHECK(index_error.empty(), kWho, " (rank 0): could not write the index of '", pending.dir, "': ", index_error);
  EMBER_CHECK(index_failed.to(Device(kCPU)).item<int64_t>() == 0, kWho, " (rank ", rank,
              "): rank 0 could not write the index of '", pending.dir, "'");
}

// What a loading rank owns of one parameter: rows [begin, begin + rows) of its global shape,
// to land in `dst`.

}  // namespace

void save_sharded_checkpoint(const std::string& dir, const ShardedDataParallel& model,
                             const optim::Optimizer* optimizer, const optim::LRScheduler* scheduler,
                             const nn::TrainingState& state, const Generator* generator,
                             const amp::GradScaler* scaler) {
  auto pending = capture(dir, model, optimizer, scheduler, state, generator, scaler);
  write(*pending);
  commit(model, *pending);
}

AsyncShardedCheckpoint::AsyncShardedCheckpoint(const ShardedDataParallel& model) : model_(model) {}

AsyncShardedCheckpoint::~AsyncShardedCheckpoint() {
  if (writer_.joinable()) writer_.join();
}

void AsyncShardedCheckpoint::save(const std::string& dir, const optim::Optimizer* optimizer,
                                  const optim::LRScheduler* scheduler, const nn::TrainingState& state,
                                  const Generator* generator, const amp::GradScaler* scaler) {
  wait();
  pending_ = capture(dir, model_, optimizer, scheduler, state, generator, scaler);
  Pending* job = pending_.get();
  writer_ = std::thread([job] { write(*job); });
}

void AsyncShardedCheckpoint::wait() {
  if (!pending_) return;
  writer_.join();
  std::unique_ptr<Pending> done = std::move(pending_);
  commit(model_, *done);
}

}  // namespace ember::parallel

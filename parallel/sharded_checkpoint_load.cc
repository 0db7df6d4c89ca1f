// Loading sharded checkpoints at any world size: each rank's rows from the files that hold them
// (parallel/sharded_checkpoint.h).
#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/io/safetensors.h"
#include "core/ops.h"
#include "parallel/sharded_checkpoint.h"
#include "parallel/sharded_checkpoint_format.h"

namespace ember::parallel {

namespace fs = std::filesystem;
using namespace sharded_format;

namespace {

struct Piece {
  std::string name;
  Shape global;
  int64_t begin = 0;
  int64_t rows = 0;
  Tensor dst;
};

// A checkpoint being read: the index, and the files opened as rows are asked of them.
class Reader {
 public:
  explicit Reader(const std::string& dir) : dir_(dir), index_(read_index(dir)) {
    const std::string where = "load_sharded_checkpoint: '" + dir + "'";
    world_ = optim::json_int(index_, "world_size", where);
    const json::Value& files = optim::json_member(index_, "files", where);
    EMBER_CHECK(world_ >= 1 && files.is_array() && files.items().size() == static_cast<size_t>(world_), where,
                ": expected ", world_, " shard files in the index, got ", files.dump());
    for (const json::Value& f : files.items()) {
      EMBER_CHECK(f.is_string() && !f.as_string().empty() && f.as_string().find('/') == std::string::npos, where,
                  ": malformed shard file name ", f.dump());
      files_.push_back(f.as_string());
    }
    const json::Value& params = optim::json_member(index_, "parameters", where);
    EMBER_CHECK(params.is_object(), where, ": \"parameters\" is not an object");
    for (const auto& [name, entry] : params.members()) {
      Info info;
      const json::Value& shape = optim::json_member(entry, "shape", where);
      EMBER_CHECK(shape.is_array(), where, ": parameter '", name, "' has a malformed shape");
      for (const json::Value& d : shape.items()) {
        EMBER_CHECK(d.is_integer() && d.as_int() >= 0, where, ": parameter '", name, "' has a malformed shape");
        info.shape.push_back(d.as_int());
      }
      const int64_t total = info.shape.empty() ? 1 : info.shape[0];
      const json::Value& rows = optim::json_member(entry, "rows", where);
      EMBER_CHECK(rows.is_array() && rows.items().size() == files_.size(), where, ": parameter '", name,
                  "' lists no row range for each of the ", world_, " files");
      for (const json::Value& r : rows.items()) {
        EMBER_CHECK(r.is_array() && r.items().size() == 2 && r.items()[0].is_integer() && r.items()[1].is_integer(),
                    where, ": parameter '", name, "' has a malformed row range");
        const int64_t b = r.items()[0].as_int(), e = r.items()[1].as_int();
        EMBER_CHECK(0 <= b && b <= e && e <= total, where, ": parameter '", name, "' has rows [", b, ", ", e,
                    ") outside its ", total);
        info.rows.emplace_back(b, e);
      }
      params_.emplace(name, std::move(info));
    }
  }

  const std::string& dir() const { return dir_; }
  const json::Value& index() const { return index_; }
  int64_t world() const { return world_; }
  bool has_parameter(const std::string& name) const { return params_.count(name) > 0; }
  size_t parameter_count() const { return params_.size(); }

  const SafetensorsFile& file(size_t f) {
    auto it = opened_.find(f);
    if (it == opened_.end()) it = opened_.emplace(f, load_safetensors((fs::path(dir_) / files_[f]).string())).first;
    return it->second;
  }

  // Rows [piece.begin, +piece.rows) of tensor `key` (a parameter's or its optimizer state's),
  // from every file holding some of them, shaped as the piece's destination.
  Tensor rows(const std::string& key, const Piece& piece) {
    const std::string where = "load_sharded_checkpoint: '" + dir_ + "'";
    const Info& info = params_.at(piece.name);
    EMBER_CHECK(info.shape == piece.global, where, ": parameter '", piece.name, "' was saved with shape ",
                shape_str(info.shape), " but the model's is ", shape_str(piece.global));
    int64_t row_numel = 1;
    for (size_t d = 1; d < info.shape.size(); ++d) row_numel *= info.shape[d];
    Tensor out;
    int64_t covered = 0;
    for (size_t f = 0; f < info.rows.size(); ++f) {
      const auto [sb, se] = info.rows[f];
      const int64_t lo = std::max(piece.begin, sb), hi = std::min(piece.begin + piece.rows, se);
      if (lo >= hi && !(f == 0 && piece.rows == 0)) continue;
      const Tensor& src = file(f).at(key);
      EMBER_CHECK(src.numel() == (se - sb) * row_numel, where, ": '", key, "' in ", files_[f], " holds ", src.numel(),
                  " elements, expected ", (se - sb) * row_numel, " (rows [", sb, ", ", se, "))");
      if (!out.defined()) out = empty({piece.rows, row_numel}, src.dtype());
      EMBER_CHECK(src.dtype() == out.dtype(), where, ": '", key, "' has dtype ", dtype_name(src.dtype()), " in ",
                  files_[f], " but ", dtype_name(out.dtype()), " elsewhere");
      if (lo >= hi) continue;
      copy_into(out.narrow(0, lo - piece.begin, hi - lo),
                src.reshape({se - sb, row_numel}).narrow(0, lo - sb, hi - lo));
      covered += hi - lo;
    }
    EMBER_CHECK(covered == piece.rows, where, ": the files hold ", covered, " of rows [", piece.begin, ", ",
                piece.begin + piece.rows, ") of '", key, "'");
    return out.reshape(piece.dst.sizes());
  }

  json::Value file_metadata(size_t f) {
    const SafetensorsFile& sf = file(f);
    auto it = sf.metadata.find(kFileKey);
    EMBER_CHECK(it != sf.metadata.end(), "load_sharded_checkpoint: '", dir_, "/", files_[f],
                "' is not a shard of an Ember sharded checkpoint");
    return json::parse(it->second, "load_sharded_checkpoint: '" + dir_ + "/" + files_[f] + "' metadata");
  }

 private:
  struct Info {
    Shape shape;
    std::vector<std::pair<int64_t, int64_t>> rows;
  };
  std::string dir_;
  json::Value index_;
  int64_t world_ = 0;
  std::vector<std::string> files_;
  std::map<std::string, Info> params_;
  std::map<size_t, SafetensorsFile> opened_;
};

// Everything a load restores, read and checked before any of it is applied.
struct Loaded {
  std::vector<Tensor> values;  // per piece
  NamedTensors replicated;
  std::optional<optim::StateDict> optimizer;
  nn::TrainingState state;
  std::optional<std::array<uint64_t, 2>> rng;
};

Loaded read(Reader& reader, const std::vector<Piece>& pieces, const optim::Optimizer* optimizer, bool scheduler,
            bool generator, bool scaler, int rank) {
  const std::string where = "load_sharded_checkpoint: '" + reader.dir() + "'";
  Loaded out;
  std::unordered_map<std::string, size_t> piece_of;
  for (size_t i = 0; i < pieces.size(); ++i) piece_of.emplace(pieces[i].name, i);
  for (const Piece& p : pieces)
    EMBER_CHECK(reader.has_parameter(p.name), where, " (rank ", rank, "): the checkpoint has no parameter '", p.name,
                "'");
  EMBER_CHECK(reader.parameter_count() == pieces.size(), where, " (rank ", rank, "): the checkpoint holds ",
              reader.parameter_count(), " parameters, the model ", pieces.size());
  for (const Piece& p : pieces) out.values.push_back(reader.rows(kParam + p.name, p));

  const json::Value& index = reader.index();
  for (const json::Value& name : optim::json_member(index, "replicated", where).items()) {
    EMBER_CHECK(name.is_string(), where, ": malformed \"replicated\" entry ", name.dump());
    out.replicated.emplace_back(name.as_string(), reader.file(0).at(kReplicated + name.as_string()));
  }

  if (optimizer) {
    const json::Value* opt = index.find("optimizer");
    EMBER_CHECK(opt, where, " holds no optimizer state");
    // Checked here, not left to Optimizer::load_state_dict: that runs after the parameters changed.
    const json::Value& kind = optim::json_member(*opt, "name", where);
    EMBER_CHECK(kind.is_string() && kind.as_string() == optimizer->name(), where,
                ": the checkpoint holds the state of a ", kind.dump(), " optimizer, this one is ", optimizer->name());
    const json::Value& groups = optim::json_member(*opt, "param_groups", where);
    const json::Value& states = optim::json_member(*opt, "state", where);
    EMBER_CHECK(groups.is_array() && groups.items().size() == optimizer->param_groups().size(), where,
                ": the checkpoint's optimizer has ", groups.is_array() ? groups.items().size() : 0,
                " parameter groups, this one ", optimizer->param_groups().size());
    std::unordered_map<const TensorImpl*, std::string> names;
    for (const Piece& p : pieces) names.emplace(p.dst.unsafe_impl(), p.name);
    const auto listed = group_names(*optimizer, names, "load_sharded_checkpoint");
    optim::StateDict sd;
    json::Value rebuilt = json::Value::array();
    int64_t j = 0;
    for (size_t g = 0; g < listed.size(); ++g) {
      json::Value entry = groups.items()[g];
      const json::Value& saved = optim::json_member(entry, "params", where);
      EMBER_CHECK(saved.is_array() && saved.items().size() == listed[g].size(), where, ": parameter group ", g,
                  " holds ", saved.is_array() ? saved.items().size() : 0, " parameters in the checkpoint, ",
                  listed[g].size(), " in this optimizer");
      json::Value ids = json::Value::array();
      for (size_t k = 0; k < listed[g].size(); ++k, ++j) {
        const std::string& name = listed[g][k];
        EMBER_CHECK(saved.items()[k].is_string() && saved.items()[k].as_string() == name, where, ": parameter group ",
                    g, " position ", k, " is ", saved.items()[k].dump(), " in the checkpoint but '", name,
                    "' in this optimizer");
        ids.items().push_back(json::Value::integer(j));
        const json::Value* st = states.find(name);
        if (!st) continue;
        const std::string prefix = "state." + std::to_string(j) + ".";
        for (const json::Value& t : optim::json_member(*st, "tensors", where).items()) {
          EMBER_CHECK(t.is_string(), where, ": malformed optimizer state list of '", name, "'");
          sd.tensors.emplace_back(prefix + t.as_string(),
                                  reader.rows(kOptim + name + "." + t.as_string(), pieces[piece_of.at(name)]));
        }
        sd.tensors.emplace_back(prefix + "step", scalar_tensor(optim::json_int(*st, "step", where), kInt64));
      }
      entry.set("params", std::move(ids));
      rebuilt.items().push_back(std::move(entry));
    }
    sd.json.set("optimizer", optim::json_member(*opt, "name", where));
    sd.json.set("param_groups", std::move(rebuilt));
    out.optimizer = std::move(sd);
  }

  out.state =
      nn::check_training_metadata(optim::json_member(index, "training", where), reader.dir(), scheduler, false, scaler);
  if (generator) {
    EMBER_CHECK(optim::json_bool(index, "rng", where), where, " holds no random-generator state");
    const int64_t f = rank % reader.world();
    json::Value meta = reader.file_metadata(f);
    const json::Value& rng = optim::json_member(meta, "rng", where);
    EMBER_CHECK(rng.is_array() && rng.items().size() == 2 && rng.items()[0].is_string() && rng.items()[1].is_string(),
                where, ": malformed random-generator state in file ", f);
    out.rng = std::array<uint64_t, 2>{std::stoull(rng.items()[0].as_string()), std::stoull(rng.items()[1].as_string())};
  }
  return out;
}

void restore_rest(const Reader& reader, Loaded& loaded, optim::Optimizer* optimizer, optim::LRScheduler* scheduler,
                  Generator* generator, amp::GradScaler* scaler) {
  if (optimizer) optimizer->load_state_dict(*loaded.optimizer);
  const json::Value& training = *reader.index().find("training");
  nn::restore_training_metadata(training, loaded.state, scheduler, nullptr, scaler);
  if (generator) generator->set_state(*loaded.rng);
}

}  // namespace

nn::TrainingState load_sharded_checkpoint(const std::string& dir, ShardedDataParallel& model,
                                          optim::Optimizer* optimizer, optim::LRScheduler* scheduler,
                                          Generator* generator, amp::GradScaler* scaler) {
  const int rank = model.process_group()->rank();
  Reader reader(dir);
  std::vector<Piece> pieces;
  for (const LocalShard& s : model.local_shards()) {
    const DimZeroShard& split = model.shard_of(s.name);
    pieces.push_back({s.name, s.global_shape, s.row_begin, split.rows_of(rank), s.local});
  }
  Loaded loaded = read(reader, pieces, optimizer, scheduler != nullptr, generator != nullptr, scaler != nullptr, rank);
  const NamedTensors targets = replicated_of(model);
  const std::string where = "load_sharded_checkpoint: '" + dir + "'";
  std::unordered_map<std::string, const Tensor*> saved;
  for (const auto& [name, t] : loaded.replicated) saved.emplace(name, &t);
  EMBER_CHECK(saved.size() == targets.size(), where, " (rank ", rank, "): the checkpoint holds ", saved.size(),
              " buffers and frozen parameters, the model ", targets.size());
  for (const auto& [name, t] : targets) {
    auto it = saved.find(name);
    EMBER_CHECK(it != saved.end(), where, " (rank ", rank, "): the checkpoint has no buffer '", name, "'");
    EMBER_CHECK(it->second->sizes() == t.sizes(), where, " (rank ", rank, "): '", name, "' was saved with shape ",
                shape_str(it->second->sizes()), " but the model's is ", shape_str(t.sizes()));
  }

  NoGradGuard no_grad;
  for (size_t i = 0; i < pieces.size(); ++i) {
    copy_into(pieces[i].dst, loaded.values[i]);
    pieces[i].dst.bump_version();
  }
  for (const auto& [name, t] : targets) copy_into(t, *saved.at(name));
  restore_rest(reader, loaded, optimizer, scheduler, generator, scaler);
  model.shards_changed();
  return loaded.state;
}

nn::TrainingState load_sharded_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer,
                                          optim::LRScheduler* scheduler, Generator* generator,
                                          amp::GradScaler* scaler) {
  Reader reader(dir);
  std::vector<Piece> pieces;
  for (const auto& [name, p] : model.named_parameters())
    if (reader.has_parameter(name)) pieces.push_back({name, p.sizes(), 0, p.dim() == 0 ? 1 : p.size(0), p});
  Loaded loaded = read(reader, pieces, optimizer, scheduler != nullptr, generator != nullptr, scaler != nullptr, 0);
  NamedTensors full = loaded.replicated;
  for (size_t i = 0; i < pieces.size(); ++i) full.emplace_back(pieces[i].name, loaded.values[i]);
  model.load_state_dict(full, /*strict=*/true);
  restore_rest(reader, loaded, optimizer, scheduler, generator, scaler);
  return loaded.state;
}

bool is_sharded_checkpoint(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kIndex, ec);
}

nn::TrainingState read_sharded_training_state(const std::string& dir) {
  json::Value index = read_index(dir);
  const std::string where = "load_sharded_checkpoint: '" + dir + "'";
  return nn::check_training_metadata(optim::json_member(index, "training", where), dir, false, false, false);
}

}  // namespace ember::parallel

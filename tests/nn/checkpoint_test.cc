// Training checkpoints: 2N steps in one go equal N steps + save + load into freshly built objects
// + N steps, bit for bit (model, optimizer, LR schedule, dropout's generator, data-loader
// position all restored); the kernel decisions in force saved and adopted on load, and files
// without them still loading; damaged or mismatched files raise naming the problem.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/ember_core.h"
#include "core/io/safetensors.h"
#include "core/kernel_select.h"
#include "data/data.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"

using namespace ember;

namespace {

std::string temp_path(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

struct Run {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::SGD> optimizer;
  std::unique_ptr<optim::OneCycleLR> schedule;
  std::unique_ptr<data::DataLoader> loader;
  int64_t steps = 0;

  explicit Run(uint64_t init_seed) {
    manual_seed(init_seed);
    model = nn::Sequential(nn::Flatten(), nn::Linear(12, 16), nn::BatchNorm1d(16), nn::ReLU(), nn::Dropout(0.3),
                           nn::Linear(16, 3))
                .ptr();
    optimizer = std::make_unique<optim::SGD>(model->parameters(),
                                             optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3));
    schedule = std::make_unique<optim::OneCycleLR>(*optimizer, 0.2, 40);
    Generator g(3);
    auto dataset =
        std::make_shared<data::TensorDataset>(randn({37, 12}, {}, &g), randint(0, 3, {37}, TensorOptions(kInt64), &g));
    loader = std::make_unique<data::DataLoader>(dataset, data::DataLoaderOptions(5).shuffle(true).seed(11).workers(1));
  }

  void train(int64_t count) {
    while (count > 0) {
      for (data::Batch& batch : *loader) {
        optimizer->zero_grad();
        cross_entropy(model->forward(batch.data), batch.target).backward();
        optimizer->step();
        schedule->step();
        ++steps;
        if (--count == 0) return;
      }
    }
  }

  nn::TrainingState state() const {
    data::LoaderState position = loader->state();
    return {0, steps, position.epoch, position.batches};
  }
};

}  // namespace

TEST_CASE("a resumed run continues bit for bit", "[checkpoint]") {
  const int64_t n = 13;  // crosses an epoch boundary (8 batches per epoch) on both sides
  Run straight(1);
  manual_seed(99);  // dropout draws from the global generator from here on
  straight.train(2 * n);

  Run first(1);
  manual_seed(99);
  first.train(n);
  std::string path = temp_path("resume.safetensors");
  nn::save_checkpoint(path, *first.model, first.optimizer.get(), first.schedule.get(), first.state());
  manual_seed(12345);  // scramble the generator: the checkpoint must restore it

  Run second(777);  // different initial weights: all of them must come from the file
  nn::TrainingState state = nn::load_checkpoint(path, *second.model, second.optimizer.get(), second.schedule.get());
  REQUIRE(state.step == n);
  second.loader->load_state({state.loader_epoch, state.loader_batches});
  second.steps = state.step;
  second.train(n);

  auto a = straight.model->state_dict(), b = second.model->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(a[i].first == b[i].first);
    REQUIRE(a[i].second.to_vector<double>() == b[i].second.to_vector<double>());
  }
  REQUIRE(straight.optimizer->param_groups()[0].options().get_lr() ==
          second.optimizer->param_groups()[0].options().get_lr());
}

TEST_CASE("damaged or mismatched checkpoints raise naming the problem", "[checkpoint]") {
  Run run(1);
  run.train(2);
  std::string path = temp_path("damaged.safetensors");
  nn::save_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get(), run.state());

  {
    auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size / 2);
    REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get()),
                        Catch::Contains("damaged.safetensors"));
  }
  nn::save_checkpoint(path, *run.model, nullptr, nullptr, run.state());
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *run.model, run.optimizer.get(), nullptr),
                      Catch::Contains("holds no optimizer state"));
  auto other = nn::Sequential(nn::Flatten(), nn::Linear(12, 5)).ptr();
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *other, nullptr, nullptr),
                      Catch::Contains("shape/dtype mismatches") && Catch::Contains("unexpected keys") &&
                          Catch::Contains("1.weight: expected [5, 12] float32, got [16, 12] float32"));
  save_safetensors(path, run.model->state_dict());
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *run.model, nullptr, nullptr),
                      Catch::Contains("not an Ember training checkpoint"));
  REQUIRE_NOTHROW(nn::load_model_weights(path, *run.model));
}

TEST_CASE("read_training_state returns the saved position and extra, restoring nothing", "[checkpoint]") {
  Run run(2);
  run.train(3);
  nn::TrainingState saved = run.state();
  saved.epoch = 4;
  saved.extra.set("note", json::Value::string("kept"));
  std::string path = temp_path("peek.safetensors");
  nn::save_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get(), saved);
  const std::vector<double> weights = run.model->parameters()[0].to_vector<double>();
  const int64_t seed_state_probe = randint(0, 1 << 30, {1}, TensorOptions(kInt64)).item<int64_t>();

  const nn::TrainingState read = nn::read_training_state(path);
  CHECK(read.epoch == 4);
  CHECK(read.step == 3);
  CHECK(read.loader_epoch == saved.loader_epoch);
  CHECK(read.loader_batches == saved.loader_batches);
  REQUIRE(read.extra.find("note"));
  CHECK(read.extra.find("note")->as_string() == "kept");
  // Nothing restored: the default generator moves on from where it was, the model is untouched.
  CHECK(randint(0, 1 << 30, {1}, TensorOptions(kInt64)).item<int64_t>() != seed_state_probe);
  CHECK(run.model->parameters()[0].to_vector<double>() == weights);

  save_safetensors(path, run.model->state_dict());
  REQUIRE_THROWS_WITH(nn::read_training_state(path), Catch::Contains("not an Ember training checkpoint"));
}

TEST_CASE("the kernel decisions in force are saved, and adopted by load_checkpoint only", "[checkpoint]") {
  namespace ks = kernel_select;
  const ks::Mode saved_mode = ks::mode();
  ks::set_mode(ks::Mode::Benchmark);
  ks::reset();
  int trials = 0;
  auto count_trials = [&](int) { ++trials; };
  // "b" is in force for the key, as a benchmark trial could have decided.
  ks::adopt({{"checkpoint_test key", "b"}});
  REQUIRE(ks::choose("checkpoint_test key", {"a", "b"}, 0, count_trials) == 1);
  Run run(1);
  run.train(2);
  const std::string path = temp_path("kernels.safetensors");
  nn::save_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get(), run.state());

  // A new process (reset): reading the state adopts nothing; loading the checkpoint adopts "b".
  ks::reset();
  const nn::TrainingState read = nn::read_training_state(path);
  CHECK(read.kernels.at("checkpoint_test key") == "b");
  CHECK(ks::in_force().empty());
  const nn::TrainingState loaded = nn::load_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get());
  CHECK(loaded.kernels == read.kernels);
  CHECK(ks::choose("checkpoint_test key", {"a", "b"}, 0, count_trials) == 1);
  CHECK(trials == 0);

  // A file written before kernel decisions were saved (no "kernels" field) loads, adopting nothing;
  // a malformed field raises naming it.
  SafetensorsFile file = load_safetensors(path);
  json::Value meta = json::parse(file.metadata.at("ember.checkpoint"), "test");
  std::vector<std::pair<std::string, json::Value>> older;
  for (const auto& member : meta.members())
    if (member.first != "kernels") older.push_back(member);
  REQUIRE(older.size() + 1 == meta.members().size());
  save_safetensors(path, file.tensors, {{"ember.checkpoint", json::Value::object(older).dump()}});
  ks::reset();
  CHECK(nn::load_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get()).kernels.empty());
  ks::choose("checkpoint_test key", {"a", "b"}, 0, count_trials);
  CHECK(trials == 6);  // measured
  meta.set("kernels", json::Value::object({{"checkpoint_test key", json::Value::integer(1)}}));
  save_safetensors(path, file.tensors, {{"ember.checkpoint", meta.dump()}});
  CHECK_THROWS_WITH(nn::load_checkpoint(path, *run.model, run.optimizer.get(), run.schedule.get()),
                    Catch::Contains("kernels.safetensors") && Catch::Contains("checkpoint_test key") &&
                        Catch::Contains("not a string"));
  ks::reset();
  ks::set_mode(saved_mode);
}

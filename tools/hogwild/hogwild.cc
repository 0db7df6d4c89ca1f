// The training loop, evaluation and settings of tools/hogwild. Nothing here knows about processes:
// a worker runs train() on a model whose parameters happen to live in shared memory.
#include "tools/hogwild/hogwild.h"

#include <algorithm>
#include <cstdio>

#include "autograd/functional.h"
#include "core/ember_core.h"
#include "models/zoo.h"
#include "nn/optim/optim.h"

namespace ember::hogwild {

namespace {

// Doubles as text that parses back to the same value.
std::string exact(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

}  // namespace

void Settings::store(multiprocessing::Shared& shared) const {
  shared.set("model", model)
      .set("examples", std::to_string(examples))
      .set("batch_size", std::to_string(batch_size))
      .set("lr", exact(lr))
      .set("momentum", exact(momentum))
      .set("seed", std::to_string(seed));
}

Settings Settings::load(const multiprocessing::Shared& shared) {
  Settings s;
  s.model = shared.get("model");
  s.examples = std::stoll(shared.get("examples"));
  s.batch_size = std::stoll(shared.get("batch_size"));
  s.lr = std::stod(shared.get("lr"));
  s.momentum = std::stod(shared.get("momentum"));
  s.seed = std::stoull(shared.get("seed"));
  return s;
}

int64_t worker_examples(int64_t examples, int rank, int n) { return examples / n + (rank < examples % n ? 1 : 0); }

std::shared_ptr<nn::Module> make_model(const std::string& name) {
  EMBER_CHECK(name == "mlp" || name == "lenet", "hogwild: --model: expected mlp or lenet, got '", name, "'");
  return models::make_model(name, /*in_channels=*/1, /*image_size=*/28, /*num_classes=*/10);
}

data::TransformPtr normalize() {
  return std::make_shared<data::Compose>(data::ToFloat(),
                                         data::Normalize({data::kFashionMnistMean}, {data::kFashionMnistStd}));
}

void train(nn::Module& model, const data::DatasetPtr& train_set, int64_t examples, const Settings& settings,
           uint64_t seed) {
  optim::SGD sgd(model.parameters(), optim::SGDOptions(settings.lr).momentum(settings.momentum));
  // Annealed to 0 over the budget: at a constant lr the final weights, and so the test accuracy,
  // swing by a point or two with the last few batches, which would hide what the workers change.
  const int64_t steps = (examples + settings.batch_size - 1) / settings.batch_size;
  optim::CosineAnnealingLR schedule(sgd, std::max<int64_t>(steps, 1));
  data::DataLoader loader(train_set,
                          data::DataLoaderOptions(settings.batch_size).shuffle(true).seed(seed).transform(normalize()));
  model.train();
  int64_t seen = 0;
  for (int64_t epoch = 0; seen < examples; ++epoch) {
    loader.set_epoch(epoch);
    for (data::Batch& batch : loader) {
      const int64_t take = std::min(batch.size(), examples - seen);
      Tensor images = batch.data.narrow(0, 0, take), labels = batch.target.narrow(0, 0, take);
      sgd.zero_grad();
      cross_entropy(model.forward(images), labels).backward();
      sgd.step();
      schedule.step();
      seen += take;
      if (seen == examples) break;
    }
  }
}

double evaluate(nn::Module& model, const data::DatasetPtr& test_set) {
  model.eval();
  NoGradGuard no_grad;
  data::DataLoader loader(test_set, data::DataLoaderOptions(1000).transform(normalize()));
  int64_t correct = 0;
  for (data::Batch& batch : loader) {
    correct += (model.forward(batch.data).argmax(1) == batch.target).to(kInt64).sum().item<int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(test_set->size());
}

}  // namespace ember::hogwild

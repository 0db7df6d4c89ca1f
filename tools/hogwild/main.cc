// `hogwild`: Hogwild! training on Fashion-MNIST (issue 20). --workers N processes train one model in
// shared memory without locks, each running the ordinary training loop (hogwild::train) on its share
// of --examples; --workers 1 runs the same worker function in this process, the single-process
// baseline. The parent then evaluates the shared model on the 10,000 test images and prints one
// summary line. Bad flags: a message and exit status 2.
#include <chrono>
#include <cstdio>
#include <exception>

#include "core/ember_core.h"
#include "parallel/multiprocessing/multiprocessing.h"
#include "tools/hogwild/hogwild.h"
#include "tools/train/flags.h"

namespace mp = ember::multiprocessing;
using namespace ember;

// One worker: its own model pointed at the shared parameters, its own optimizer (inside train) and
// its own data order (seed + rank). The training images come from the parent's shared memory, so N
// workers neither read nor hold N copies of them.
void train_worker(int rank, int n, mp::Shared& shared) {
  const hogwild::Settings settings = hogwild::Settings::load(shared);
  std::shared_ptr<nn::Module> model = hogwild::make_model(settings.model);
  shared.attach("model", *model);
  auto train_set = std::make_shared<data::TensorDataset>(shared.tensor("train.images"), shared.tensor("train.labels"));
  hogwild::train(*model, train_set, hogwild::worker_examples(settings.examples, rank, n), settings,
                 settings.seed + static_cast<uint64_t>(rank));
}
EMBER_SPAWN_ENTRY(train_worker);

namespace {

train::Flags make_flags() {
  train::Flags flags("hogwild",
                     "Hogwild! training on Fashion-MNIST: worker processes update one shared model "
                     "without locks.");
  const hogwild::Settings d;
  flags.add_int("workers", 2, "worker processes; 1 trains in this process, without spawning", 1);
  flags.add_int("examples", d.examples, "training examples seen in all, split evenly over the workers", 1);
  flags.add_int("batch-size", d.batch_size, "examples per step of each worker", 1);
  flags.add_double("lr", d.lr, "SGD learning rate");
  flags.add_double("momentum", d.momentum, "SGD momentum (each worker keeps its own buffer)");
  flags.add_string("model", d.model, "the network", {"mlp", "lenet"});
  flags.add_int("seed", static_cast<long long>(d.seed), "seeds the initial weights; worker r shuffles with seed + r");
  flags.add_string("data-dir", data::kFashionMnistDir, "Fashion-MNIST's IDX files");
  return flags;
}

}  // namespace

int main(int argc, char** argv) {
  // A spawned worker runs train_worker here and exits; nothing below runs in it.
  mp::worker_guard();

  train::Flags flags = make_flags();
  hogwild::Settings settings;
  int workers = 1;
  std::string data_dir;
  try {
    if (!flags.parse(argc, argv)) {
      std::printf("%s", flags.help_text().c_str());
      return 0;
    }
    workers = static_cast<int>(flags.get_int("workers"));
    settings.examples = flags.get_int("examples");
    settings.batch_size = flags.get_int("batch-size");
    settings.lr = flags.get_double("lr");
    settings.momentum = flags.get_double("momentum");
    settings.model = flags.get_string("model");
    settings.seed = static_cast<uint64_t>(flags.get_int("seed"));
    data_dir = flags.get_string("data-dir");
    // Each worker is a process with its own copy of the program and its own descriptors.
    if (flags.get_int("workers") > 1024)
      throw train::FlagError("--workers: expected at most 1024, got " + std::to_string(flags.get_int("workers")));
    if (settings.examples < workers)
      throw train::FlagError("--examples: expected at least one per worker (" + std::to_string(workers) + "), got " +
                             std::to_string(settings.examples));
  } catch (const train::FlagError& e) {
    std::fprintf(stderr, "hogwild: %s\n", e.what());
    return 2;
  }

  try {
    data::FashionMNIST train_set(data_dir, /*train=*/true);
    auto test_set = std::make_shared<data::FashionMNIST>(data_dir, /*train=*/false);
    manual_seed(settings.seed);
    std::shared_ptr<nn::Module> model = hogwild::make_model(settings.model);

    // The only steps the processes add: the model and the images move to shared memory, and the
    // workers find them, with the settings, in `shared`. One worker gets the same `shared`.
    model->share_memory();
    train_set.images().share_memory_();
    train_set.targets().share_memory_();
    mp::Shared shared;
    shared.add("model", *model).add("train.images", train_set.images()).add("train.labels", train_set.targets());
    settings.store(shared);

    const auto start = std::chrono::steady_clock::now();
    if (workers == 1) {
      train_worker(0, 1, shared);
    } else {
      mp::spawn(workers, train_worker, shared);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    const double accuracy = hogwild::evaluate(*model, test_set);
    std::printf("hogwild: workers=%d examples=%lld test_accuracy=%.4f train_seconds=%.1f\n", workers,
                static_cast<long long>(settings.examples), accuracy, seconds);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hogwild: error: %s\n", e.what());
    return 1;
  }
}

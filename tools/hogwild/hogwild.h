// Hogwild! (Recht et al., 2011) on Fashion-MNIST: the pieces of tools/hogwild. The training loop is
// the ordinary single-process one; several processes run it at once on one model in shared memory
// (Module::share_memory), each with its own optimizer and data order, updating without locks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/data.h"
#include "nn/module.h"
#include "parallel/multiprocessing/shared.h"

namespace ember::hogwild {

// What every worker needs besides the shared tensors. A worker is a re-executed program without the
// parent's variables, so these travel as Shared's strings (store, load).
struct Settings {
  std::string model = "mlp";
  int64_t examples = 60000;  // in all, over every worker
  int64_t batch_size = 64;
  double lr = 0.05;
  double momentum = 0.5;
  uint64_t seed = 1;

  void store(multiprocessing::Shared& shared) const;
  static Settings load(const multiprocessing::Shared& shared);
};

// Worker `rank` of `n` trains on examples / n of them; the first examples % n workers take one more.
int64_t worker_examples(int64_t examples, int rank, int n);

// A zoo model ("mlp" or "lenet") for 1x28x28 images of 10 classes.
std::shared_ptr<nn::Module> make_model(const std::string& name);

// uint8 images to float32, normalised by Fashion-MNIST's mean and standard deviation.
data::TransformPtr normalize();

// The single-process loop: SGD over `examples` examples of `train_set` in batches of
// settings.batch_size, reshuffled (by `seed`) at each pass over the set, the learning rate
// annealed from settings.lr to 0 (cosine); the last batch is cut to the budget.
void train(nn::Module& model, const data::DatasetPtr& train_set, int64_t examples, const Settings& settings,
           uint64_t seed);

// The fraction of `test_set` that `model` classifies right.
double evaluate(nn::Module& model, const data::DatasetPtr& test_set);

}  // namespace ember::hogwild

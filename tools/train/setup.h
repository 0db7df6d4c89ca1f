// Building the pieces of a training run from its configuration: datasets with their
// normalisation and augmentation, the optimizer with decay/no-decay parameter groups, the LR
// schedule.
#pragma once

#include <memory>
#include <vector>

#include "data/data.h"
#include "nn/module.h"
#include "nn/optim/optim.h"
#include "tools/train/config.h"

namespace ember::train {

struct DataSetup {
  data::DatasetPtr train, test;  // test is null for an image folder without --val-dir: no evaluation
  int64_t channels = 1, image_size = 28, classes = 10;
  data::TransformPtr train_transform, test_transform, test_flip_transform;
  std::string description;
};

DataSetup make_data(const TrainConfig& config);
// Weights (dim > 1) decay; biases and normalisation parameters do not.
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, const nn::Module& model);
std::unique_ptr<optim::LRScheduler> make_schedule(const TrainConfig& config, optim::Optimizer& optimizer,
                                                  int64_t total_steps);

}  // namespace ember::train

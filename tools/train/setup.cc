// Dataset statistics are the usual published per-channel means and standard deviations.
#include "tools/train/setup.h"

namespace ember::train {

DataSetup make_data(const TrainConfig& c) {
  DataSetup s;
  std::vector<float> mean, std;
  if (c.data == "fashion-mnist") {
    std::string root = c.data_dir.empty() ? data::kFashionMnistDir : c.data_dir;
    s.train = std::make_shared<data::FashionMNIST>(root, true);
    s.test = std::make_shared<data::FashionMNIST>(root, false);
    s.channels = 1;
    s.image_size = 28;
    s.classes = 10;
    mean = {data::kFashionMnistMean};
    std = {data::kFashionMnistStd};
    s.description = "Fashion-MNIST from " + root;
  } else if (c.data == "cifar10" || c.data == "cifar100") {
    if (c.data == "cifar10") {
      s.train = std::make_shared<data::CIFAR10>(c.data_dir, true);
      s.test = std::make_shared<data::CIFAR10>(c.data_dir, false);
      s.classes = 10;
      mean = {0.4914f, 0.4822f, 0.4465f};
      std = {0.2470f, 0.2435f, 0.2616f};
    } else {
      s.train = std::make_shared<data::CIFAR100>(c.data_dir, true);
      s.test = std::make_shared<data::CIFAR100>(c.data_dir, false);
      s.classes = 100;
      mean = {0.5071f, 0.4865f, 0.4409f};
      std = {0.2673f, 0.2564f, 0.2762f};
    }
    s.channels = 3;
    s.image_size = 32;
    s.description = c.data + " from " + c.data_dir;
  } else {
    s.channels = 3;
    s.image_size = 32;
    s.classes = 10;
    s.train = std::make_shared<data::SyntheticDataset>(c.synthetic_size, Shape{3, 32, 32}, 10, c.seed + 1);
    s.test = std::make_shared<data::SyntheticDataset>(std::max<int64_t>(c.synthetic_size / 5, 1), Shape{3, 32, 32}, 10,
                                                      c.seed + 2);
    mean = {0.5f, 0.5f, 0.5f};
    std = {0.29f, 0.29f, 0.29f};
    s.description = "synthetic 3x32x32, 10 classes";
  }
  std::vector<data::TransformPtr> train_steps;
  if (c.augment) {
    train_steps.push_back(std::make_shared<data::RandomCrop>(s.image_size, s.image_size >= 32 ? 4 : 2));
    train_steps.push_back(std::make_shared<data::RandomHorizontalFlip>());
  }
  if (c.cutout > 0) train_steps.push_back(std::make_shared<data::Cutout>(c.cutout));
  train_steps.push_back(std::make_shared<data::ToFloat>());
  train_steps.push_back(std::make_shared<data::Normalize>(mean, std));
  s.train_transform = std::make_shared<data::Compose>(train_steps);
  s.test_transform = std::make_shared<data::Compose>(data::ToFloat(), data::Normalize(mean, std));
  s.test_flip_transform =
      std::make_shared<data::Compose>(data::RandomHorizontalFlip(1.0), data::ToFloat(), data::Normalize(mean, std));
  return s;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model) {
  std::vector<Tensor> decay, no_decay;
  for (auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() > 1 ? decay : no_decay).push_back(p);
  }
  if (c.optimizer == "adamw") {
    optim::AdamWOptions options(c.lr);
    options.betas({c.momentum, 0.999}).weight_decay(c.weight_decay);
    optim::AdamWOptions without = options;
    without.weight_decay(0.0);
    return std::make_unique<optim::AdamW>(
        std::vector<optim::ParamGroup>{optim::ParamGroup(decay, options), optim::ParamGroup(no_decay, without)},
        options);
  }
  optim::SGDOptions options(c.lr);
  options.momentum(c.momentum).nesterov(c.momentum > 0).weight_decay(c.weight_decay);
  optim::SGDOptions without = options;
  without.weight_decay(0.0);
  return std::make_unique<optim::SGD>(
      std::vector<optim::ParamGroup>{optim::ParamGroup(decay, options), optim::ParamGroup(no_decay, without)}, options);
}

std::unique_ptr<optim::LRScheduler> make_schedule(const TrainConfig& c, optim::Optimizer& optimizer,
                                                  int64_t total_steps) {
  total_steps = std::max<int64_t>(total_steps, 2);
  if (c.schedule == "onecycle") {
    // With pct_start 0.25 the warm-up phase ends at step 0.25 * total - 1, which must be past 0.
    total_steps = std::max<int64_t>(total_steps, 5);
    optim::OneCycleLROptions options;
    options.pct_start(0.25).div_factor(10.0).final_div_factor(100.0).cycle_momentum(c.optimizer == "sgd");
    return std::make_unique<optim::OneCycleLR>(optimizer, c.lr, total_steps, options);
  }
  if (c.schedule == "cosine") return std::make_unique<optim::CosineAnnealingLR>(optimizer, total_steps, 0.0);
  return std::make_unique<optim::MultiStepLR>(optimizer, std::vector<int64_t>{total_steps / 2, total_steps * 3 / 4},
                                              0.1);
}

}  // namespace ember::train

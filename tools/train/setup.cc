// Dataset statistics are the usual published per-channel means and standard deviations. An image
// folder's crops (--image-crop) come first in its transforms: they decode the files.
#include "tools/train/setup.h"

#include <cmath>

#include "core/error.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"

namespace ember::train {

namespace {

// "1 class", "3 classes".
std::string count(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : word.back() == 's' ? "es" : "s");
}

// Class indices are positions in the sorted folder names, so a model trained on one tree scores
// garbage on another whose folders differ, with no error: refuse it, naming the first difference.
void check_same_classes(const data::ImageFolder& train, const data::ImageFolder& val) {
  const std::vector<std::string>& a = train.classes();
  const std::vector<std::string>& b = val.classes();
  if (a == b) return;
  std::string difference;
  for (size_t i = 0; i < std::max(a.size(), b.size()) && difference.empty(); ++i) {
    if (i < a.size() && i < b.size() && a[i] == b[i]) continue;
    // Both lists are sorted: the smaller of the first two names that differ is missing from the other.
    difference = i >= b.size()   ? "'" + a[i] + "' is in --data-dir only"
                 : i >= a.size() ? "'" + b[i] + "' is in --val-dir only"
                 : a[i] < b[i]   ? "'" + a[i] + "' is in --data-dir only"
                                 : "'" + b[i] + "' is in --val-dir only";
  }
  throw Error("--data imagefolder: the class folders of --data-dir " + train.root() + " (" + count(a.size(), "class") +
              ") and --val-dir " + val.root() + " (" + count(b.size(), "class") + ") differ: " + difference +
              "; class indices are positions in the sorted folder names, so both trees "
              "need the same folders");
}

// The ImageFolder branch of make_data: the datasets, and the crops of --image-crop (the ToFloat
// and Normalize steps are added by the caller).
void make_image_folder(const TrainConfig& c, DataSetup& s, std::vector<data::TransformPtr>& train_steps,
                       std::vector<data::TransformPtr>& eval_steps) {
  const auto options = data::ImageFolderOptions().channels(static_cast<int>(c.image_channels));
  auto train = std::make_shared<const data::ImageFolder>(c.data_dir, options);
  s.train = train;
  std::shared_ptr<const data::ImageFolder> val;
  if (!c.val_dir.empty()) {
    val = std::make_shared<const data::ImageFolder>(c.val_dir, options);
    check_same_classes(*train, *val);
    s.test = val;
  }
  s.channels = c.image_channels;
  s.image_size = c.image_size;
  s.classes = static_cast<int64_t>(train->classes().size());
  const int64_t size = c.image_size;
  std::string train_crop, eval_crop;
  if (c.image_crop == "resized") {
    // torchvision's ImageNet evaluation: the shorter side to 256 for 224, then the centre 224.
    const auto resized = static_cast<int64_t>(std::lround(static_cast<double>(size) * 256.0 / 224.0));
    eval_steps = {std::make_shared<data::Resize>(resized), std::make_shared<data::CenterCrop>(size)};
    eval_crop = "Resize " + std::to_string(resized) + " + CenterCrop " + std::to_string(size);
    if (c.augment) {
      train_steps = {std::make_shared<data::RandomResizedCrop>(size), std::make_shared<data::RandomHorizontalFlip>()};
      train_crop = "RandomResizedCrop " + std::to_string(size) + " + flip";
    }
  } else {
    eval_steps = {std::make_shared<data::Resize>(size), std::make_shared<data::CenterCrop>(size)};
    eval_crop = "Resize " + std::to_string(size) + " + CenterCrop " + std::to_string(size);
    if (c.augment) {
      const int64_t padding = size >= 32 ? 4 : 2;
      train_steps = eval_steps;
      train_steps.push_back(std::make_shared<data::RandomCrop>(size, padding));
      train_steps.push_back(std::make_shared<data::RandomHorizontalFlip>());
      train_crop =
          eval_crop + " + RandomCrop " + std::to_string(size) + " padding " + std::to_string(padding) + " + flip";
    }
  }
  if (!c.augment) {
    train_steps = eval_steps;
    train_crop = eval_crop;
  }
  s.description =
      "ImageFolder " + c.data_dir + " (" + count(static_cast<size_t>(train->size()), "image") + ", " +
      count(train->classes().size(), "class") + ", " + (c.image_channels == 1 ? "grayscale" : "RGB") +
      "; training on " + train_crop + "; " +
      (val ? "evaluation on " + c.val_dir + ", " + count(static_cast<size_t>(val->size()), "image") + ", " + eval_crop
           : std::string("no evaluation: no --val-dir")) +
      ")";
}

}  // namespace

DataSetup make_data(const TrainConfig& c) {
  DataSetup s;
  std::vector<float> mean, std;
  // Resizing and cropping before ToFloat, for an image folder: the crops decode the files.
  std::vector<data::TransformPtr> train_steps, eval_steps;
  if (c.data == "imagefolder") {
    make_image_folder(c, s, train_steps, eval_steps);
    mean = c.image_mean;
    std = c.image_std;
  } else if (c.data == "fashion-mnist") {
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
  if (c.augment && c.data != "imagefolder") {
    train_steps.push_back(std::make_shared<data::RandomCrop>(s.image_size, s.image_size >= 32 ? 4 : 2));
    train_steps.push_back(std::make_shared<data::RandomHorizontalFlip>());
  }
  if (c.cutout > 0) train_steps.push_back(std::make_shared<data::Cutout>(c.cutout));
  train_steps.push_back(std::make_shared<data::ToFloat>());
  train_steps.push_back(std::make_shared<data::Normalize>(mean, std));
  s.train_transform = std::make_shared<data::Compose>(train_steps);
  std::vector<data::TransformPtr> flip_steps = eval_steps;
  flip_steps.push_back(std::make_shared<data::RandomHorizontalFlip>(1.0));
  for (std::vector<data::TransformPtr>* steps : {&eval_steps, &flip_steps}) {
    steps->push_back(std::make_shared<data::ToFloat>());
    steps->push_back(std::make_shared<data::Normalize>(mean, std));
  }
  s.test_transform = std::make_shared<data::Compose>(eval_steps);
  s.test_flip_transform = std::make_shared<data::Compose>(flip_steps);
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

// Models by name, for the train tool and benchmarks: "resnet20", "resnet32", "resnet44",
// "resnet56", "resnet110" (option A; "-b" suffix for option B), "resnet18", "resnet34" (CIFAR stem;
// "-imagenet" suffix for the ImageNet stem), "resnet50" (ImageNet stem), "resnet9", "mlp", "lenet".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::models {

// Inputs are [N, in_channels, image_height, image_width]; the ResNets take any size, MLP and LeNet
// only the size they were built for.
std::shared_ptr<nn::Module> make_model(const std::string& name, int64_t in_channels, int64_t image_height,
                                       int64_t image_width, int64_t num_classes);
// Square images of image_size x image_size.
std::shared_ptr<nn::Module> make_model(const std::string& name, int64_t in_channels, int64_t image_size,
                                       int64_t num_classes);
std::vector<std::string> model_names();

}  // namespace ember::models

// MNIST-style datasets read from IDX files (gzip'd or plain), held in memory: images uint8
// [N, 1, H, W], labels int64 [N]. FashionMNIST defaults to the Debian package's directory.
//
//   ember::data::FashionMNIST train;                                   // 60,000 examples
//   ember::data::FashionMNIST test(ember::data::kFashionMnistDir, /*train=*/false);
//   ember::data::Example e = train.get(0);                             // [1, 28, 28] uint8, label 9
#pragma once

#include <string>

#include "data/dataset.h"

namespace ember::data {

// Where the Debian package dataset-fashion-mnist (installed by tools/setup) puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// The training images' mean and standard deviation (of pixels scaled to [0, 1]), for Normalize.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Reads {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte from `root`, each
// plain or with a .gz suffix (the plain file wins when both exist).
class MNIST : public Dataset {
 public:
  explicit MNIST(const std::string& root, bool train = true) : MNIST("MNIST", root, train) {}
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  const Tensor& images() const { return images_; }    // uint8 [N, 1, H, W]
  const Tensor& targets() const { return targets_; }  // int64 [N]

 protected:
  // `name` only labels error messages ("FashionMNIST: ...").
  MNIST(const char* name, const std::string& root, bool train);

 private:
  Tensor images_;
  Tensor targets_;
};

class FashionMNIST : public MNIST {
 public:
  explicit FashionMNIST(const std::string& root = kFashionMnistDir, bool train = true)
      : MNIST("FashionMNIST", root, train) {}
};

// The class names of Fashion-MNIST, by label.
const char* fashion_mnist_class_name(int64_t label);

}  // namespace ember::data

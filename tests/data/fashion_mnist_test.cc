// The real Fashion-MNIST files of the Debian package dataset-fashion-mnist (installed by
// tools/setup): sizes, labels, and one DataLoader epoch over them. Missing files fail these tests
// with the install hint; they are never skipped.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>

#include "core/ember_core.h"
#include "data/data_loader.h"
#include "data/mnist.h"
#include "data/transforms.h"

using namespace ember;
using namespace ember::data;

TEST_CASE("Fashion-MNIST from /usr/share/datasets/fashion-mnist", "[fashion_mnist][real_data]") {
  struct stat st;
  std::string probe = std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz";
  INFO("Fashion-MNIST is missing: run tools/setup (it installs the Debian package dataset-fashion-mnist into "
       << kFashionMnistDir << ")");
  REQUIRE(::stat(probe.c_str(), &st) == 0);

  FashionMNIST train;  // the default directory
  FashionMNIST test(kFashionMnistDir, /*train=*/false);
  REQUIRE(train.size() == 60000);
  REQUIRE(test.size() == 10000);
  CHECK(train.images().sizes() == Shape{60000, 1, 28, 28});
  CHECK(test.images().sizes() == Shape{10000, 1, 28, 28});

  for (const MNIST* split : {static_cast<const MNIST*>(&train), static_cast<const MNIST*>(&test)}) {
    std::vector<int64_t> labels = split->targets().to_vector<int64_t>();
    CHECK(*std::min_element(labels.begin(), labels.end()) == 0);
    CHECK(*std::max_element(labels.begin(), labels.end()) == 9);
    std::vector<int64_t> per_class(10, 0);
    for (int64_t y : labels) ++per_class[static_cast<size_t>(y)];
    for (int64_t count : per_class) CHECK(count == split->size() / 10);  // Fashion-MNIST is balanced
  }

  std::vector<int64_t> first = train.targets().slice(0, 0, 10).to_vector<int64_t>();
  CHECK(first == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  CHECK(std::string(fashion_mnist_class_name(first[0])) == "Ankle boot");

  // Pixels span the whole byte range; an all-zero or constant image would mean a bad decode.
  std::vector<uint8_t> pixels = train.get(0).data.to_vector<uint8_t>();
  CHECK(*std::max_element(pixels.begin(), pixels.end()) == 255);
  CHECK(*std::min_element(pixels.begin(), pixels.end()) == 0);
}

TEST_CASE("A DataLoader epoch over the real Fashion-MNIST training set", "[fashion_mnist][real_data][loader]") {
  auto train = std::make_shared<FashionMNIST>();
  auto transform = std::make_shared<Compose>(RandomCrop(28, 2), ToFloat(), Normalize({0.286f}, {0.353f}));
  DataLoader loader(train, DataLoaderOptions(128).shuffle(true).seed(7).workers(1).transform(transform));
  REQUIRE(loader.size() == 469);  // 468 full batches of 128 and one of 96
  int64_t examples = 0, label_sum = 0, batches = 0;
  for (Batch& batch : loader) {
    REQUIRE(batch.data.sizes() == Shape{batch.size(), 1, 28, 28});
    REQUIRE(batch.data.dtype() == kFloat32);
    REQUIRE(batch.size() == (++batches == 469 ? 96 : 128));
    examples += batch.size();
    label_sum += batch.target.sum().item<int64_t>();
  }
  CHECK(examples == 60000);
  CHECK(label_sum == 6000 * 45);  // each of the 10 classes 6,000 times
}

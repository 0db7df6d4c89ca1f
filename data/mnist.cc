// MNIST / FashionMNIST: locating the four IDX files and checking that images and labels agree.
#include "data/mnist.h"

#include <sys/stat.h>

#include "core/error.h"
#include "data/idx.h"

namespace ember::data {

namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string find_idx_file(const char* name, const std::string& root, const std::string& base) {
  std::string plain = root + "/" + base;
  if (file_exists(plain)) return plain;
  std::string gz = plain + ".gz";
  EMBER_CHECK(file_exists(gz), name, ": missing file: neither '", gz, "' nor '", plain,
              "' exists (Fashion-MNIST comes with the Debian package dataset-fashion-mnist, which tools/setup "
              "installs)");
  return gz;
}

}  // namespace

MNIST::MNIST(const char* name, const std::string& root, bool train) {
  std::string prefix = train ? "train" : "t10k";
  std::string images_path = find_idx_file(name, root, prefix + "-images-idx3-ubyte");
  std::string labels_path = find_idx_file(name, root, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(images_path, 3);
  Tensor labels = read_idx(labels_path, 1);
  EMBER_CHECK(images.size(0) == labels.size(0), name, ": label/image count mismatch: '", images_path, "' holds ",
              images.size(0), " images but '", labels_path, "' holds ", labels.size(0), " labels");
  images_ = images.unsqueeze(1);  // [N, H, W] -> [N, 1, H, W]: one grayscale channel
  targets_ = labels.to(kInt64);
}

Example MNIST::get(int64_t index) const {
  check_index("MNIST::get", index, size());
  return {images_.select(0, index), targets_.select(0, index)};
}

const char* fashion_mnist_class_name(int64_t label) {
  static const char* const kNames[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  EMBER_CHECK(label >= 0 && label < 10, "fashion_mnist_class_name: label must be in 0..9, got ", label);
  return kNames[label];
}

}  // namespace ember::data

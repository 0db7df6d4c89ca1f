// `from_idx`: writes an IDX image dataset (Fashion-MNIST or MNIST, data/mnist.h) as an image
// folder tree of grayscale JPEG (or PNG) files, OUT/train/CLASS/NNNNN.jpg and OUT/test/CLASS/...,
// NNNNN the image's index in its IDX file. It gives the image-folder pipeline (--data imagefolder
// of tools/train) real content to be measured on, since no large photo set can be fetched here:
// the same pixels train from the IDX files and, through JPEG, from the folder.
//
// Class folders are "L_name" (Fashion-MNIST's names, "0_t_shirt_top" ...) or the digit alone:
// ImageFolder numbers classes in sorted folder order, which must be the label order.
//
// The tree appears whole or not at all (tree_writer.h): 70,000 files each written atomically, with
// its own fsync, would cost minutes on a VM disk.
//
//   from_idx --out /tmp/fmnist-jpeg                       # Debian's Fashion-MNIST, JPEG quality 95
//   from_idx --idx-dir DIR --class-names digits --format png --out /tmp/mnist-png
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "core/ember_core.h"
#include "data/image.h"
#include "data/mnist.h"
#include "tools/imagefolder/tree_writer.h"
#include "tools/train/flags.h"

using namespace ember;

namespace {

// "T-shirt/top" -> "t_shirt_top": a folder name that sorts and quotes well.
std::string folder_word(const std::string& name) {
  std::string word;
  for (char ch : name) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    if (alnum)
      word += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    else if (!word.empty() && word.back() != '_')
      word += '_';
  }
  while (!word.empty() && word.back() == '_') word.pop_back();
  return word;
}

std::string class_folder(int64_t label, const std::string& names) {
  if (names == "digits") return std::to_string(label);
  return std::to_string(label) + "_" + folder_word(data::fashion_mnist_class_name(label));
}

// How far the written files' pixels are from the IDX ones (JPEG is lossy), in 8-bit levels.
struct PixelError {
  double sum = 0;
  int64_t pixels = 0;
  int max = 0;
};

// Writes the first `limit` images of one split (0: all) under split/CLASS/; returns how many.
// Each file is decoded again to measure what the format changed.
int64_t write_split(const data::MNIST& set, imagefolder::TreeWriter& tree, const std::string& split,
                    const std::string& names, const std::string& format, int quality, int64_t limit,
                    PixelError& error) {
  const Tensor images = set.images().contiguous();  // uint8 [N, 1, H, W]
  const Tensor labels = set.targets().contiguous();
  const int64_t n = limit > 0 ? std::min(limit, images.size(0)) : images.size(0);
  const int64_t height = images.size(2), width = images.size(3);
  const uint8_t* pixels = images.data_ptr<uint8_t>();
  const int64_t* label = labels.data_ptr<int64_t>();
  const char* extension = format == "png" ? ".png" : ".jpg";
  for (int64_t i = 0; i < n; ++i) {
    EMBER_CHECK(label[i] >= 0 && label[i] < 10, "image ", i, " of the ", split, " set has label ", label[i],
                ", expected 0..9");
    const uint8_t* image = pixels + i * height * width;
    char name[32];
    std::snprintf(name, sizeof name, "/%05lld%s", static_cast<long long>(i), extension);
    const std::string path = split + "/" + class_folder(label[i], names) + name;
    const std::vector<uint8_t> bytes = format == "png" ? data::encode_png(image, width, height, 1)
                                                       : data::encode_jpeg(image, width, height, 1, quality);
    data::DecodeRequest gray;
    gray.channels = 1;
    const data::DecodedImage back = data::decode_image(bytes.data(), bytes.size(), path, gray);
    EMBER_CHECK(back.width == width && back.height == height, path, ": decoded to ", back.width, "x", back.height,
                ", written as ", width, "x", height);
    for (int64_t p = 0; p < width * height; ++p) {
      const int difference = std::abs(static_cast<int>(back.pixels[static_cast<size_t>(p)]) - image[p]);
      error.sum += difference;
      error.max = std::max(error.max, difference);
    }
    error.pixels += width * height;
    tree.write(path, bytes);
  }
  return n;
}

train::Flags make_flags() {
  train::Flags f("from_idx",
                 "Writes an IDX image dataset (Fashion-MNIST, MNIST) as an image folder tree of grayscale JPEG or PNG\n"
                 "files: OUT/train/CLASS/NNNNN.jpg and OUT/test/CLASS/NNNNN.jpg, for tools/train --data imagefolder.");
  f.add_string("idx-dir", data::kFashionMnistDir, "folder of {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]");
  f.add_string("out", "", "the tree to write (must not exist unless --force)");
  f.add_string("class-names", "fashion-mnist",
               "class folder names: 0_t_shirt_top, 1_trouser, ... (Fashion-MNIST's, label first so that sorted "
               "order is label order), or the digit alone",
               {"fashion-mnist", "digits"});
  f.add_string("format", "jpeg", "file format", {"jpeg", "png"});
  f.add_int("quality", 95, "JPEG quality (1-100)", 1);
  f.add_int("limit", 0, "write only the first N images of each split (0: all)", 0);
  f.add_bool("force", "replace OUT when it exists");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  train::Flags flags = make_flags();
  std::string out, idx_dir, names, format;
  int quality = 95;
  int64_t limit = 0;
  bool force = false;
  try {
    if (!flags.parse(argc, argv)) {
      std::printf("%s", flags.help_text().c_str());
      return 0;
    }
    out = flags.get_string("out");
    if (out.empty()) throw train::FlagError("--out: required (the folder to write)");
    force = flags.get_bool("force");
    if (!force && std::filesystem::exists(out))
      throw train::FlagError("--out " + out + ": already exists; give --force to replace it");
    idx_dir = flags.get_string("idx-dir");
    names = flags.get_string("class-names");
    format = flags.get_string("format");
    if (flags.get_int("quality") > 100)
      throw train::FlagError("--quality: expected 1 to 100, got " + std::to_string(flags.get_int("quality")));
    quality = static_cast<int>(flags.get_int("quality"));
    limit = flags.get_int("limit");
  } catch (const train::FlagError& e) {
    std::fprintf(stderr, "from_idx: %s\n", e.what());
    return 2;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    const data::MNIST train_set(idx_dir, true), test_set(idx_dir, false);
    imagefolder::TreeWriter tree(out, force);
    PixelError error;
    const int64_t train = write_split(train_set, tree, "train", names, format, quality, limit, error);
    const int64_t test = write_split(test_set, tree, "test", names, format, quality, limit, error);
    tree.commit();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string kind = format == "png" ? "PNG" : "JPEG quality " + std::to_string(quality);
    std::printf(
        "from_idx: wrote %lld training and %lld test images (%s, %.1f MB) to %s/{train,test} in %.1f s; decoded, "
        "their pixels differ from the IDX ones by %.3f levels on average (mean absolute error), %d at most\n",
        static_cast<long long>(train), static_cast<long long>(test), kind.c_str(),
        static_cast<double>(tree.bytes()) / 1e6, out.c_str(), seconds,
        error.pixels > 0 ? error.sum / static_cast<double>(error.pixels) : 0.0, error.max);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "from_idx: error: %s\n", e.what());
    return 1;
  }
}

// ImageFolder: torchvision's dataset of image files, one folder per class (root/CLASS/*.jpg,
// .jpeg, .png, any case), classes sorted by name so that class indices agree with torchvision's.
// get() reads the file but does not decode it: the example carries the encoded bytes
// (Example::encoded) and the loader's transform decodes only what it keeps (RandomResizedCrop
// decodes its box, at a reduced DCT scale where that still covers the output). Without a
// transform the loader decodes whole images to [C, H, W] uint8.
//
//   auto train = std::make_shared<ember::data::ImageFolder>("/data/imagenet/train");
//   auto augment = std::make_shared<ember::data::Compose>(
//       ember::data::RandomResizedCrop(224), ember::data::RandomHorizontalFlip(), ember::data::ToFloat(),
//       ember::data::Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}));
//   ember::data::DataLoader loader(train, ember::data::DataLoaderOptions(256).shuffle(true).workers(8)
//                                             .transform(augment).channels_last(true));
//
// Bad files: a file that fails to read or decode raises an ember::Error naming it; with
// skip_bad(true) it is counted (bad_files()), named once on stderr, and the next index's image
// (then the one after, ...) takes its place, so the epoch's batches keep their size.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"

namespace ember::data {

class ImageFolderOptions {
 public:
  // 3 decodes to RGB, 1 to grayscale.
  ImageFolderOptions& channels(int value) {
    channels_ = value;
    return *this;
  }
  // A text file listing the images instead of scanning the tree (for millions of files): one path
  // per line, relative to the root, CLASS/NAME; the classes are the first components, sorted.
  ImageFolderOptions& list_file(std::string value) {
    list_file_ = std::move(value);
    return *this;
  }
  // Files without an image extension in a class folder: skipped and counted (the default, one
  // line on stderr), or refused with an error naming the first.
  ImageFolderOptions& refuse_non_images(bool value) {
    refuse_non_images_ = value;
    return *this;
  }
  // Unreadable or undecodable images are skipped and counted instead of raising.
  ImageFolderOptions& skip_bad(bool value) {
    skip_bad_ = value;
    return *this;
  }
  // Images of more pixels are refused as decompression bombs (default: PIL's limit).
  ImageFolderOptions& max_pixels(int64_t value) {
    max_pixels_ = value;
    return *this;
  }

  int channels() const { return channels_; }
  const std::string& list_file() const { return list_file_; }
  bool refuse_non_images() const { return refuse_non_images_; }
  bool skip_bad() const { return skip_bad_; }
  int64_t max_pixels() const { return max_pixels_; }

 private:
  int channels_ = 3;
  std::string list_file_;
  bool refuse_non_images_ = false;
  bool skip_bad_ = false;
  int64_t max_pixels_ = DecodeLimits().max_pixels;
};

// Where skipped bad files are counted: shared by an ImageFolder and the examples it hands out,
// since the loader finds most faults while decoding.
class BadImageLog {
 public:
  // Counts the file (once per path) and names it on stderr the first time.
  void record(const std::string& path, const std::string& fault);
  int64_t count() const;

 private:
  mutable std::mutex mutex_;
  std::set<std::string> paths_;
};

class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(std::string root, ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  // {data: undefined, target: the class index (int64 scalar), encoded: the file's bytes}.
  Example get(int64_t index) const override;
  // The whole image decoded, [C, H, W] uint8.
  Tensor load(int64_t index) const;

  const std::string& root() const { return root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }
  // The file's path (root/CLASS/NAME), the same relative to the root, and its class index.
  std::string path(int64_t index) const;
  const std::string& path_relative(int64_t index) const;
  int64_t target(int64_t index) const;
  const ImageFolderOptions& options() const { return options_; }
  // Files in class folders without an image extension, left out by the scan.
  int64_t non_images() const { return non_images_; }
  // Bad images skipped so far (skip_bad(true) only).
  int64_t bad_files() const { return bad_->count(); }

 private:
  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<std::string> files_;  // root-relative, class folders sorted, names sorted within
  std::vector<int64_t> targets_;
  int64_t non_images_ = 0;
  std::shared_ptr<BadImageLog> bad_;
};

}  // namespace ember::data

// ImageFolder's scan (or list file) and its examples. The order of files follows torchvision's
// make_dataset: classes sorted, and within a class os.walk's directories sorted, then names sorted.
#include "data/image_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "core/factory.h"
#include "data/transform.h"

namespace ember::data {

namespace fs = std::filesystem;

void BadImageLog::record(const std::string& path, const std::string& fault) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (paths_.insert(path).second) std::cerr << "ImageFolder: skipping a bad image: " << fault << "\n";
}

int64_t BadImageLog::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(paths_.size());
}

namespace {

bool has_image_extension(const std::string& name) {
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

// The files under one class folder, root-relative, in torchvision's order: directories sorted
// (os.walk's paths compared as strings), names sorted within each.
std::vector<std::pair<std::string, std::string>> walk_class(const fs::path& root, const std::string& cls) {
  std::vector<std::pair<std::string, std::string>> files;  // (directory, name)
  std::error_code error;
  fs::recursive_directory_iterator it(root / cls, fs::directory_options::follow_directory_symlink, error);
  EMBER_CHECK(!error, "ImageFolder: cannot read the class folder '", (root / cls).string(), "': ", error.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
    EMBER_CHECK(!error, "ImageFolder: cannot read under '", (root / cls).string(), "': ", error.message());
    if (it->is_directory(error)) continue;
    fs::path rel = fs::relative(it->path(), root, error);
    files.emplace_back((root / rel.parent_path()).string(), rel.filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options)
    : root_(std::move(root)), options_(std::move(options)), bad_(std::make_shared<BadImageLog>()) {
  EMBER_CHECK(options_.channels() == 1 || options_.channels() == 3,
              "ImageFolder: channels must be 1 (grayscale) or 3 (RGB), got ", options_.channels());
  EMBER_CHECK(options_.max_pixels() > 0, "ImageFolder: max_pixels must be > 0, got ", options_.max_pixels());
  std::error_code error;
  EMBER_CHECK(fs::is_directory(root_, error), "ImageFolder: the root '", root_,
              "' is not a directory (expected root/CLASS/IMAGE files)");
  std::string first_non_image;
  auto add = [&](const std::string& rel, const std::string& cls) {
    if (!has_image_extension(rel)) {
      EMBER_CHECK(!options_.refuse_non_images(), "ImageFolder: '", root_, "/", rel,
                  "' is not a .jpg, .jpeg or .png file (refuse_non_images is set)");
      if (first_non_image.empty()) first_non_image = rel;
      ++non_images_;
      return;
    }
    files_.push_back(rel);
    targets_.push_back(class_to_idx_.at(cls));
  };

  if (options_.list_file().empty()) {
    for (const fs::directory_entry& entry :
         fs::directory_iterator(root_, fs::directory_options::follow_directory_symlink, error)) {
      if (entry.is_directory(error)) classes_.push_back(entry.path().filename().string());
    }
    EMBER_CHECK(!error, "ImageFolder: cannot list '", root_, "': ", error.message());
    std::sort(classes_.begin(), classes_.end());
    EMBER_CHECK(!classes_.empty(), "ImageFolder: no class folders in '", root_, "' (expected root/CLASS/IMAGE files)");
    for (size_t c = 0; c < classes_.size(); ++c) class_to_idx_[classes_[c]] = static_cast<int64_t>(c);
    std::vector<std::string> empty;
    for (const std::string& cls : classes_) {
      const size_t before = files_.size();
      for (const auto& [dir, name] : walk_class(root_, cls)) {
        add(fs::relative(fs::path(dir) / name, root_).string(), cls);
      }
      if (files_.size() == before) empty.push_back(cls);
    }
    // torchvision refuses a class without images too: its index would never be seen.
    EMBER_CHECK(empty.empty(), "ImageFolder: no .jpg, .jpeg or .png file in the class folder '", root_, "/",
                empty.empty() ? "" : empty.front(), "'", empty.size() > 1 ? " (and " : "",
                empty.size() > 1 ? std::to_string(empty.size() - 1) + " more)" : "");
  } else {
    std::ifstream list(options_.list_file());
    EMBER_CHECK(list.good(), "ImageFolder: cannot open the list file '", options_.list_file(), "'");
    std::vector<std::pair<std::string, std::string>> entries;  // (path, class)
    std::string line;
    for (int64_t number = 1; std::getline(list, line); ++number) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty()) continue;
      const auto slash = line.find('/');
      EMBER_CHECK(slash != std::string::npos && slash > 0 && slash + 1 < line.size(), "ImageFolder: line ", number,
                  " of the list file '", options_.list_file(), "' is '", line, "', expected CLASS/NAME");
      entries.emplace_back(line, line.substr(0, slash));
      classes_.push_back(entries.back().second);
    }
    std::sort(classes_.begin(), classes_.end());
    classes_.erase(std::unique(classes_.begin(), classes_.end()), classes_.end());
    EMBER_CHECK(!classes_.empty(), "ImageFolder: the list file '", options_.list_file(), "' names no image");
    for (size_t c = 0; c < classes_.size(); ++c) class_to_idx_[classes_[c]] = static_cast<int64_t>(c);
    for (const auto& [path, cls] : entries) add(path, cls);
  }
  EMBER_CHECK(!files_.empty(), "ImageFolder: no .jpg, .jpeg or .png file under '", root_, "'");
  if (non_images_ > 0) {
    std::cerr << "ImageFolder: left out " << non_images_ << " file" << (non_images_ == 1 ? "" : "s")
              << " without a .jpg, .jpeg or .png extension under '" << root_ << "' (the first: " << first_non_image
              << ")\n";
  }
}

const std::string& ImageFolder::path_relative(int64_t index) const {
  check_index("ImageFolder", index, size());
  return files_[static_cast<size_t>(index)];
}

std::string ImageFolder::path(int64_t index) const { return (fs::path(root_) / path_relative(index)).string(); }

int64_t ImageFolder::target(int64_t index) const {
  check_index("ImageFolder", index, size());
  return targets_[static_cast<size_t>(index)];
}

Example ImageFolder::get(int64_t index) const {
  check_index("ImageFolder::get", index, size());
  // With skip_bad a file whose bytes or header are bad gives way to the next index's (faults
  // found while decoding are skipped the same way by the loader, through bad_log).
  for (int64_t k = 0; k < size(); ++k) {
    const int64_t at = (index + k) % size();
    auto image = std::make_shared<EncodedImage>();
    image->name = path(at);
    image->channels = options_.channels();
    image->limits.max_pixels = options_.max_pixels();
    try {
      image->bytes = read_file_bytes(image->name);
      image->header = read_image_header(image->bytes.data(), image->bytes.size(), image->name, image->limits);
    } catch (const Error& e) {
      if (!options_.skip_bad()) throw;
      bad_->record(image->name, e.what());
      continue;
    }
    if (options_.skip_bad()) image->bad_log = bad_;
    Example example;
    example.target = full({}, targets_[static_cast<size_t>(at)], TensorOptions(kInt64));
    example.encoded = std::move(image);
    return example;
  }
  EMBER_FAIL("ImageFolder::get: every one of the ", size(), " images under '", root_, "' is bad");
}

Tensor ImageFolder::load(int64_t index) const {
  Example example = get(index);
  const TensorSpec spec = decoded_spec(*example.encoded);
  Tensor out = empty(spec.shape, TensorOptions(kUInt8));
  decode_planar(*example.encoded, out.data_ptr());
  return out;
}

}  // namespace ember::data

// CIFAR binary records: validation of each file, then pixels and labels split into tensors.
#include "data/cifar.h"

#include <sys/stat.h>

#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/factory.h"
#include "core/io/file_io.h"

namespace ember::data {

namespace {

constexpr size_t kPixelBytes = 3 * 32 * 32;

Tensor labels_to_tensor(const std::vector<uint8_t>& bytes) {
  std::vector<int64_t> values(bytes.begin(), bytes.end());
  return tensor(values);
}

}  // namespace

CifarRecords read_cifar_records(const char* name, const std::vector<std::string>& paths,
                                const std::vector<int>& label_limits) {
  const size_t label_bytes = label_limits.size();
  const size_t record = label_bytes + kPixelBytes;
  auto pixels = std::make_shared<std::vector<uint8_t>>();
  CifarRecords out;
  out.labels.resize(label_bytes);
  for (const std::string& path : paths) {
    struct stat st;
    EMBER_CHECK(::stat(path.c_str(), &st) == 0, name, ": missing file '", path, "' (expected the binary version of ",
                name, ", whose directory holds ",
                label_bytes == 1 ? "data_batch_1.bin .. data_batch_5.bin and test_batch.bin" : "train.bin and test.bin",
                ")");
    std::vector<uint8_t> bytes = read_file(path);
    EMBER_CHECK(!bytes.empty(), name, ": '", path, "' is empty, expected records of ", record, " bytes");
    EMBER_CHECK(bytes.size() % record == 0, name, ": '", path, "': file size ", bytes.size(),
                " is not a multiple of the record size ", record, " (", label_bytes, " label byte",
                label_bytes == 1 ? "" : "s", " + ", kPixelBytes, " pixel bytes): truncated, or not a ", name,
                " binary file");
    size_t count = bytes.size() / record;
    if (pixels->empty()) pixels->reserve(count * kPixelBytes * paths.size());
    for (size_t n = 0; n < count; ++n) {
      const uint8_t* rec = bytes.data() + n * record;
      for (size_t k = 0; k < label_bytes; ++k) {
        EMBER_CHECK(rec[k] < label_limits[k], name, ": '", path, "': record ", n, " has label byte ", k, " = ",
                    static_cast<int>(rec[k]), ", expected 0..", label_limits[k] - 1,
                    " (is this a file of another dataset?)");
        out.labels[k].push_back(rec[k]);
      }
      pixels->insert(pixels->end(), rec + label_bytes, rec + record);
    }
  }
  int64_t total = static_cast<int64_t>(pixels->size() / kPixelBytes);
  uint8_t* data = pixels->data();
  out.images = from_blob(data, {total, 3, 32, 32}, kUInt8, [pixels](void*) mutable { pixels.reset(); });
  return out;
}

CIFAR10::CIFAR10(const std::string& root, bool train) {
  std::vector<std::string> paths;
  if (train) {
    for (int k = 1; k <= 5; ++k) paths.push_back(root + "/data_batch_" + std::to_string(k) + ".bin");
  } else {
    paths.push_back(root + "/test_batch.bin");
  }
  CifarRecords records = read_cifar_records("CIFAR10", paths, {10});
  images_ = records.images;
  targets_ = labels_to_tensor(records.labels[0]);
}

Example CIFAR10::get(int64_t index) const {
  check_index("CIFAR10::get", index, size());
  return {images_.select(0, index), targets_.select(0, index)};
}

CIFAR100::CIFAR100(const std::string& root, bool train, CifarLabels labels) : labels_(labels) {
  CifarRecords records = read_cifar_records("CIFAR100", {root + (train ? "/train.bin" : "/test.bin")}, {20, 100});
  images_ = records.images;
  coarse_targets_ = labels_to_tensor(records.labels[0]);
  fine_targets_ = labels_to_tensor(records.labels[1]);
}

Example CIFAR100::get(int64_t index) const {
  check_index("CIFAR100::get", index, size());
  return {images_.select(0, index), targets().select(0, index)};
}

}  // namespace ember::data

// CIFAR-10 and CIFAR-100 from their binary versions in a directory the user supplies, held in
// memory: images uint8 [N, 3, 32, 32] (the files already store each image as R, G, B planes),
// labels int64 [N].
//
//   ember::data::CIFAR10 train("/data/cifar-10-batches-bin");                 // 50,000 examples
//   ember::data::CIFAR100 test("/data/cifar-100-binary", /*train=*/false,
//                              ember::data::CifarLabels::kCoarse);            // 20 superclasses
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace ember::data {

// An image and its label bytes, as the records of the binary files store them.
struct CifarRecords {
  Tensor images;                             // uint8 [N, 3, 32, 32]
  std::vector<std::vector<uint8_t>> labels;  // labels[k][n]: label byte k of record n
};

// Reads records of `label_bytes` label bytes + 3072 pixel bytes from each file in turn. Errors name
// the file: missing, empty, size not a multiple of the record size, or a label byte not below
// `label_limits[k]`.
CifarRecords read_cifar_records(const char* name, const std::vector<std::string>& paths,
                                const std::vector<int>& label_limits);

// data_batch_1.bin .. data_batch_5.bin (train) or test_batch.bin: 1 label byte (0..9) per record.
class CIFAR10 : public Dataset {
 public:
  explicit CIFAR10(const std::string& root, bool train = true);
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor images_;
  Tensor targets_;
};

enum class CifarLabels { kFine, kCoarse };

// train.bin or test.bin: a coarse label byte (0..19), a fine label byte (0..99), then the pixels.
// `labels` picks which one is the target; both stay available.
class CIFAR100 : public Dataset {
 public:
  explicit CIFAR100(const std::string& root, bool train = true, CifarLabels labels = CifarLabels::kFine);
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return labels_ == CifarLabels::kFine ? fine_targets_ : coarse_targets_; }
  const Tensor& fine_targets() const { return fine_targets_; }
  const Tensor& coarse_targets() const { return coarse_targets_; }

 private:
  CifarLabels labels_;
  Tensor images_;
  Tensor fine_targets_;
  Tensor coarse_targets_;
};

}  // namespace ember::data

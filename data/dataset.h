// Dataset: random access to examples {data, target}, plus the generic datasets built from tensors
// or from other datasets (TensorDataset, Subset, ConcatDataset). get() must be thread-safe: the
// DataLoader's workers call it concurrently.
//
//   auto all = std::make_shared<ember::data::TensorDataset>(images, labels);   // [N, ...], [N]
//   auto head = std::make_shared<ember::data::Subset>(all, std::vector<int64_t>{0, 1, 2});
//   ember::data::Example e = head->get(2);   // e.data = images[2], e.target = labels[2]
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/image.h"

namespace ember::data {

// One example: e.g. an image [C, H, W] (uint8 or float32) and an int64 scalar label. In-memory
// datasets return views into their big tensors, so get() copies no pixels. `target` may be
// undefined for unlabeled data.
struct Example {
  Tensor data;
  Tensor target;
  // An image file not decoded yet (ImageFolder), with `data` undefined: the loader's transform
  // decodes it (data/image_transforms.h), or the loader decodes it whole without one.
  std::shared_ptr<const EncodedImage> encoded;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Valid for 0 <= index < size(); raises naming the index otherwise. Thread-safe.
  virtual Example get(int64_t index) const = 0;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// Raises "<op>: index i out of range for a dataset of size n" unless 0 <= index < size.
void check_index(const char* op, int64_t index, int64_t size);

// Example i is (data[i], targets[i]): slices along dim 0 of the given tensors, which must agree in
// size(0). `targets` may be undefined.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(Tensor data, Tensor targets = Tensor());
  int64_t size() const override { return data_.size(0); }
  Example get(int64_t index) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_;
  Tensor targets_;
};

// The examples of `dataset` at `indices`, in that order (repeats allowed).
class Subset : public Dataset {
 public:
  Subset(DatasetPtr dataset, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  DatasetPtr dataset_;
  std::vector<int64_t> indices_;
};

// The datasets one after another: index 0 is datasets[0]'s first example.
class ConcatDataset : public Dataset {
 public:
  explicit ConcatDataset(std::vector<DatasetPtr> datasets);
  int64_t size() const override { return ends_.empty() ? 0 : ends_.back(); }
  Example get(int64_t index) const override;

 private:
  std::vector<DatasetPtr> datasets_;
  std::vector<int64_t> ends_;  // ends_[k] = total size of datasets[0..k]
};

}  // namespace ember::data

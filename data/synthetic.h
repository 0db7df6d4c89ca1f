// SyntheticDataset: images of any shape and any class count, generated on demand from (seed,
// index) with Philox, for throughput runs without files. Example i is the same on every call.
//
//   ember::data::SyntheticDataset fake(50000, {3, 32, 32}, /*num_classes=*/10, /*seed=*/1);
//   ember::data::Example e = fake.get(7);   // uint8 [3, 32, 32], int64 label in 0..9
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace ember::data {

class SyntheticDataset : public Dataset {
 public:
  // `dtype` kUInt8 gives uniform bytes 0..255; kFloat32 gives uniform values in [0, 1).
  SyntheticDataset(int64_t size, Shape image_shape, int64_t num_classes, uint64_t seed = 0, DType dtype = kUInt8);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  const Shape& image_shape() const { return image_shape_; }
  int64_t num_classes() const { return num_classes_; }

 private:
  int64_t size_;
  Shape image_shape_;
  int64_t num_classes_;
  uint64_t seed_;
  DType dtype_;
};

}  // namespace ember::data

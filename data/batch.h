// Batch assembly ("collate"): the examples at some indices become one contiguous data tensor
// [B, ...] and one target tensor [B, ...]. Each example is transformed (or copied) straight into
// its slot of the batch, so the only allocations per batch are the two batch tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/transform.h"

namespace ember::data {

struct Batch {
  Tensor data;                   // [B, ...]: example j's (transformed) data in slot j
  Tensor target;                 // [B, ...]: example j's target; undefined for unlabeled datasets
  std::vector<int64_t> indices;  // the dataset index of each slot
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

// Example `indices[j]` goes to slot j; `transform` (may be null) runs with
// ExampleRandom(seed, epoch, indices[j]). All examples must share the first one's data and target
// shape and dtype; the error names the offending index and both shapes otherwise.
Batch assemble_batch(const Dataset& dataset, std::vector<int64_t> indices, const Transform* transform, uint64_t seed,
                     int64_t epoch);

// A contiguous [N, C, H, W] batch copied so its memory is NHWC (same logical shape and values).
// Serial on purpose: it runs on loader threads, which must not take the compute threads.
Tensor channels_last_copy(const Tensor& nchw);

}  // namespace ember::data

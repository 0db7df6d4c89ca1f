// How sharded data parallelism splits parameters: each one along dim 0 into `ranks` chunks of
// ceil(rows / ranks) rows (as PyTorch's fully_shard), the last ranks' chunks shorter or empty
// where the rows do not divide. Parameters that travel in one collective share a flat buffer of
// `ranks` equal sections: section r holds rank r's chunk of every parameter in turn, padded to
// the full chunk, so a reduce-scatter hands each rank its section and an all-gather rebuilds
// the buffer from the sections.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::parallel {

struct DimZeroShard {
  Shape shape;             // the full parameter's
  int64_t rows = 1;        // its dim 0 (a 0-dim parameter counts as one row)
  int64_t row_numel = 1;   // elements per row
  int64_t chunk_rows = 1;  // ceil(rows / ranks): every rank's padded row count
  int ranks = 1;

  static DimZeroShard of(const Shape& shape, int ranks);
  int64_t begin(int rank) const;    // first row rank `rank` owns
  int64_t rows_of(int rank) const;  // how many it owns (0 for ranks past the end)
  int64_t chunk_numel() const { return chunk_rows * row_numel; }
  Shape shard_shape(int rank) const;  // [rows_of(rank), shape[1:]...] (a 0-dim parameter's: [rows_of])
};

// Several parameters' shards, packed as above.
class ShardedLayout {
 public:
  ShardedLayout(const std::vector<Shape>& shapes, int ranks);

  size_t size() const { return shards_.size(); }
  int ranks() const { return ranks_; }
  const DimZeroShard& shard(size_t k) const { return shards_[k]; }
  int64_t section_numel() const { return section_numel_; }  // one rank's padded share
  int64_t flat_numel() const { return section_numel_ * ranks_; }

  // Every rank's rows of `full` (parameter k's full tensor) into their sections of `flat`.
  void scatter_full(size_t k, const Tensor& full, const Tensor& flat) const;
  // Zeroes the padding of every section of `flat` (what scatter_full does not write).
  void zero_padding(const Tensor& flat) const;
  // Parameter k's full tensor from every section of `flat`.
  void gather_full(size_t k, const Tensor& flat, const Tensor& full) const;
  // Rank `rank`'s rows of parameter k inside one section (shaped as its shard).
  Tensor shard_in_section(size_t k, const Tensor& section, int rank) const;
  // This rank's shards of every parameter packed into its section (padding zeroed).
  void pack_section(const std::vector<Tensor>& shards, const Tensor& section, int rank) const;

 private:
  int ranks_;
  std::vector<DimZeroShard> shards_;
  std::vector<int64_t> offsets_;  // of each parameter within a section
  int64_t section_numel_ = 0;
};

}  // namespace ember::parallel

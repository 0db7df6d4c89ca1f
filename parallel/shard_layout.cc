// Row ranges and section offsets; the copies between full tensors, shards and flat buffers.
#include "parallel/shard_layout.h"

#include <algorithm>

#include "core/error.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::parallel {

DimZeroShard DimZeroShard::of(const Shape& shape, int ranks) {
  EMBER_CHECK(ranks >= 1, "DimZeroShard: ranks must be at least 1, got ", ranks);
  DimZeroShard s;
  s.shape = shape;
  s.ranks = ranks;
  s.rows = shape.empty() ? 1 : shape[0];
  s.row_numel = 1;
  for (size_t d = 1; d < shape.size(); ++d) s.row_numel *= shape[d];
  s.chunk_rows = (s.rows + ranks - 1) / ranks;
  return s;
}

int64_t DimZeroShard::begin(int rank) const { return std::min<int64_t>(rows, rank * chunk_rows); }

int64_t DimZeroShard::rows_of(int rank) const { return std::min<int64_t>(rows, (rank + 1) * chunk_rows) - begin(rank); }

Shape DimZeroShard::shard_shape(int rank) const {
  Shape out = shape.empty() ? Shape{1} : shape;
  out[0] = rows_of(rank);
  return out;
}

ShardedLayout::ShardedLayout(const std::vector<Shape>& shapes, int ranks) : ranks_(ranks) {
  for (const Shape& shape : shapes) {
    shards_.push_back(DimZeroShard::of(shape, ranks));
    offsets_.push_back(section_numel_);
    section_numel_ += shards_.back().chunk_numel();
  }
}

void ShardedLayout::scatter_full(size_t k, const Tensor& full, const Tensor& flat) const {
  NoGradGuard no_grad;
  const DimZeroShard& s = shards_[k];
  Tensor rows = full.detach().reshape({s.rows, s.row_numel});
  for (int r = 0; r < ranks_; ++r) {
    int64_t n = s.rows_of(r);
    if (n == 0) continue;
    Tensor target = flat.narrow(0, r * section_numel_ + offsets_[k], n * s.row_numel);
    copy_into(target, rows.narrow(0, s.begin(r), n).reshape({-1}));
  }
}

void ShardedLayout::zero_padding(const Tensor& flat) const {
  NoGradGuard no_grad;
  for (size_t k = 0; k < shards_.size(); ++k) {
    const DimZeroShard& s = shards_[k];
    for (int r = 0; r < ranks_; ++r) {
      int64_t used = s.rows_of(r) * s.row_numel;
      if (used == s.chunk_numel()) continue;
      flat.narrow(0, r * section_numel_ + offsets_[k] + used, s.chunk_numel() - used).zero_();
    }
  }
}

void ShardedLayout::gather_full(size_t k, const Tensor& flat, const Tensor& full) const {
  NoGradGuard no_grad;
  const DimZeroShard& s = shards_[k];
  Tensor rows = full.detach().view({s.rows, s.row_numel});
  for (int r = 0; r < ranks_; ++r) {
    int64_t n = s.rows_of(r);
    if (n == 0) continue;
    copy_into(rows.narrow(0, s.begin(r), n),
              flat.narrow(0, r * section_numel_ + offsets_[k], n * s.row_numel).view({n, s.row_numel}));
  }
}

Tensor ShardedLayout::shard_in_section(size_t k, const Tensor& section, int rank) const {
  const DimZeroShard& s = shards_[k];
  return section.narrow(0, offsets_[k], s.rows_of(rank) * s.row_numel).view(s.shard_shape(rank));
}

void ShardedLayout::pack_section(const std::vector<Tensor>& shards, const Tensor& section, int rank) const {
  EMBER_CHECK(shards.size() == shards_.size(), "ShardedLayout::pack_section: expected ", shards_.size(),
              " shards, got ", shards.size());
  NoGradGuard no_grad;
  for (size_t k = 0; k < shards_.size(); ++k) {
    const DimZeroShard& s = shards_[k];
    int64_t used = s.rows_of(rank) * s.row_numel;
    if (used > 0) copy_into(section.narrow(0, offsets_[k], used), shards[k].detach().reshape({-1}));
    if (used < s.chunk_numel()) section.narrow(0, offsets_[k] + used, s.chunk_numel() - used).zero_();
  }
}

}  // namespace ember::parallel

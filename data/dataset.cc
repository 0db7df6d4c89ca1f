// TensorDataset, Subset and ConcatDataset: index bookkeeping over tensors and other datasets.
#include "data/dataset.h"

#include <algorithm>

#include "core/error.h"

namespace ember::data {

void check_index(const char* op, int64_t index, int64_t size) {
  EMBER_CHECK(index >= 0 && index < size, op, ": index ", index, " out of range for a dataset of size ", size);
}

TensorDataset::TensorDataset(Tensor data, Tensor targets) : data_(std::move(data)), targets_(std::move(targets)) {
  EMBER_CHECK(data_.defined() && data_.dim() >= 1, "TensorDataset: data must be a tensor with at least 1 dim, got ",
              data_.defined() ? shape_str(data_.sizes()) : std::string("an undefined tensor"));
  if (targets_.defined()) {
    EMBER_CHECK(targets_.dim() >= 1 && targets_.size(0) == data_.size(0),
                "TensorDataset: data and targets must have the same size along dim 0, got data ",
                shape_str(data_.sizes()), " and targets ", shape_str(targets_.sizes()));
  }
}

Example TensorDataset::get(int64_t index) const {
  check_index("TensorDataset::get", index, size());
  return {data_.select(0, index), targets_.defined() ? targets_.select(0, index) : Tensor()};
}

Subset::Subset(DatasetPtr dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  EMBER_CHECK(dataset_ != nullptr, "Subset: the dataset is null");
  int64_t n = dataset_->size();
  for (size_t k = 0; k < indices_.size(); ++k) {
    EMBER_CHECK(indices_[k] >= 0 && indices_[k] < n, "Subset: indices[", k, "] = ", indices_[k],
                " is out of range for a dataset of size ", n);
  }
}

Example Subset::get(int64_t index) const {
  check_index("Subset::get", index, size());
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

ConcatDataset::ConcatDataset(std::vector<DatasetPtr> datasets) : datasets_(std::move(datasets)) {
  int64_t total = 0;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    EMBER_CHECK(datasets_[k] != nullptr, "ConcatDataset: datasets[", k, "] is null");
    total += datasets_[k]->size();
    ends_.push_back(total);
  }
}

Example ConcatDataset::get(int64_t index) const {
  check_index("ConcatDataset::get", index, size());
  // The first dataset whose end lies beyond index holds it; empty datasets are skipped naturally.
  size_t k = static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), index) - ends_.begin());
  int64_t start = k == 0 ? 0 : ends_[k - 1];
  return datasets_[k]->get(index - start);
}

}  // namespace ember::data

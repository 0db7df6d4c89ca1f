// One group, two backends, as PyTorch's "cpu:gloo,cuda:nccl": CPU tensors go over the host
// backend (MPI), CUDA tensors over the device backend (NCCL). The device group is made at the
// first collective on a CUDA tensor, on that tensor's device, with its unique id broadcast over
// the host group; ranks reach it together because they issue collectives in the same order.
#pragma once

#include <memory>
#include <mutex>

#include "comm/device_backend.h"
#include "comm/process_group.h"

namespace ember::comm {

class MixedProcessGroup final : public ProcessGroup {
 public:
  MixedProcessGroup(std::shared_ptr<ProcessGroup> host, DeviceGroupFactory device_factory);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string name() const override { return host_->name(); }
  std::vector<int> world_ranks() const override { return host_->world_ranks(); }

  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override;
  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override;
  WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input) override;
  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override;
  WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) override;
  WorkPtr all_to_all_single(const Tensor& output, const Tensor& input) override;
  WorkPtr send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr recv(const Tensor& tensor, int src, int tag) override;
  // The host backend's: a barrier holds the host, whatever device work is queued.
  WorkPtr barrier() override;
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override;

  // The group CUDA tensors go to (null until the first collective on one).
  std::shared_ptr<ProcessGroup> device_group() const;

 private:
  // The backend for `t` (making the device group on first use).
  ProcessGroup& route(const Tensor& t, const char* op);

  std::shared_ptr<ProcessGroup> host_;
  DeviceGroupFactory device_factory_;
  mutable std::mutex mutex_;
  std::shared_ptr<ProcessGroup> device_;
};

}  // namespace ember::comm

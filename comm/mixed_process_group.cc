#include "comm/mixed_process_group.h"

#include "core/error.h"

namespace ember::comm {

MixedProcessGroup::MixedProcessGroup(std::shared_ptr<ProcessGroup> host, DeviceGroupFactory device_factory)
    : host_(std::move(host)), device_factory_(std::move(device_factory)) {}

std::shared_ptr<ProcessGroup> MixedProcessGroup::device_group() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_;
}

ProcessGroup& MixedProcessGroup::route(const Tensor& t, const char* op) {
  EMBER_CHECK(t.defined(), op, " on ", name(), ": got an undefined tensor");
  if (!t.device().is_cuda()) return *host_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!device_) {
    DeviceGroupSpec spec;
    spec.rank = rank();
    spec.size = size();
    spec.device = t.device();
    spec.name = name();
    spec.world_ranks = world_ranks();
    spec.share = share_through(host_, Device(kCPU));
    device_ = device_factory_(spec);
  }
  return *device_;
}

WorkPtr MixedProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  return route(tensor, "all_reduce").all_reduce(tensor, op);
}
WorkPtr MixedProcessGroup::broadcast(const Tensor& tensor, int root) {
  return route(tensor, "broadcast").broadcast(tensor, root);
}
WorkPtr MixedProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  return route(tensor, "reduce").reduce(tensor, root, op);
}
WorkPtr MixedProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  return route(input, "all_gather").all_gather(outputs, input);
}
WorkPtr MixedProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  return route(input, "all_gather_into_tensor").all_gather_into_tensor(output, input);
}
WorkPtr MixedProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  return route(output, "reduce_scatter").reduce_scatter(output, inputs, op);
}
WorkPtr MixedProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  return route(input, "reduce_scatter_tensor").reduce_scatter_tensor(output, input, op);
}
WorkPtr MixedProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(!inputs.empty(), "all_to_all on ", name(), ": expected ", size(), " inputs, got none");
  return route(inputs[0], "all_to_all").all_to_all(outputs, inputs);
}
WorkPtr MixedProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input) {
  return route(input, "all_to_all_single").all_to_all_single(output, input);
}
WorkPtr MixedProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  return route(tensor, "send").send(tensor, dst, tag);
}
WorkPtr MixedProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  return route(tensor, "recv").recv(tensor, src, tag);
}
WorkPtr MixedProcessGroup::barrier() { return host_->barrier(); }

std::shared_ptr<ProcessGroup> MixedProcessGroup::new_group(const std::vector<int>& ranks) {
  auto host = host_->new_group(ranks);
  if (!host) return nullptr;
  return std::make_shared<MixedProcessGroup>(host, device_factory_);
}

}  // namespace ember::comm

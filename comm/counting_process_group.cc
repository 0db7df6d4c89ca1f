// Forwarding with a count per collective kind.
#include "comm/counting_process_group.h"

#include "core/error.h"

namespace ember::comm {

int64_t Traffic::total() const {
  int64_t sum = 0;
  for (auto& [kind, n] : bytes) sum += n;
  return sum;
}

CountingProcessGroup::CountingProcessGroup(std::shared_ptr<ProcessGroup> inner) : inner_(std::move(inner)) {
  EMBER_CHECK(inner_ != nullptr, "CountingProcessGroup: the process group to count is null");
}

Traffic CountingProcessGroup::traffic() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traffic_;
}

void CountingProcessGroup::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  traffic_ = Traffic();
}

void CountingProcessGroup::count(CollectiveKind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  traffic_.bytes[kind] += bytes;
  traffic_.calls[kind] += 1;
}

WorkPtr CountingProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  count(CollectiveKind::AllReduce, 2 * tensor.nbytes());
  return inner_->all_reduce(tensor, op);
}

WorkPtr CountingProcessGroup::broadcast(const Tensor& tensor, int root) {
  count(CollectiveKind::Broadcast, tensor.nbytes());
  return inner_->broadcast(tensor, root);
}

WorkPtr CountingProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  count(CollectiveKind::Reduce, tensor.nbytes());
  return inner_->reduce(tensor, root, op);
}

WorkPtr CountingProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  count(CollectiveKind::AllGather, input.nbytes() * static_cast<int64_t>(outputs.size()));
  return inner_->all_gather(outputs, input);
}

WorkPtr CountingProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  count(CollectiveKind::AllGatherIntoTensor, output.nbytes());
  return inner_->all_gather_into_tensor(output, input);
}

WorkPtr CountingProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  count(CollectiveKind::ReduceScatter, output.nbytes() * static_cast<int64_t>(inputs.size()));
  return inner_->reduce_scatter(output, inputs, op);
}

WorkPtr CountingProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  count(CollectiveKind::ReduceScatterTensor, input.nbytes());
  return inner_->reduce_scatter_tensor(output, input, op);
}

WorkPtr CountingProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  int64_t bytes = 0;
  for (const Tensor& t : inputs) bytes += t.nbytes();
  count(CollectiveKind::AllToAll, bytes);
  return inner_->all_to_all(outputs, inputs);
}

WorkPtr CountingProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input) {
  count(CollectiveKind::AllToAllSingle, input.nbytes());
  return inner_->all_to_all_single(output, input);
}

WorkPtr CountingProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  count(CollectiveKind::Send, tensor.nbytes());
  return inner_->send(tensor, dst, tag);
}

WorkPtr CountingProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  count(CollectiveKind::Recv, tensor.nbytes());
  return inner_->recv(tensor, src, tag);
}

WorkPtr CountingProcessGroup::barrier() {
  count(CollectiveKind::Barrier, 0);
  return inner_->barrier();
}

std::shared_ptr<ProcessGroup> CountingProcessGroup::new_group(const std::vector<int>& ranks) {
  std::shared_ptr<ProcessGroup> sub = inner_->new_group(ranks);
  return sub == nullptr ? nullptr : std::make_shared<CountingProcessGroup>(sub);
}

}  // namespace ember::comm

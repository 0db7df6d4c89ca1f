// A process group that counts what its collectives move, around any other group: the volume each
// rank's collectives carry, by kind, in the ZeRO paper's units. An all-reduce of n bytes counts
// 2n (it is a reduce-scatter and an all-gather of n each), a reduce-scatter its full input n, an
// all-gather its full output n, an all-to-all, a broadcast, a reduce, a send or a recv n. So DDP's
// step moves 2 x the parameters' bytes and ZeRO-3's 3 x, whatever the group size.
//
//   auto counted = std::make_shared<ember::comm::CountingProcessGroup>(world);
//   ... train with `counted` in place of `world` ...
//   int64_t bytes = counted->traffic().total();
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "comm/process_group.h"

namespace ember::comm {

struct Traffic {
  std::map<CollectiveKind, int64_t> bytes;
  std::map<CollectiveKind, int64_t> calls;
  int64_t total() const;
};

class CountingProcessGroup final : public ProcessGroup {
 public:
  explicit CountingProcessGroup(std::shared_ptr<ProcessGroup> inner);

  Traffic traffic() const;
  void reset();
  const std::shared_ptr<ProcessGroup>& inner() const { return inner_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::vector<int> world_ranks() const override { return inner_->world_ranks(); }
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
  WorkPtr barrier() override;
  // Sub-groups are counted too, separately (each is a CountingProcessGroup of its own).
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override;

 private:
  void count(CollectiveKind kind, int64_t bytes);

  std::shared_ptr<ProcessGroup> inner_;
  mutable std::mutex mutex_;
  Traffic traffic_;
};

}  // namespace ember::comm

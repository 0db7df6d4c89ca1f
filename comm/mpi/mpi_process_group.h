// ProcessGroup over an MPI communicator. Collectives run on the runtime's communication thread
// in submission order; send/recv are posted there and progressed between collectives;
// non-contiguous tensors are staged through contiguous copies.
#pragma once

#include <mpi.h>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "comm/process_group.h"

namespace ember::comm::mpi {

class MpiProcessGroup final : public ProcessGroup {
 public:
  // The world group (MPI_COMM_WORLD, duplicated).
  static std::shared_ptr<MpiProcessGroup> world();
  // check_comm: a duplicate of comm for EMBER_DISTRIBUTED_DEBUG's send/recv signatures
  // (MPI_COMM_NULL without debug).
  MpiProcessGroup(MPI_Comm comm, MPI_Comm check_comm, std::string name, std::vector<int> world_ranks);
  ~MpiProcessGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  std::vector<int> world_ranks() const override { return world_ranks_; }

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
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override;

 private:
  CollectiveInfo info(CollectiveKind kind, const Tensor* tensor, ReduceOp op = ReduceOp::Sum, int peer = -1);
  CollectiveInfo p2p_info(CollectiveKind kind, const Tensor& tensor, int peer, int tag);
  // Queues `run` (blocking MPI calls on the communication thread); with EMBER_DISTRIBUTED_DEBUG
  // the ranks first exchange and compare the collective's signature.
  WorkPtr submit(CollectiveInfo info, std::function<void()> run);
  // The non-blocking form: `post` starts the MPI operation and returns its request, which the
  // communication thread tests between sleeps (or a waiter completes); `after` runs once it
  // completed. Started at once.
  WorkPtr submit_posted(CollectiveInfo info, std::function<MPI_Request()> post, std::function<void()> after);
  void check_signatures(const CollectiveInfo& info);
  // Posts this rank's half of a send/recv (on the communication thread): with debug, the
  // signature bytes on check_comm_ first, then the data.
  std::vector<MPI_Request> post_p2p(const CollectiveInfo& info, void* signature, void* data, int count, DType dtype);
  [[noreturn]] void fail_mpi(const CollectiveInfo& info, int code);
  void check_rank(int r, const char* what, const char* op) const;

  MPI_Comm comm_;
  MPI_Comm check_comm_;
  std::string name_;
  std::vector<int> world_ranks_;
  int rank_ = 0, size_ = 1;
  std::atomic<uint64_t> sequence_{0};
  std::mutex p2p_mutex_;
  std::map<std::tuple<CollectiveKind, int, int>, uint64_t> p2p_sequence_;  // (send/recv, peer, tag)
};

}  // namespace ember::comm::mpi

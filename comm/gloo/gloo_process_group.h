// ProcessGroup over Gloo's TCP transport (the library PyTorch's CPU collectives use): CPU tensors,
// every collective of the MPI group, started without mpirun through the store the ranks meet at.
// Collectives run on the group's worker thread in submission order; send/recv are posted at once.
// Gloo has no reduce-scatter over options of its own: reduce_scatter_tensor is a ring of Gloo's
// point-to-point transfers here (each rank sends and receives (n-1)/n of the input, as a ring
// all-reduce's first half does), and reduce_scatter / all_to_all pack lists into one tensor.
#pragma once

#include <gloo/context.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "comm/gloo/context.h"
#include "comm/gloo/runtime.h"
#include "comm/process_group.h"
#include "comm/store.h"

namespace ember::comm::gloo_backend {

class GlooProcessGroup final : public ProcessGroup {
 public:
  struct Setup {
    std::shared_ptr<Store> store;  // null for a world of one
    std::string master_host;       // where the store is: it picks the device's address
    std::string name;              // "WORLD", "group(0,2)"
    std::string prefix;            // the group's keys in the store
    int rank = 0, size = 1;
    std::vector<int> world_ranks;
  };
  explicit GlooProcessGroup(Setup setup);
  ~GlooProcessGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return setup_.name; }
  std::vector<int> world_ranks() const override { return setup_.world_ranks; }

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
  // Queues `run` on the worker; with EMBER_DISTRIBUTED_DEBUG the ranks first exchange and compare
  // the collective's signature.
  WorkPtr submit(CollectiveInfo info, std::function<void()> run);
  WorkPtr post_p2p(CollectiveKind kind, const Tensor& tensor, int peer, int tag);
  // Gloo's exception as an ember::Error naming the collective and, where it can, the peer.
  [[noreturn]] void fail(const CollectiveInfo& info, const std::exception& e) const;
  void check_rank(int r, const char* what, const char* op) const;
  std::chrono::milliseconds gloo_timeout() const;
  // Gloo's all-gather (count elements of `element` bytes from each rank, in rank order into `out`)
  // and all-to-all (count elements in, count out, in size_ equal chunks), on the worker.
  void gather_bytes(void* in, void* out, int64_t count, size_t element, uint64_t sequence);
  void exchange_bytes(void* in, void* out, int64_t count, size_t element, uint64_t sequence);
  void ring_reduce_scatter(const CollectiveInfo& info, uint8_t* data, uint8_t* out, size_t chunk_bytes, DType dtype,
                           ReduceOp op);

  Setup setup_;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<::gloo::Context> context_;
  Peers peers_;
  std::atomic<uint64_t> sequence_{0};
  uint64_t sub_groups_ = 0;  // new_group calls, which every member makes in the same order
  std::mutex p2p_mutex_;
  std::map<std::tuple<CollectiveKind, int, int>, uint64_t> p2p_sequence_;  // (send/recv, peer, tag)
  // Declared last: destroyed first, so no thread still runs while the context goes.
  P2pWaiters p2p_waiters_;
  std::shared_ptr<GlooWorker> worker_ = std::make_shared<GlooWorker>();
};

}  // namespace ember::comm::gloo_backend

// ProcessGroup over an NCCL communicator, for CUDA tensors on one device. Each group has its own
// stream on that device; a collective first makes it wait on the caller's current stream (an
// event), then queues the NCCL call there, so the host never blocks. Work::wait() makes the
// caller's current stream wait for the collective's end; wait(timeout) and barrier() block the
// host. Tensors handed to a collective are held, and record_stream'ed to the NCCL stream, until
// it completes, so the caching allocator never hands their blocks out early.
//
// A watchdog thread (watchdog.h) times every collective, polls ncclCommGetAsyncError, and on a
// failure or EMBER_COLLECTIVE_TIMEOUT aborts the communicator and ends the job, naming the
// collective, its sequence number, group, tensor, rank and device. The same code runs over the
// real NCCL (--config=cuda) and the emulated one (cuda/emu).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "comm/device_backend.h"
#include "comm/process_group.h"
#include "cuda/api.h"
#include "cuda/nccl.h"

namespace ember::comm::nccl {

// What a group and its in-flight works share.
struct Communicator {
  ncclComm_t comm = nullptr;
  int device = 0;
  int rank = 0, size = 1;
  std::string group;
  cuda::Stream stream;
  std::mutex enqueue_mutex;  // one thread at a time in NCCL calls on `comm`
  std::atomic<bool> aborted{false};

  Communicator(ncclComm_t c, int d, int r, int s, std::string g, cuda::Stream st)
      : comm(c), device(d), rank(r), size(s), group(std::move(g)), stream(std::move(st)) {}
  ~Communicator();
  void abort();  // ncclCommAbort, once
  // "rank 1 of WORLD on cuda:1"
  std::string where() const;
};

class NcclWork final : public Work {
 public:
  NcclWork(CollectiveInfo info, std::shared_ptr<Communicator> comm, cuda::Event end, std::vector<Tensor> held,
           bool host_blocking);
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() const override;
  std::string error() const override;
  const CollectiveInfo& info() const override { return info_; }

  // For the watchdog.
  const std::string& description() const { return description_; }
  const std::shared_ptr<Communicator>& communicator() const { return comm_; }
  cudaEvent_t end_event() const { return end_.handle(); }
  std::chrono::steady_clock::time_point started() const { return started_; }
  void complete();
  void fail(const std::string& error);

 private:
  CollectiveInfo info_;
  std::string description_;
  std::shared_ptr<Communicator> comm_;
  cuda::Event end_;
  bool host_blocking_;
  std::chrono::steady_clock::time_point started_;
  mutable std::mutex mutex_;
  bool done_ = false;
  std::string error_;
  std::vector<Tensor> held_;  // released once complete
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  // Makes the communicator: spec.rank 0 draws the unique id, spec.share hands it to the others,
  // and every rank joins on spec.device (bounded by EMBER_COLLECTIVE_TIMEOUT).
  static std::shared_ptr<NcclProcessGroup> create(const DeviceGroupSpec& spec);
  NcclProcessGroup(std::shared_ptr<Communicator> comm, std::vector<int> world_ranks);

  int rank() const override { return comm_->rank; }
  int size() const override { return comm_->size; }
  std::string name() const override { return comm_->group; }
  std::vector<int> world_ranks() const override { return world_ranks_; }
  Device device() const { return Device::cuda(comm_->device); }
  // The stream this group's collectives run on.
  const cuda::Stream& stream() const { return comm_->stream; }
  ncclComm_t handle() const { return comm_->comm; }

  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override;
  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override;
  WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input) override;
  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override;
  WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) override;
  WorkPtr all_to_all_single(const Tensor& output, const Tensor& input) override;
  // NCCL has no tags: sends to a peer pair with its recvs in order, whatever the tag (under
  // EMBER_DISTRIBUTED_DEBUG=1 the receiver checks the sender's tag, dtype and shape).
  WorkPtr send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr recv(const Tensor& tensor, int src, int tag) override;
  // An all-reduce of one element whose wait() blocks the host.
  WorkPtr barrier() override;
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override;

 private:
  using Enqueue = std::function<void(cudaStream_t)>;
  CollectiveInfo info(CollectiveKind kind, const Tensor* tensor, ReduceOp op = ReduceOp::Sum, int peer = -1);
  CollectiveInfo p2p_info(CollectiveKind kind, const Tensor& tensor, int peer, int tag);
  // Orders the NCCL stream after the caller's, runs `enqueue` (NCCL calls) and then `after` (copies
  // out of staging buffers) on it, and records the end.
  WorkPtr launch(const CollectiveInfo& info, std::vector<Tensor> held, const Enqueue& enqueue,
                 const std::function<void()>& after = {}, bool host_blocking = false);
  void check(const CollectiveInfo& info, ncclResult_t result) const;
  void check_tensor(const Tensor& t, const char* op) const;
  void check_rank(int r, const char* what, const char* op) const;
  // EMBER_DISTRIBUTED_DEBUG=1: all-gathers the signatures on the NCCL stream and compares them.
  void check_signatures(const CollectiveInfo& info);
  void exchange_p2p_signature(const CollectiveInfo& info);

  std::shared_ptr<Communicator> comm_;
  std::vector<int> world_ranks_;
  std::atomic<uint64_t> sequence_{0};
  std::mutex p2p_mutex_;
  std::map<std::tuple<CollectiveKind, int, int>, uint64_t> p2p_sequence_;
};

}  // namespace ember::comm::nccl

// ProcessGroup: a set of ranks that run collectives on tensors. Every collective is
// asynchronous: it returns a Work to wait on. Ranks must issue the same collectives in the same
// order (EMBER_DISTRIBUTED_DEBUG=1 checks that and names the first difference); a collective
// that does not finish within EMBER_COLLECTIVE_TIMEOUT seconds (default 600) ends the job with a
// message naming it, its sequence number, the group and the tensor.
//
//   auto world = ember::comm::init();           // from the mpirun environment
//   auto work = world->all_reduce(grad, ember::comm::ReduceOp::Avg);
//   ... overlap other work ...
//   work->wait();
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::comm {

enum class ReduceOp { Sum, Avg, Min, Max, Product };
const char* reduce_op_name(ReduceOp op);

enum class CollectiveKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  AllGatherIntoTensor,
  ReduceScatter,
  ReduceScatterTensor,
  AllToAll,
  AllToAllSingle,
  Send,
  Recv,
  Barrier
};
const char* collective_name(CollectiveKind kind);

// What a collective was, for error messages and the debug-mode cross-rank check.
struct CollectiveInfo {
  CollectiveKind kind = CollectiveKind::Barrier;
  // Counted from 1: collectives per group; send/recv per group, peer, tag and direction (so the
  // k-th send to a peer with a tag matches that peer's k-th recv with it, and ranks that do not
  // take part in point-to-point traffic keep their collective numbers aligned).
  uint64_t sequence = 0;
  std::string group;  // e.g. "WORLD" or "group(0,2)"
  DType dtype = kFloat32;
  Shape shape;
  ReduceOp op = ReduceOp::Sum;
  int peer = -1;  // root or peer rank, when there is one
  int tag = -1;   // send/recv only
  // Submitted inside an OverlapScope to a backend that then posts it non-blocking (MPI's
  // all-reduce): such a collective matches only the same on the other ranks.
  bool non_blocking = false;
  // "all_reduce #17 (sum) on WORLD, float32 [1024]"; "recv #2 on WORLD, float32 [8], from rank 1, tag 5"
  std::string describe() const;
  // A collective's description (`tensor` may be null, as for a barrier).
  static CollectiveInfo of(CollectiveKind kind, uint64_t sequence, const std::string& group, const Tensor* tensor,
                           ReduceOp op = ReduceOp::Sum, int peer = -1, int tag = -1);
};

class Work {
 public:
  virtual ~Work() = default;
  // Raises ember::Error if the collective failed, or did not finish within an explicit `timeout`.
  // With a timeout it blocks the host until the collective finished. Without one, the MPI backend
  // blocks too; the NCCL backend instead makes the caller's current stream wait for the collective
  // (later work on it, including reading the result back, comes after) and returns at once, as
  // PyTorch's does. A collective that never finishes is left to the backend's watchdog, which
  // names it and ends the job after EMBER_COLLECTIVE_TIMEOUT.
  virtual void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) = 0;
  virtual bool is_completed() const = 0;
  // Empty while running or after success; the failure text otherwise.
  virtual std::string error() const = 0;
  virtual const CollectiveInfo& info() const = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// Collectives submitted by this thread while an OverlapScope lives are meant to run while the
// thread goes on computing (DDP's bucket all-reduces during backward): a backend starts them at
// once. Outside one, a backend may leave a collective for the caller's wait() to run inline,
// which is what a submit-then-wait caller wants. Scopes nest. The MPI backend posts an
// all-reduce, a reduce_scatter_tensor or an all_gather_into_tensor submitted in a scope as a
// non-blocking MPI collective, which MPI matches only with non-blocking ones: every rank must
// submit a given one inside a scope, or every rank outside one (DDP's buckets, sharded data
// parallelism's gradient buckets and unit gathers, and Join's shadows all are inside;
// EMBER_DISTRIBUTED_DEBUG=1 names a rank that does not, as a collective mismatch).
class OverlapScope {
 public:
  OverlapScope();
  ~OverlapScope();
  OverlapScope(const OverlapScope&) = delete;
  OverlapScope& operator=(const OverlapScope&) = delete;
  static bool active();
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // The world ranks of this group's members, in group-rank order.
  virtual std::vector<int> world_ranks() const = 0;

  // All tensors are contiguous CPU tensors (or device tensors the backend supports) and are
  // written in place. Avg is defined for floating dtypes only.
  virtual WorkPtr all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  virtual WorkPtr broadcast(const Tensor& tensor, int root) = 0;
  // The result lands on `root` only; other ranks' tensors are left unspecified.
  virtual WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum) = 0;
  // outputs[r] receives rank r's input; outputs.size() == size().
  virtual WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output is size() inputs concatenated along dim 0.
  virtual WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input) = 0;
  // output = reduction over ranks of inputs[rank]; inputs.size() == size().
  virtual WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                 ReduceOp op = ReduceOp::Sum) = 0;
  // input is size() equal chunks along dim 0; this rank gets the reduction of its chunk.
  virtual WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum) = 0;
  // outputs[r] receives inputs[rank] of rank r.
  virtual WorkPtr all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) = 0;
  // Equal chunks along dim 0: chunk r of input goes to rank r, chunk r of output comes from it.
  virtual WorkPtr all_to_all_single(const Tensor& output, const Tensor& input) = 0;
  // Point-to-point: the k-th send to a peer with a tag matches that peer's k-th recv from this rank
  // with that tag. Both are subject to EMBER_COLLECTIVE_TIMEOUT from when they are posted; with
  // EMBER_DISTRIBUTED_DEBUG=1 the receiver checks the sender's dtype and shape against its own.
  virtual WorkPtr send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual WorkPtr recv(const Tensor& tensor, int src, int tag = 0) = 0;
  virtual WorkPtr barrier() = 0;

  // A sub-group of the given ranks of this group. Every rank of this group must call it with the
  // same list; ranks outside the list get nullptr.
  virtual std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) = 0;
};

// For backends' new_group: checks `ranks` against a group of `size` named `group` (non-empty,
// in range, no repeats) and returns this rank's position in it, or -1 when it is not a member.
int new_group_position(const std::vector<int>& ranks, int rank, int size, const std::string& group);
// "group(0,2)", from the members' world ranks.
std::string sub_group_name(const std::vector<int>& world_ranks);

// "5.0 s": how timeouts are named in every backend's messages.
std::string format_seconds(std::chrono::milliseconds ms);
// The collective timeout from EMBER_COLLECTIVE_TIMEOUT (seconds; default 600).
std::chrono::milliseconds collective_timeout();
// True when EMBER_DISTRIBUTED_DEBUG=1.
bool distributed_debug();

// Every backend's watchdog line for a collective or send/recv that outlived `timeout`.
std::string timed_out_message(const CollectiveInfo& info, std::chrono::milliseconds timeout);
// What a rank prints when its launcher stops it while `oldest` (a description) and `others` (newer
// ones, oldest first) had not finished; ends with a newline.
std::string terminated_message(int rank, const std::string& oldest, const std::vector<std::string>& others = {});

}  // namespace ember::comm

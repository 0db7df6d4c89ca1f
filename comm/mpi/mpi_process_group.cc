// The collectives. Each validates on the caller's thread (so misuse raises at the call site),
// then hands a closure of blocking MPI calls to the communication thread.
#include "comm/mpi/mpi_process_group.h"

#include <cstring>

#include "comm/host_backend.h"
#include "comm/mpi/mpi_types.h"
#include "comm/mpi/runtime.h"
#include "comm/signature.h"
#include "comm/staging.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm::mpi {

namespace {

// A contiguous CPU buffer for `t` (see comm/staging.h).
Staged stage(const Tensor& t, bool write_back, const char* op) {
  EMBER_CHECK(t.defined(), op, ": got an undefined tensor");
  EMBER_CHECK(t.device().is_cpu(), op, ": the MPI backend takes CPU tensors, got one on ", t.device().str());
  return comm::stage(t, write_back);
}

int count_of(const Tensor& t, const char* op) {
  EMBER_CHECK(t.numel() <= INT32_MAX, op, ": tensors above 2^31 elements are not supported by MPI counts, got ",
              t.numel());
  return static_cast<int>(t.numel());
}

// A duplicate of `comm` for debug-mode send/recv signatures, or MPI_COMM_NULL without debug
// (collective over `comm`: on the communication thread).
MPI_Comm make_check_comm(MPI_Comm comm) {
  MPI_Comm check = MPI_COMM_NULL;
  if (!distributed_debug() || comm == MPI_COMM_NULL) return check;
  MPI_Comm_dup(comm, &check);
  MPI_Comm_set_errhandler(check, MPI_ERRORS_RETURN);
  return check;
}

}  // namespace

std::shared_ptr<MpiProcessGroup> MpiProcessGroup::world() {
  Runtime& runtime = Runtime::get();
  MPI_Comm comm = MPI_COMM_NULL, check = MPI_COMM_NULL;
  runtime.run_sync([&] {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    check = make_check_comm(comm);
  });
  std::vector<int> ranks(runtime.world_size());
  for (int r = 0; r < runtime.world_size(); ++r) ranks[r] = r;
  return std::make_shared<MpiProcessGroup>(comm, check, "WORLD", ranks);
}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, MPI_Comm check_comm, std::string name, std::vector<int> world_ranks)
    : comm_(comm), check_comm_(check_comm), name_(std::move(name)), world_ranks_(std::move(world_ranks)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiProcessGroup::~MpiProcessGroup() = default;  // communicators are released by MPI_Finalize

void MpiProcessGroup::check_rank(int r, const char* what, const char* op) const {
  EMBER_CHECK(r >= 0 && r < size_, op, " on ", name_, ": ", what, " rank ", r, " is outside the group of size ", size_);
}

CollectiveInfo MpiProcessGroup::info(CollectiveKind kind, const Tensor* tensor, ReduceOp op, int peer) {
  return CollectiveInfo::of(kind, ++sequence_, name_, tensor, op, peer);
}

CollectiveInfo MpiProcessGroup::p2p_info(CollectiveKind kind, const Tensor& tensor, int peer, int tag) {
  uint64_t sequence = 0;
  {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    sequence = ++p2p_sequence_[{kind, peer, tag}];
  }
  return CollectiveInfo::of(kind, sequence, name_, &tensor, ReduceOp::Sum, peer, tag);
}

void MpiProcessGroup::fail_mpi(const CollectiveInfo& info, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  EMBER_FAIL("rank ", rank_, " of ", name_, ": ", info.describe(), " failed in MPI: ", std::string(text, length),
             " (a peer rank may have died)");
}

void MpiProcessGroup::check_signatures(const CollectiveInfo& info) {
  Signature mine = signature_of(info);
  std::vector<Signature> all(size_);
  int rc = MPI_Allgather(&mine, sizeof(Signature), MPI_BYTE, all.data(), sizeof(Signature), MPI_BYTE, comm_);
  if (rc != MPI_SUCCESS) fail_mpi(info, rc);
  check_same_collective(info, all, rank_);
}

WorkPtr MpiProcessGroup::submit(CollectiveInfo info, std::function<void()> run) {
  bool check = distributed_debug();
  auto work = std::make_shared<MpiWork>(
      info,
      [this, info, run = std::move(run), check] {
        if (check) check_signatures(info);
        run();
        return std::vector<MPI_Request>();
      },
      nullptr, rank_);
  Runtime::get().submit(work, OverlapScope::active());
  return work;
}

WorkPtr MpiProcessGroup::submit_posted(CollectiveInfo info, std::function<MPI_Request()> post,
                                       std::function<void()> after) {
  bool check = distributed_debug();
  auto work = std::make_shared<MpiWork>(
      info,
      [this, info, post = std::move(post), check] {
        if (check) check_signatures(info);
        return std::vector<MPI_Request>{post()};
      },
      [this, info, after = std::move(after)](int code) {
        if (code != MPI_SUCCESS) fail_mpi(info, code);
        after();
      },
      rank_);
  Runtime::get().submit(work, /*prompt=*/true);
  return work;
}

WorkPtr MpiProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "all_reduce on ", name_,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage(tensor, true, "all_reduce");
  CollectiveInfo i = info(CollectiveKind::AllReduce, &tensor, op);
  int count = count_of(tensor, "all_reduce");
  auto after = [this, s, op] {
    if (op == ReduceOp::Avg) divide_by(s.buffer, size_);
    s.finish();
  };
  if (OverlapScope::active()) {
    i.non_blocking = true;  // EMBER_DISTRIBUTED_DEBUG names a rank that mixes the two kinds
    // Runs on the communication thread while the caller computes (DDP's buckets). A blocking
    // MPI_Allreduce there busy-polls for the peers on the very core the caller computes on
    // (mpirun binds a rank to one core): ResNet-20's DDP step ran 1.06x the step without
    // communication with buckets overlapped, 1.00x with one bucket after backward. Not every
    // all-reduce: Open MPI's non-blocking one ran at half the blocking one's bandwidth, and MPI
    // matches a non-blocking collective only with non-blocking ones on the other ranks.
    return submit_posted(
        i,
        [this, s, op, count, i] {
          MPI_Request request;
          int rc = MPI_Iallreduce(MPI_IN_PLACE, s.data(), count, datatype_of(s.buffer.dtype()),
                                  op_of(op, s.buffer.dtype()), comm_, &request);
          if (rc != MPI_SUCCESS) fail_mpi(i, rc);
          return request;
        },
        after);
  }
  return submit(i, [this, s, op, count, i, after] {
    int rc =
        MPI_Allreduce(MPI_IN_PLACE, s.data(), count, datatype_of(s.buffer.dtype()), op_of(op, s.buffer.dtype()), comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    after();
  });
}

WorkPtr MpiProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_rank(root, "root", "broadcast");
  Staged s = stage(tensor, true, "broadcast");
  CollectiveInfo i = info(CollectiveKind::Broadcast, &tensor, ReduceOp::Sum, root);
  int count = count_of(tensor, "broadcast");
  return submit(i, [this, s, root, count, i] {
    int rc = MPI_Bcast(s.data(), count, datatype_of(s.buffer.dtype()), root, comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    s.finish();
  });
}

WorkPtr MpiProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  check_rank(root, "root", "reduce");
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "reduce on ", name_,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage(tensor, true, "reduce");
  CollectiveInfo i = info(CollectiveKind::Reduce, &tensor, op, root);
  int count = count_of(tensor, "reduce");
  return submit(i, [this, s, root, op, count, i] {
    void* send = rank_ == root ? MPI_IN_PLACE : s.data();
    void* recv = rank_ == root ? s.data() : nullptr;
    int rc = MPI_Reduce(send, recv, count, datatype_of(s.buffer.dtype()), op_of(op, s.buffer.dtype()), root, comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    if (op == ReduceOp::Avg && rank_ == root) divide_by(s.buffer, size_);
    s.finish();
  });
}

WorkPtr MpiProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  EMBER_CHECK(output.dtype() == input.dtype(), "all_gather_into_tensor on ", name_, ": output dtype ",
              dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  EMBER_CHECK(output.numel() == input.numel() * size_, "all_gather_into_tensor on ", name_, ": expected an output of ",
              input.numel() * size_, " elements (", size_, " x input ", shape_str(input.sizes()), "), got ",
              shape_str(output.sizes()));
  Staged in = stage(input, false, "all_gather_into_tensor");
  Staged out = stage(output, true, "all_gather_into_tensor");
  CollectiveInfo i = info(CollectiveKind::AllGatherIntoTensor, &input);
  int count = count_of(input, "all_gather_into_tensor");
  if (OverlapScope::active()) {
    // Fully sharded units gathered ahead of their use: posted, as all_reduce's are.
    i.non_blocking = true;
    return submit_posted(
        i,
        [this, in, out, count, i] {
          MPI_Request request;
          MPI_Datatype type = datatype_of(in.buffer.dtype());
          int rc = MPI_Iallgather(in.data(), count, type, out.data(), count, type, comm_, &request);
          if (rc != MPI_SUCCESS) fail_mpi(i, rc);
          return request;
        },
        [out] { out.finish(); });
  }
  return submit(i, [this, in, out, count, i] {
    MPI_Datatype type = datatype_of(in.buffer.dtype());
    int rc = MPI_Allgather(in.data(), count, type, out.data(), count, type, comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    out.finish();
  });
}

WorkPtr MpiProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  EMBER_CHECK(static_cast<int>(outputs.size()) == size_, "all_gather on ", name_, ": expected ", size_,
              " output tensors, got ", outputs.size());
  for (const Tensor& o : outputs)
    EMBER_CHECK(o.sizes() == input.sizes() && o.dtype() == input.dtype(), "all_gather on ", name_,
                ": every output must match the input ", dtype_name(input.dtype()), " ", shape_str(input.sizes()),
                ", got ", dtype_name(o.dtype()), " ", shape_str(o.sizes()));
  Shape flat_shape = input.sizes();
  flat_shape.insert(flat_shape.begin(), size_);
  Tensor flat = empty(flat_shape, input.options());
  Staged in = stage(input, false, "all_gather");
  CollectiveInfo i = info(CollectiveKind::AllGather, &input);
  int count = count_of(input, "all_gather");
  return submit(i, [this, in, flat, outputs, count, i] {
    MPI_Datatype type = datatype_of(in.buffer.dtype());
    int rc = MPI_Allgather(in.data(), count, type, flat.data_ptr(), count, type, comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    NoGradGuard no_grad;
    for (int r = 0; r < size_; ++r) copy_into(outputs[r], flat.select(0, r));
  });
}

WorkPtr MpiProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  EMBER_CHECK(output.dtype() == input.dtype(), "reduce_scatter_tensor on ", name_, ": output dtype ",
              dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  EMBER_CHECK(input.numel() == output.numel() * size_, "reduce_scatter_tensor on ", name_, ": expected an input of ",
              output.numel() * size_, " elements (", size_, " x output ", shape_str(output.sizes()), "), got ",
              shape_str(input.sizes()));
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(input.dtype()), "reduce_scatter_tensor on ", name_,
              ": avg needs a floating tensor");
  Staged in = stage(input, false, "reduce_scatter_tensor");
  Staged out = stage(output, true, "reduce_scatter_tensor");
  CollectiveInfo i = info(CollectiveKind::ReduceScatterTensor, &output, op);
  int count = count_of(output, "reduce_scatter_tensor");
  if (OverlapScope::active()) {
    // Sharded data parallelism's gradient buckets, while backward computes: posted for the
    // reason all_reduce's are (a blocking one busy-polls the caller's core).
    i.non_blocking = true;
    return submit_posted(
        i,
        [this, in, out, op, count, i] {
          MPI_Request request;
          DType dtype = in.buffer.dtype();
          int rc = MPI_Ireduce_scatter_block(in.data(), out.data(), count, datatype_of(dtype), op_of(op, dtype), comm_,
                                             &request);
          if (rc != MPI_SUCCESS) fail_mpi(i, rc);
          return request;
        },
        [this, in, out, op] {
          if (op == ReduceOp::Avg) divide_by(out.buffer, size_);
          out.finish();
        });
  }
  return submit(i, [this, in, out, op, count, i] {
    DType dtype = in.buffer.dtype();
    int rc = MPI_Reduce_scatter_block(in.data(), out.data(), count, datatype_of(dtype), op_of(op, dtype), comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    if (op == ReduceOp::Avg) divide_by(out.buffer, size_);
    out.finish();
  });
}

WorkPtr MpiProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  EMBER_CHECK(static_cast<int>(inputs.size()) == size_, "reduce_scatter on ", name_, ": expected ", size_,
              " input tensors, got ", inputs.size());
  for (const Tensor& t : inputs)
    EMBER_CHECK(t.sizes() == output.sizes() && t.dtype() == output.dtype(), "reduce_scatter on ", name_,
                ": every input must match the output ", dtype_name(output.dtype()), " ", shape_str(output.sizes()),
                ", got ", dtype_name(t.dtype()), " ", shape_str(t.sizes()));
  Tensor packed = stack(inputs);
  return reduce_scatter_tensor(output, packed, op);
}

WorkPtr MpiProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input) {
  EMBER_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel(), "all_to_all_single on ", name_,
              ": output and input must have the same dtype and size, got ", dtype_name(output.dtype()), " ",
              shape_str(output.sizes()), " and ", dtype_name(input.dtype()), " ", shape_str(input.sizes()));
  EMBER_CHECK(input.numel() % size_ == 0, "all_to_all_single on ", name_, ": ", input.numel(),
              " elements cannot be split into ", size_, " equal chunks");
  Staged in = stage(input, false, "all_to_all_single");
  Staged out = stage(output, true, "all_to_all_single");
  CollectiveInfo i = info(CollectiveKind::AllToAllSingle, &input);
  int chunk = count_of(input, "all_to_all_single") / size_;
  return submit(i, [this, in, out, chunk, i] {
    MPI_Datatype type = datatype_of(in.buffer.dtype());
    int rc = MPI_Alltoall(in.data(), chunk, type, out.data(), chunk, type, comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    out.finish();
  });
}

WorkPtr MpiProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_, "all_to_all on ",
              name_, ": expected ", size_, " inputs and outputs, got ", inputs.size(), " and ", outputs.size());
  for (int r = 0; r < size_; ++r)
    EMBER_CHECK(inputs[r].sizes() == inputs[0].sizes() && outputs[r].sizes() == inputs[0].sizes() &&
                    inputs[r].dtype() == inputs[0].dtype() && outputs[r].dtype() == inputs[0].dtype(),
                "all_to_all on ", name_, ": all inputs and outputs must share one dtype and shape (",
                dtype_name(inputs[0].dtype()), " ", shape_str(inputs[0].sizes()), ")");
  Tensor packed_in = stack(inputs);
  Tensor packed_out = empty(packed_in.sizes(), packed_in.options());
  WorkPtr inner = all_to_all_single(packed_out, packed_in);
  // Unpack on the communication thread, after the exchange, in submission order.
  CollectiveInfo i = inner->info();
  auto work = std::make_shared<MpiWork>(
      i,
      [packed_out, outputs, inner] {
        inner->wait(collective_timeout());
        NoGradGuard no_grad;
        for (size_t r = 0; r < outputs.size(); ++r)
          copy_into(outputs[r], packed_out.select(0, static_cast<int64_t>(r)));
        return std::vector<MPI_Request>();
      },
      nullptr, rank_);
  Runtime::get().submit(work, OverlapScope::active());
  return work;
}

std::vector<MPI_Request> MpiProcessGroup::post_p2p(const CollectiveInfo& i, void* signature, void* data, int count,
                                                   DType dtype) {
  auto post = [&](void* buffer, int n, MPI_Datatype type, MPI_Comm comm) {
    MPI_Request request;
    int rc = i.kind == CollectiveKind::Send ? MPI_Isend(buffer, n, type, i.peer, i.tag, comm, &request)
                                            : MPI_Irecv(buffer, n, type, i.peer, i.tag, comm, &request);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    return request;
  };
  std::vector<MPI_Request> requests;
  if (check_comm_ != MPI_COMM_NULL) requests.push_back(post(signature, sizeof(Signature), MPI_BYTE, check_comm_));
  requests.push_back(post(data, count, datatype_of(dtype), comm_));
  return requests;
}

// With EMBER_DISTRIBUTED_DEBUG each send is preceded by its signature on check_comm_ (same peer
// and tag, so the k-th signature pairs with the k-th message); the receiver compares it with
// its own once both arrived and names the difference. Nothing blocks on the exchange.
WorkPtr MpiProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_rank(dst, "destination", "send");
  EMBER_CHECK(dst != rank_, "send on ", name_, ": rank ", rank_, " cannot send to itself");
  EMBER_CHECK(tag >= 0, "send on ", name_, ": the tag must be non-negative, got ", tag);
  Staged s = stage(tensor, false, "send");
  CollectiveInfo i = p2p_info(CollectiveKind::Send, tensor, dst, tag);
  int count = count_of(tensor, "send");
  auto signature = std::make_shared<Signature>(signature_of(i));
  auto work = std::make_shared<MpiWork>(
      i, [this, s, count, i, signature] { return post_p2p(i, signature.get(), s.data(), count, s.buffer.dtype()); },
      [this, i, signature](int code) {
        if (code != MPI_SUCCESS) fail_mpi(i, code);
      },
      rank_);
  Runtime::get().submit(work, /*prompt=*/true);
  return work;
}

WorkPtr MpiProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  check_rank(src, "source", "recv");
  EMBER_CHECK(src != rank_, "recv on ", name_, ": rank ", rank_, " cannot receive from itself");
  EMBER_CHECK(tag >= 0, "recv on ", name_, ": the tag must be non-negative, got ", tag);
  Staged s = stage(tensor, true, "recv");
  CollectiveInfo i = p2p_info(CollectiveKind::Recv, tensor, src, tag);
  int count = count_of(tensor, "recv");
  auto theirs = std::make_shared<Signature>();
  std::memset(theirs.get(), 0, sizeof(Signature));
  auto work = std::make_shared<MpiWork>(
      i, [this, s, count, i, theirs] { return post_p2p(i, theirs.get(), s.data(), count, s.buffer.dtype()); },
      [this, s, i, theirs](int code) {
        // A larger send also fails the data receive (truncation): the signatures explain it better.
        const bool arrived = theirs->kind == static_cast<int32_t>(CollectiveKind::Send) && theirs->sequence > 0;
        if (check_comm_ != MPI_COMM_NULL && arrived) check_sent_payload(i, *theirs, rank_);
        if (code != MPI_SUCCESS) fail_mpi(i, code);
        s.finish();
      },
      rank_);
  Runtime::get().submit(work, /*prompt=*/true);
  return work;
}

WorkPtr MpiProcessGroup::barrier() {
  CollectiveInfo i = info(CollectiveKind::Barrier, nullptr);
  return submit(i, [this, i] {
    int rc = MPI_Barrier(comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
  });
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::new_group(const std::vector<int>& ranks) {
  const int position = new_group_position(ranks, rank_, size_, name_);
  MPI_Comm comm = MPI_COMM_NULL, check = MPI_COMM_NULL;
  CollectiveInfo i = info(CollectiveKind::Barrier, nullptr);
  i.group = name_ + " (new_group)";
  WorkPtr work = submit(i, [&] {
    int rc = MPI_Comm_split(comm_, position >= 0 ? 0 : MPI_UNDEFINED, position, &comm);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    check = make_check_comm(comm);
  });
  work->wait(collective_timeout());
  if (position < 0) return nullptr;
  std::vector<int> world;
  for (int r : ranks) world.push_back(world_ranks_[r]);
  return std::make_shared<MpiProcessGroup>(comm, check, sub_group_name(world), world);
}

// Linking //comm/mpi is what lets comm::init() make an MPI world (and abort_job() end every rank).
namespace {
const bool registered = [] {
  HostBackend backend;
  backend.world = [](const LaunchEnvironment&, const std::shared_ptr<Store>&) -> std::shared_ptr<ProcessGroup> {
    return MpiProcessGroup::world();
  };
  backend.abort_job = [](const std::string& message, int status) {
    if (Runtime::started()) Runtime::get().abort(message, status);  // never starts MPI just to abort
  };
  register_host_backend("mpi", std::move(backend));
  return true;
}();
}  // namespace

}  // namespace ember::comm::mpi

// The collectives. Each validates on the caller's thread (so misuse raises at the call site),
// then hands a closure of blocking MPI calls to the communication thread.
#include "comm/mpi/mpi_process_group.h"

#include <cstring>
#include <sstream>

#include "comm/mpi/mpi_types.h"
#include "comm/mpi/runtime.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm::mpi {

namespace {

// A contiguous CPU buffer for `t`: t itself when it already is one, else a copy that
// `write_back` returns to t afterwards.
struct Staged {
  Tensor original;
  Tensor buffer;
  bool write_back = false;
  void* data() const { return buffer.data_ptr(); }
  void finish() const {
    if (write_back) {
      NoGradGuard no_grad;
      copy_into(original, buffer);
    }
  }
};

Staged stage(const Tensor& t, bool write_back, const char* op) {
  EMBER_CHECK(t.defined(), op, ": got an undefined tensor");
  EMBER_CHECK(t.device().is_cpu(), op, ": the MPI backend takes CPU tensors, got one on ", t.device().str());
  Staged s;
  s.original = t;
  if (t.is_contiguous()) {
    s.buffer = t.detach();
  } else {
    NoGradGuard no_grad;
    s.buffer = t.detach().contiguous();
    s.write_back = write_back;
  }
  return s;
}

int count_of(const Tensor& t, const char* op) {
  EMBER_CHECK(t.numel() <= INT32_MAX, op, ": tensors above 2^31 elements are not supported by MPI counts, got ",
              t.numel());
  return static_cast<int>(t.numel());
}

// Divides in place after a sum, turning it into the average.
void divide(const Tensor& t, int size) {
  NoGradGuard no_grad;
  Tensor view = t.detach();
  view.div_(scalar_tensor(static_cast<double>(size), t.dtype()));
}

// Fixed-size description exchanged in debug mode.
struct Signature {
  int32_t kind, op, dtype, ndim;
  int64_t shape[8];
  int64_t numel;
  int32_t peer, pad;
  uint64_t sequence;
};

Signature signature_of(const CollectiveInfo& info) {
  Signature s;
  std::memset(&s, 0, sizeof(s));
  s.kind = static_cast<int32_t>(info.kind);
  s.op = static_cast<int32_t>(info.op);
  s.dtype = static_cast<int32_t>(info.dtype);
  s.ndim = static_cast<int32_t>(info.shape.size());
  for (size_t i = 0; i < info.shape.size() && i < 8; ++i) s.shape[i] = info.shape[i];
  s.numel = shape_numel(info.shape);
  s.peer = info.peer;
  s.sequence = info.sequence;
  return s;
}

std::string describe_signature(const Signature& s, const std::string& group) {
  CollectiveInfo info;
  info.kind = static_cast<CollectiveKind>(s.kind);
  info.op = static_cast<ReduceOp>(s.op);
  info.dtype = static_cast<DType>(s.dtype);
  for (int i = 0; i < s.ndim && i < 8; ++i) info.shape.push_back(s.shape[i]);
  info.peer = s.peer;
  info.sequence = s.sequence;
  info.group = group;
  return info.describe();
}

}  // namespace

std::shared_ptr<MpiProcessGroup> MpiProcessGroup::world() {
  Runtime& runtime = Runtime::get();
  MPI_Comm comm = MPI_COMM_NULL;
  runtime.run_sync([&] {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  });
  std::vector<int> ranks(runtime.world_size());
  for (int r = 0; r < runtime.world_size(); ++r) ranks[r] = r;
  return std::make_shared<MpiProcessGroup>(comm, "WORLD", ranks);
}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, std::string name, std::vector<int> world_ranks)
    : comm_(comm), name_(std::move(name)), world_ranks_(std::move(world_ranks)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiProcessGroup::~MpiProcessGroup() = default;  // communicators are released by MPI_Finalize

void MpiProcessGroup::check_rank(int r, const char* what, const char* op) const {
  EMBER_CHECK(r >= 0 && r < size_, op, " on ", name_, ": ", what, " rank ", r, " is outside the group of size ", size_);
}

CollectiveInfo MpiProcessGroup::info(CollectiveKind kind, const Tensor* tensor, ReduceOp op, int peer) {
  CollectiveInfo i;
  i.kind = kind;
  i.sequence = ++sequence_;
  i.group = name_;
  if (tensor) {
    i.dtype = tensor->dtype();
    i.shape = tensor->sizes();
  }
  i.op = op;
  i.peer = peer;
  return i;
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
  for (int r = 0; r < size_; ++r) {
    if (std::memcmp(&all[r], &mine, sizeof(Signature)) == 0) continue;
    EMBER_FAIL("collective mismatch on ", name_, ": rank ", rank_, " called ", info.describe(), " but rank ", r,
               " called ", describe_signature(all[r], name_),
               " (ranks must issue the same collectives, in the same order, with the same shapes)");
  }
}

WorkPtr MpiProcessGroup::submit(CollectiveInfo info, std::function<void()> run) {
  bool check = distributed_debug() && info.kind != CollectiveKind::Send && info.kind != CollectiveKind::Recv;
  auto work = std::make_shared<MpiWork>(
      info,
      [this, info, run = std::move(run), check] {
        if (check) check_signatures(info);
        run();
        return MPI_REQUEST_NULL;
      },
      nullptr, rank_);
  Runtime::get().submit(work);
  return work;
}

WorkPtr MpiProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "all_reduce on ", name_,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage(tensor, true, "all_reduce");
  CollectiveInfo i = info(CollectiveKind::AllReduce, &tensor, op);
  int count = count_of(tensor, "all_reduce");
  return submit(i, [this, s, op, count, i] {
    int rc = MPI_Allreduce(MPI_IN_PLACE, s.data(), count, datatype_of(s.buffer.dtype()), op_of(op, s.buffer.dtype()), comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    if (op == ReduceOp::Avg) divide(s.buffer, size_);
    s.finish();
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
    if (op == ReduceOp::Avg && rank_ == root) divide(s.buffer, size_);
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
  return submit(i, [this, in, out, op, count, i] {
    DType dtype = in.buffer.dtype();
    int rc = MPI_Reduce_scatter_block(in.data(), out.data(), count, datatype_of(dtype), op_of(op, dtype), comm_);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    if (op == ReduceOp::Avg) divide(out.buffer, size_);
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
        for (size_t r = 0; r < outputs.size(); ++r) copy_into(outputs[r], packed_out.select(0, static_cast<int64_t>(r)));
        return MPI_REQUEST_NULL;
      },
      nullptr, rank_);
  Runtime::get().submit(work);
  return work;
}

WorkPtr MpiProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_rank(dst, "destination", "send");
  EMBER_CHECK(dst != rank_, "send on ", name_, ": rank ", rank_, " cannot send to itself");
  Staged s = stage(tensor, false, "send");
  CollectiveInfo i = info(CollectiveKind::Send, &tensor, ReduceOp::Sum, dst);
  int count = count_of(tensor, "send");
  auto work = std::make_shared<MpiWork>(
      i,
      [this, s, dst, tag, count, i] {
        MPI_Request request;
        int rc = MPI_Isend(s.data(), count, datatype_of(s.buffer.dtype()), dst, tag, comm_, &request);
        if (rc != MPI_SUCCESS) fail_mpi(i, rc);
        return request;
      },
      nullptr, rank_);
  Runtime::get().submit(work);
  return work;
}

WorkPtr MpiProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  check_rank(src, "source", "recv");
  EMBER_CHECK(src != rank_, "recv on ", name_, ": rank ", rank_, " cannot receive from itself");
  Staged s = stage(tensor, true, "recv");
  CollectiveInfo i = info(CollectiveKind::Recv, &tensor, ReduceOp::Sum, src);
  int count = count_of(tensor, "recv");
  auto work = std::make_shared<MpiWork>(
      i,
      [this, s, src, tag, count, i] {
        MPI_Request request;
        int rc = MPI_Irecv(s.data(), count, datatype_of(s.buffer.dtype()), src, tag, comm_, &request);
        if (rc != MPI_SUCCESS) fail_mpi(i, rc);
        return request;
      },
      [s] { s.finish(); }, rank_);
  Runtime::get().submit(work);
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
  EMBER_CHECK(!ranks.empty(), "new_group on ", name_, ": the rank list is empty");
  std::vector<bool> seen(size_, false);
  for (int r : ranks) {
    check_rank(r, "member", "new_group");
    EMBER_CHECK(!seen[r], "new_group on ", name_, ": rank ", r, " is listed twice");
    seen[r] = true;
  }
  int position = -1;
  for (size_t k = 0; k < ranks.size(); ++k)
    if (ranks[k] == rank_) position = static_cast<int>(k);
  MPI_Comm comm = MPI_COMM_NULL;
  CollectiveInfo i = info(CollectiveKind::Barrier, nullptr);
  i.group = name_ + " (new_group)";
  WorkPtr work = submit(i, [&] {
    int rc = MPI_Comm_split(comm_, position >= 0 ? 0 : MPI_UNDEFINED, position, &comm);
    if (rc != MPI_SUCCESS) fail_mpi(i, rc);
    if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  });
  work->wait(collective_timeout());
  if (position < 0) return nullptr;
  std::ostringstream name;
  name << "group(";
  std::vector<int> world;
  for (size_t k = 0; k < ranks.size(); ++k) {
    name << (k ? "," : "") << world_ranks_[ranks[k]];
    world.push_back(world_ranks_[ranks[k]]);
  }
  name << ")";
  return std::make_shared<MpiProcessGroup>(comm, name.str(), world);
}

}  // namespace ember::comm::mpi

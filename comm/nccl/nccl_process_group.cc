// The communicator's life (joining, bounded; destroying; aborting), the Work, launch() (the
// stream ordering every collective shares), debug-mode signature checks and sub-groups.
#include "comm/nccl/nccl_process_group.h"

#include <condition_variable>
#include <cstring>
#include <optional>
#include <thread>

#include "comm/init.h"
#include "comm/nccl/nccl_types.h"
#include "comm/staging.h"
#include "comm/nccl/watchdog.h"
#include "comm/signature.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/profiler.h"

namespace ember::comm::nccl {

namespace {

// Set once the process is exiting: communicators left in globals are not destroyed then, since
// the CUDA runtime (or the emulator) may already be gone.
std::atomic<bool> exiting{false};

// Joins the communicator on a helper thread, so that a rank that never arrives ends the job with
// a message instead of leaving this one blocked in NCCL forever.
ncclComm_t join_bounded(const DeviceGroupSpec& spec, const ncclUniqueId& id) {
  struct Join {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t result = ncclSuccess;
    ncclComm_t comm = nullptr;
  };
  auto join = std::make_shared<Join>();
  const int device = spec.device.index;
  std::thread([join, device, id, size = spec.size, rank = spec.rank] {
    cudaSetDevice(device);
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclCommInitRank(&comm, size, id, rank);
    std::lock_guard<std::mutex> lock(join->mutex);
    join->result = result;
    join->comm = comm;
    join->done = true;
    join->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(join->mutex);
  if (!join->cv.wait_for(lock, collective_timeout(), [&] { return join->done; })) {
    abort_job("the NCCL communicator of " + spec.name + " (rank " + std::to_string(spec.rank) + " of " +
              std::to_string(spec.size) + ", cuda:" + std::to_string(device) + ") did not form within " +
              format_seconds(collective_timeout()) +
              " (EMBER_COLLECTIVE_TIMEOUT): a rank never joined (did every rank "
              "start, and read the same unique id? a stale EMBER_NCCL_ID_FILE from an earlier job gives another)");
  }
  EMBER_CHECK(join->result == ncclSuccess, "comm: joining the NCCL communicator of ", spec.name, " as rank ", spec.rank,
              " of ", spec.size, " on cuda:", device, " failed: ", ncclGetErrorString(join->result), ": ",
              ncclGetLastError(nullptr));
  return join->comm;
}

}  // namespace

// ---- Communicator and work ----

Communicator::~Communicator() {
  if (aborted.load() || exiting.load() || comm == nullptr) return;
  cuda::DeviceGuard on(device);
  ncclCommDestroy(comm);
}

void Communicator::abort() {
  if (aborted.exchange(true)) return;
  ncclCommAbort(comm);
}

std::string Communicator::where() const {
  return "rank " + std::to_string(rank) + " of " + group + " on cuda:" + std::to_string(device);
}

NcclWork::NcclWork(CollectiveInfo info, std::shared_ptr<Communicator> comm, cuda::Event end, std::vector<Tensor> held,
                   bool host_blocking)
    : info_(std::move(info)),
      description_(info_.describe()),
      comm_(std::move(comm)),
      end_(std::move(end)),
      host_blocking_(host_blocking),
      started_(std::chrono::steady_clock::now()),
      held_(std::move(held)) {}

void NcclWork::complete() {
  std::vector<Tensor> release;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    release.swap(held_);
  }
}

void NcclWork::fail(const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.empty()) error_ = error;
}

std::string NcclWork::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool NcclWork::is_completed() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return true;
  }
  return end_.query();
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  std::string failed = error();
  EMBER_CHECK(failed.empty(), failed);
  const bool bounded = timeout.count() > 0;
  if (!bounded && !host_blocking_) {
    // Later work on the caller's stream runs after the collective; the host goes on.
    cuda::current_stream(comm_->device).wait(end_);
    return;
  }
  // Unbounded (a barrier), the watchdog is what ends a collective that never completes.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!end_.query()) {
    failed = error();
    EMBER_CHECK(failed.empty(), failed);
    EMBER_CHECK(!bounded || std::chrono::steady_clock::now() < deadline, comm_->where(), ": ", description_,
                " did not complete within ", format_seconds(timeout),
                " (a rank may have stopped issuing collectives, or issued them in a different order; run with "
                "EMBER_DISTRIBUTED_DEBUG=1 to compare the ranks' collectives)");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  cuda::current_stream(comm_->device).wait(end_);
}

// ---- the group ----

std::shared_ptr<NcclProcessGroup> NcclProcessGroup::create(const DeviceGroupSpec& spec) {
  static const bool registered_exit = [] { return std::atexit([] { exiting.store(true); }) == 0; }();
  (void)registered_exit;
  EMBER_CHECK(spec.device.is_cuda(), "comm: an NCCL group needs a CUDA device, got ", spec.device.str());
  const int count = cuda::device_count();
  EMBER_CHECK(spec.device.index < count, "comm: rank ", spec.rank, " of ", spec.name, " needs ", spec.device.str(),
              " for its NCCL group, but this process sees ", count,
              " CUDA device(s) (each rank uses "
              "cuda:LOCAL_RANK; emulated devices come from EMBER_EMULATED_GPUS)");
  cuda::DeviceGuard on(spec.device.index);
  std::vector<uint8_t> bytes(sizeof(ncclUniqueId), 0);
  if (spec.rank == 0) {
    ncclUniqueId id;
    ncclResult_t result = ncclGetUniqueId(&id);
    EMBER_CHECK(result == ncclSuccess, "comm: ncclGetUniqueId failed on rank 0 of ", spec.name, ": ",
                ncclGetErrorString(result));
    std::memcpy(bytes.data(), &id, sizeof(id));
  }
  spec.share(bytes);
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof(id));
  ncclComm_t handle = join_bounded(spec, id);
  auto comm = std::make_shared<Communicator>(handle, spec.device.index, spec.rank, spec.size, spec.name,
                                             cuda::Stream::create(spec.device.index));
  return std::make_shared<NcclProcessGroup>(std::move(comm), spec.world_ranks);
}

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<Communicator> comm, std::vector<int> world_ranks)
    : comm_(std::move(comm)), world_ranks_(std::move(world_ranks)) {}

CollectiveInfo NcclProcessGroup::info(CollectiveKind kind, const Tensor* tensor, ReduceOp op, int peer) {
  return CollectiveInfo::of(kind, ++sequence_, comm_->group, tensor, op, peer);
}

// Numbered per direction and peer: NCCL pairs the k-th send to a peer with its k-th recv from us.
CollectiveInfo NcclProcessGroup::p2p_info(CollectiveKind kind, const Tensor& tensor, int peer, int tag) {
  uint64_t sequence = 0;
  {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    sequence = ++p2p_sequence_[{kind, peer, 0}];
  }
  return CollectiveInfo::of(kind, sequence, comm_->group, &tensor, ReduceOp::Sum, peer, tag);
}

void NcclProcessGroup::check(const CollectiveInfo& info, ncclResult_t result) const {
  if (result == ncclSuccess || result == ncclInProgress) return;
  EMBER_FAIL(comm_->where(), ": ", info.describe(), " failed in NCCL: ", ncclGetErrorString(result), ": ",
             ncclGetLastError(comm_->comm));
}

void NcclProcessGroup::check_tensor(const Tensor& t, const char* op) const {
  EMBER_CHECK(t.defined(), op, " on ", comm_->group, ": got an undefined tensor");
  EMBER_CHECK(t.device() == device(), op, " on ", comm_->group, ": rank ", comm_->rank,
              "'s NCCL group is on cuda:", comm_->device, ", got a tensor on ", t.device().str(),
              t.device().is_cuda() ? " (each rank's tensors must be on its own device)"
                                   : " (the NCCL backend takes CUDA tensors; EMBER_BACKEND=cpu:mpi,cuda:nccl sends CPU "
                                     "tensors over MPI)");
}

void NcclProcessGroup::check_rank(int r, const char* what, const char* op) const {
  EMBER_CHECK(r >= 0 && r < comm_->size, op, " on ", comm_->group, ": ", what, " rank ", r,
              " is outside the group of size ", comm_->size);
}

WorkPtr NcclProcessGroup::launch(const CollectiveInfo& info, std::vector<Tensor> held, const Enqueue& enqueue,
                                 const std::function<void()>& after, bool host_blocking) {
  EMBER_CHECK(!comm_->aborted.load(), comm_->where(), ": ", info.describe(), ": the communicator was aborted");
  cuda::DeviceGuard on(comm_->device);
  const cuda::Stream& stream = comm_->stream;
  cuda::Event ready;
  ready.record(cuda::current_stream(comm_->device));
  stream.wait(ready);
  if (distributed_debug()) {
    // A mismatch fails the Work, as on MPI: every rank saw it, none queued the collective, and the
    // group stays usable.
    try {
      if (info.kind == CollectiveKind::Send || info.kind == CollectiveKind::Recv)
        exchange_p2p_signature(info);
      else
        check_signatures(info);
    } catch (const Error& e) {
      auto failed = std::make_shared<NcclWork>(info, comm_, cuda::Event(), std::vector<Tensor>{}, host_blocking);
      failed->fail(e.what());
      failed->complete();
      return failed;
    }
  }
  {
    // Timed on the communicator's stream by the device (made current for the profiler to find
    // it), named as the issuing thread's tag says.
    std::optional<cuda::StreamGuard> on_stream;
    std::optional<profiler::DeviceRange> timed;
    if (profiler::active()) {
      const std::string& tag = profiler::current_tag();
      on_stream.emplace(stream);
      timed.emplace(Device::cuda(comm_->device), "comm", tag.empty() ? info.describe() : tag + ": " + info.describe());
    }
    std::lock_guard<std::mutex> lock(comm_->enqueue_mutex);
    enqueue(stream.handle());
  }
  if (after) {
    cuda::StreamGuard on_stream(stream);
    NoGradGuard no_grad;
    after();
  }
  for (const Tensor& t : held) cuda::record_stream(t, stream);
  cuda::Event end;
  end.record(stream);
  auto work = std::make_shared<NcclWork>(info, comm_, end, std::move(held), host_blocking);
  Watchdog::get().watch(work);
  return work;
}

void NcclProcessGroup::check_signatures(const CollectiveInfo& info) {
  const int n = comm_->size;
  const Signature mine = signature_of(info);
  const int64_t bytes = sizeof(Signature);
  Tensor host_mine = empty({bytes}, TensorOptions(kUInt8));
  std::memcpy(host_mine.data_ptr(), &mine, sizeof(mine));
  std::vector<Signature> signatures(n);
  {
    cuda::StreamGuard on_stream(comm_->stream);
    Tensor device_mine = host_mine.to(device());
    Tensor all = empty({n * bytes}, TensorOptions(kUInt8).device(device()));
    {
      std::lock_guard<std::mutex> lock(comm_->enqueue_mutex);
      check(info, ncclAllGather(device_mine.data_ptr(), all.data_ptr(), bytes, ncclUint8, comm_->comm,
                                comm_->stream.handle()));
    }
    Tensor host_all = all.to(Device(kCPU));  // blocks until the exchange is done
    std::memcpy(signatures.data(), host_all.data_ptr(), sizeof(Signature) * n);
  }
  check_same_collective(info, signatures, comm_->rank);
}

void NcclProcessGroup::exchange_p2p_signature(const CollectiveInfo& info) {
  const int64_t bytes = sizeof(Signature);
  cuda::StreamGuard on_stream(comm_->stream);
  if (info.kind == CollectiveKind::Send) {
    Signature mine = signature_of(info);
    Tensor host = empty({bytes}, TensorOptions(kUInt8));
    std::memcpy(host.data_ptr(), &mine, sizeof(mine));
    Tensor sent = host.to(device());
    std::lock_guard<std::mutex> lock(comm_->enqueue_mutex);
    check(info, ncclSend(sent.data_ptr(), bytes, ncclUint8, info.peer, comm_->comm, comm_->stream.handle()));
    cuda::record_stream(sent, comm_->stream);
    return;
  }
  Tensor received = empty({bytes}, TensorOptions(kUInt8).device(device()));
  {
    std::lock_guard<std::mutex> lock(comm_->enqueue_mutex);
    check(info, ncclRecv(received.data_ptr(), bytes, ncclUint8, info.peer, comm_->comm, comm_->stream.handle()));
  }
  Tensor host = received.to(Device(kCPU));
  Signature theirs;
  std::memcpy(&theirs, host.data_ptr(), sizeof(theirs));
  if (!same_payload(theirs, signature_of(info)) || theirs.tag != info.tag) {
    // The sender's data is on its way regardless: take it into scratch, so that the next pair
    // between these ranks still matches and the group stays usable after the error.
    const DType sent_dtype = static_cast<DType>(theirs.dtype);
    Tensor scratch = empty({theirs.numel}, TensorOptions(sent_dtype).device(device()));
    std::lock_guard<std::mutex> lock(comm_->enqueue_mutex);
    check(info, ncclRecv(scratch.data_ptr(), theirs.numel, nccl_type(sent_dtype), info.peer, comm_->comm,
                         comm_->stream.handle()));
    cuda::record_stream(scratch, comm_->stream);
  }
  check_sent_payload(info, theirs, comm_->rank);
  EMBER_CHECK(theirs.tag == info.tag, "send/recv mismatch on ", comm_->group, ": rank ", comm_->rank, " called ",
              info.describe(), " but rank ", info.peer, " sent ", describe_signature(theirs, comm_->group),
              " (NCCL has no tags: sends and recvs between two ranks pair up in order, so their tags must agree too)");
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::new_group(const std::vector<int>& ranks) {
  const int position = new_group_position(ranks, comm_->rank, comm_->size, comm_->group);
  // The sub-group's first rank draws its id; every rank of this group takes part in handing it on.
  std::vector<uint8_t> id(sizeof(ncclUniqueId), 0);
  if (comm_->rank == ranks[0]) {
    ncclUniqueId fresh;
    ncclResult_t result = ncclGetUniqueId(&fresh);
    EMBER_CHECK(result == ncclSuccess, "new_group on ", comm_->group,
                ": ncclGetUniqueId failed: ", ncclGetErrorString(result));
    std::memcpy(id.data(), &fresh, sizeof(fresh));
  }
  share_from(*this, device(), ranks[0], id);
  if (position < 0) return nullptr;
  DeviceGroupSpec spec;
  spec.rank = position;
  spec.size = static_cast<int>(ranks.size());
  spec.device = device();
  for (int r : ranks) spec.world_ranks.push_back(world_ranks_[r]);
  spec.name = sub_group_name(spec.world_ranks);
  spec.share = [id](std::vector<uint8_t>& bytes) { bytes = id; };
  return create(spec);
}

// Linking //comm/nccl is what makes comm::init() send CUDA tensors over NCCL.
namespace {
const bool registered = [] {
  register_device_backend("nccl", [](const DeviceGroupSpec& spec) -> std::shared_ptr<ProcessGroup> {
    return NcclProcessGroup::create(spec);
  });
  return true;
}();
}  // namespace

}  // namespace ember::comm::nccl

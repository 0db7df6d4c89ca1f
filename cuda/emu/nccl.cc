// NCCL's C API on emulated devices: communicators, argument checks, groups and errors. Calls return
// at once; their work runs on the given stream (nccl_comm.cc, nccl_ops.cc).
#include "cuda/emu/nccl.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <map>

#include "cuda/emu/device.h"
#include "cuda/emu/nccl_comm.h"
#include "cuda/emu/nccl_reduce.h"

using namespace ember::emu;
using namespace ember::emu::nccl;

namespace {

thread_local std::string last_error;

// ncclGroupStart..ncclGroupEnd of the calling thread.
struct Group {
  int depth = 0;
  ncclResult_t error = ncclSuccess;
  std::vector<std::pair<std::shared_ptr<RankState>, Call>> calls;
  std::vector<std::shared_ptr<RankState>> inits;
};
thread_local Group group;

// Per communicator (by segment key): the last ungrouped operation this thread queued.
struct Driven {
  std::weak_ptr<RankState> state;
  uint64_t ticket;
};
thread_local std::map<uint64_t, Driven> driven;

ncclResult_t fail(ncclResult_t result, std::string message) {
  last_error = std::move(message);
  if (group.depth > 0 && group.error == ncclSuccess) group.error = result;
  return result;
}

std::string place_text(const RankPlace& p) {
  return "cuda:" + std::to_string(p.device) + " (rank " + std::to_string(p.rank) + " of " + std::to_string(p.nranks) +
         ")";
}

// NCCL checks that a buffer is device memory of the communicator's device; the emulator also
// checks that the bytes the call touches lie inside one live allocation.
std::string check_buffer(const void* ptr, size_t bytes, int device, const char* name) {
  if (bytes == 0 || device_at(device)->heap->holds_range(ptr, bytes)) return "";
  const std::string at = std::to_string(bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(ptr));
  for (Device* d : devices()) {
    if (!d->heap->contains(ptr)) continue;
    if (d->index != device)
      return std::string(name) + " is memory of cuda:" + std::to_string(d->index) +
             ", but the rank is on cuda:" + std::to_string(device);
    return std::string(name) + ": " + at + " are not inside one live allocation of cuda:" + std::to_string(device);
  }
  return std::string(name) + " (" + at +
         ") is not device memory: NCCL reads and writes buffers of the "
         "communicator's device";
}

// Overlapping buffers are fine only in NCCL's in-place layouts; anything else gives undefined
// results on a GPU.
bool overlap_allowed(const Call& c, int rank, size_t send_bytes, size_t recv_bytes) {
  const char* send = static_cast<const char*>(c.send);
  const char* recv = static_cast<const char*>(c.recv);
  if (send_bytes == 0 || recv_bytes == 0 || send + send_bytes <= recv || recv + recv_bytes <= send) return true;
  const size_t part = c.count * element_size(c.type) * static_cast<size_t>(rank);
  if (c.kind == Kind::AllGather) return send == recv + part;
  if (c.kind == Kind::ReduceScatter) return recv == send + part;
  return send == recv;
}

bool is_reduction(Kind kind) { return kind == Kind::AllReduce || kind == Kind::Reduce || kind == Kind::ReduceScatter; }

ncclResult_t submit(Call call, ncclComm_t comm) {
  const char* name = kind_name(call.kind);
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state)
    return fail(ncclInvalidArgument, std::string(name) +
                                         ": comm is not a live communicator (null, or "
                                         "destroyed or aborted already)");
  const RankPlace& p = state->place();
  const std::string where = std::string(name) + " on " + place_text(p) + ": ";
  if (element_size(call.type) == 0)
    return fail(ncclInvalidArgument, where + "datatype " + type_name(call.type) + " (" + std::to_string(call.type) +
                                         ") is not supported by the emulated NCCL");
  if (is_reduction(call.kind) && !valid_op(call.op))
    return fail(ncclInvalidArgument, where + "invalid reduction op " + std::to_string(call.op));
  const bool has_root = call.kind == Kind::Broadcast || call.kind == Kind::Reduce || !is_collective(call.kind);
  if (has_root && (call.root < 0 || call.root >= p.nranks))
    return fail(ncclInvalidArgument, where + (is_collective(call.kind) ? "root " : "peer ") +
                                         std::to_string(call.root) + " is not a rank of the communicator");
  if (call.stream == nullptr) call.stream = device_at(p.device)->default_stream.get();
  if (call.stream->device() != p.device)
    return fail(ncclInvalidArgument, where + "the stream belongs to cuda:" + std::to_string(call.stream->device()));
  const size_t ways =
      call.kind == Kind::AllGather || call.kind == Kind::ReduceScatter ? static_cast<size_t>(p.nranks) : 1;
  if (call.count > std::numeric_limits<size_t>::max() / 2 / element_size(call.type) / ways)
    return fail(ncclInvalidArgument, where + "count " + std::to_string(call.count) + " is too large");
  if (ncclResult_t e = state->async_error(); e != ncclSuccess)
    return fail(e, where + "the communicator has failed: " + state->async_message());
  {
    Device* d = device_at(p.device);
    std::lock_guard<std::mutex> lock(d->mutex);
    if (d->sticky != cudaSuccess)
      return fail(ncclUnhandledCudaError, where + "the device has a sticky error: " + d->failure);
  }
  // NCCL drops empty collectives without meeting the other ranks; empty sends and receives still meet.
  if (is_collective(call.kind) && call.count == 0) return ncclSuccess;
  const size_t sb = send_bytes(call, p.rank, p.nranks), rb = recv_bytes(call, p.rank, p.nranks);
  for (const std::string& problem :
       {check_buffer(call.send, sb, p.device, "sendbuff"), check_buffer(call.recv, rb, p.device, "recvbuff")})
    if (!problem.empty()) return fail(ncclInvalidArgument, where + problem);
  if (!overlap_allowed(call, p.rank, sb, rb))
    return fail(ncclInvalidArgument, where +
                                         "sendbuff and recvbuff overlap, but not in the in-place layout (the "
                                         "results would be undefined on a GPU)");
  if (group.depth > 0) {
    group.calls.emplace_back(state, call);
    return ncclSuccess;
  }
  // One thread queuing ungrouped operations for two ranks of one communicator deadlocks in NCCL
  // (the first call may wait for its peers, which this thread has not queued yet).
  Driven& last = driven[state->key()];
  if (std::shared_ptr<RankState> other = last.state.lock(); other && other != state && !other->finished(last.ticket))
    return fail(ncclInvalidUsage, where + "this thread already queued an operation of rank " +
                                      std::to_string(other->place().rank) +
                                      " of the same communicator that has not completed; one thread that drives "
                                      "several ranks must put their calls between ncclGroupStart and ncclGroupEnd");
  last = {state, state->launch({call})};
  return ncclSuccess;
}

}  // namespace

std::string ember::emu::nccl_rendezvous_socket(const ncclUniqueId& id) {
  const std::string name = Segment::name_for(id);
  return name.empty() ? name : "@" + name;
}

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is null");
  if (!Segment::new_id(uniqueId)) return fail(ncclSystemError, "ncclGetUniqueId: getrandom failed");
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " is not in [0, nranks " +
                                         std::to_string(nranks) + ")");
  const std::string name = Segment::name_for(commId);
  if (name.empty()) return fail(ncclInvalidArgument, "ncclCommInitRank: the id does not come from ncclGetUniqueId");
  if (!group.calls.empty())
    return fail(ncclInvalidUsage, "ncclCommInitRank: a group may hold communicator inits or operations, not both");
  int device = 0;
  cudaGetDevice(&device);
  if (device_at(device) == nullptr)
    return fail(ncclUnhandledCudaError, "ncclCommInitRank: no emulated device cuda:" + std::to_string(device) +
                                            " (EMBER_EMULATED_GPUS=" + std::to_string(devices().size()) + ")");
  ncclResult_t result;
  std::string error;
  std::shared_ptr<Segment> segment = Segment::attach(name, nranks, rank, device, &result, &error);
  if (!segment) return fail(result, "ncclCommInitRank: " + error);
  auto state = std::make_shared<RankState>(segment, RankPlace{rank, nranks, device});
  if (group.depth > 0) {
    group.inits.push_back(state);  // ncclGroupEnd waits for the other ranks
  } else if (ncclResult_t e = segment->wait_joined(&error); e != ncclSuccess) {
    return fail(e, "ncclCommInitRank: " + error);
  }
  *comm = register_handle(std::move(state));
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr || ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: comm is null or ndev < 1");
  std::vector<int> list;
  for (int r = 0; r < ndev; ++r) {
    const int device = devlist ? devlist[r] : r;
    if (device_at(device) == nullptr)
      return fail(ncclInvalidArgument, "ncclCommInitAll: no emulated device cuda:" + std::to_string(device) +
                                           " (EMBER_EMULATED_GPUS=" + std::to_string(devices().size()) + ")");
    if (std::find(list.begin(), list.end(), device) != list.end())
      return fail(ncclInvalidUsage, "ncclCommInitAll: cuda:" + std::to_string(device) +
                                        " appears twice in devlist (NCCL: \"Duplicate GPU detected\")");
    list.push_back(device);
  }
  std::shared_ptr<Segment> segment = Segment::create_private(list);
  if (!segment) return fail(ncclSystemError, "ncclCommInitAll: cannot map the communicator's shared memory");
  for (int r = 0; r < ndev; ++r)
    comm[r] = register_handle(std::make_shared<RankState>(segment, RankPlace{r, ndev, list[static_cast<size_t>(r)]}));
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is not a live communicator");
  // As NCCL's (ncclCommFinalize): the communicator's queued operations complete first.
  state->wait_all_finished();
  state->segment().depart(state->place().rank);
  unregister_handle(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state) return fail(ncclInvalidArgument, "ncclCommAbort: comm is not a live communicator");
  const RankPlace& p = state->place();
  state->segment().fail(ncclRemoteError, "rank " + std::to_string(p.rank) + " (cuda:" + std::to_string(p.device) +
                                             ", pid " + std::to_string(::getpid()) + ") called ncclCommAbort");
  unregister_handle(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state || asyncError == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm is not a live communicator, or asyncError is null");
  *asyncError = state->async_error();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state || count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: comm is not a live communicator");
  *count = state->place().nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state || device == nullptr)
    return fail(ncclInvalidArgument, "ncclCommCuDevice: comm is not a live communicator");
  *device = state->place().device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  std::shared_ptr<RankState> state = state_of(comm);
  if (!state || rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: comm is not a live communicator");
  *rank = state->place().rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (see ncclGetLastError)";
    case ncclSystemError:
      return "unhandled system error (see ncclGetLastError)";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage:
      return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  thread_local std::string message;
  std::shared_ptr<RankState> state = comm ? state_of(comm) : nullptr;
  message = state ? state->async_message() : "";
  if (message.empty()) message = last_error;
  return message.c_str();
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return submit({Kind::Reduce, sendbuff, recvbuff, count, datatype, op, root, stream}, comm);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit({Kind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, stream}, comm);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit({Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, stream}, comm);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit({Kind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, stream}, comm);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit({Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream}, comm);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit({Kind::Send, sendbuff, nullptr, count, datatype, ncclSum, peer, stream}, comm);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit({Kind::Recv, nullptr, recvbuff, count, datatype, ncclSum, peer, stream}, comm);
}

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  Group ended = std::move(group);
  group = Group();
  // As NCCL: a call that failed inside the group fails the whole group, and nothing of it runs.
  if (ended.error != ncclSuccess) return ended.error;
  if (!ended.inits.empty() && !ended.calls.empty())
    return fail(ncclInvalidUsage, "ncclGroupEnd: a group may hold communicator inits or operations, not both");
  ncclResult_t result = ncclSuccess;
  for (const auto& state : ended.inits) {
    std::string error;
    if (ncclResult_t e = state->segment().wait_joined(&error); e != ncclSuccess && result == ncclSuccess)
      result = fail(e, "ncclCommInitRank: " + error);
  }
  // One operation per communicator, in the order the communicators first appear.
  std::vector<std::shared_ptr<RankState>> order;
  std::map<RankState*, std::vector<Call>> calls;
  for (auto& [state, call] : ended.calls) {
    if (!calls.count(state.get())) order.push_back(state);
    calls[state.get()].push_back(call);
  }
  for (const auto& state : order) state->launch(std::move(calls[state.get()]));
  return result;
}

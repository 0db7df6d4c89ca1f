// One rank's part of NCCL operations, run on its stream's worker thread: the collectives as rounds
// of the shared barrier (agree on the signature, then per chunk: stage in, barrier, reduce or copy
// out) and send/recv as chunk streams over per-pair channels. Device memory is touched only while
// staging, through the host process's alias of the rank's heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/emu/nccl.h"
#include "cuda/emu/nccl_segment.h"

namespace ember::emu::nccl {

enum class Kind : int32_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv };
const char* kind_name(Kind kind);
bool is_collective(Kind kind);

// One call, as validated by the API.
struct Call {
  Kind kind;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // count, sendcount (all-gather) or recvcount (reduce-scatter)
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;  // the root, or the peer of a send/recv
  cudaStream_t stream = nullptr;
  uint64_t seq = 0;  // the collective's number on the communicator, or the message's on its channel
};

// Bytes the call reads from `send` / writes to `recv` on this rank (0 where it ignores the buffer).
size_t send_bytes(const Call& call, int rank, int nranks);
size_t recv_bytes(const Call& call, int rank, int nranks);

struct RankPlace {
  int rank, nranks, device;
};

// Runs `calls` (one group's calls on one communicator, in call order) to completion: the
// collectives one after another, the sends and receives alongside them, so that a group's
// send/recv pairs never wait on each other. Returns "" or why it failed; a failure is also the
// segment's, so that every rank's waiting operations fail with it.
std::string run_calls(Segment& segment, const RankPlace& place, const std::vector<Call>& calls);

}  // namespace ember::emu::nccl

// A rank's communicator state behind an ncclComm_t handle, and how its operations reach its
// streams. The state outlives the handle while queued operations still need it (after
// ncclCommAbort, they run later and fail).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/emu/nccl.h"
#include "cuda/emu/nccl_ops.h"
#include "cuda/emu/nccl_segment.h"

namespace ember::emu::nccl {

class RankState : public std::enable_shared_from_this<RankState> {
 public:
  RankState(std::shared_ptr<Segment> segment, RankPlace place);

  Segment& segment() { return *segment_; }
  const RankPlace& place() const { return place_; }
  uint64_t key() const { return segment_->key(); }

  // Queues one group's calls on this communicator (in call order) as one operation on the first
  // call's stream; other streams among the calls wait for it. Numbers the collectives and messages
  // in call order, as NCCL matches them. Returns the operation's ticket.
  uint64_t launch(std::vector<Call> calls);
  bool finished(uint64_t ticket);
  void wait_all_finished();

  // The communicator's own failure, else the segment's (a peer's abort or mismatch), else success.
  ncclResult_t async_error();
  std::string async_message();

 private:
  std::string run(uint64_t ticket, const std::vector<Call>& calls);

  std::shared_ptr<Segment> segment_;
  RankPlace place_;
  uint64_t collectives_ = 0;  // the calling thread's numbering
  std::vector<uint64_t> sends_, receives_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t issued_ = 0, finished_ = 0;
  ncclResult_t error_ = ncclSuccess;
  std::string message_;
};

}  // namespace ember::emu::nccl

// The handle NCCL's API hands out.
struct ncclComm {
  std::shared_ptr<ember::emu::nccl::RankState> state;
};

namespace ember::emu::nccl {

// Handles are checked against the live ones, so that a destroyed communicator is an error
// (ncclInvalidArgument) instead of a use after free.
ncclComm_t register_handle(std::shared_ptr<RankState> state);
bool unregister_handle(ncclComm_t comm);
std::shared_ptr<RankState> state_of(ncclComm_t comm);

}  // namespace ember::emu::nccl

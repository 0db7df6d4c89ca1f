// The shadow loop: one "ranks still active" all-reduce per iteration of the others, then their
// buffer broadcast and bucket all-reduces with zeros, all on the module's device like theirs.
#include "parallel/join.h"

namespace ember::parallel {

Join::Join(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.join_enabled_ = true; }

Join::~Join() {
  if (!finished_) {
    // Leaving the loop early (an exception): do not hide it behind more collectives.
    ddp_.join_enabled_ = false;
  }
}

int64_t Join::finish() {
  EMBER_CHECK(!finished_, "Join::finish: called twice");
  finished_ = true;
  int64_t shadowed = 0;
  while (ddp_.count_active(false) > 0) {
    // An active rank's iteration: buffer broadcast in forward, bucket all-reduces in backward.
    if (ddp_.is_training()) ddp_.sync_buffers();
    ddp_.reducer_->shadow_backward();
    ++shadowed;
  }
  // Joined ranks skipped the last optimizer steps: everyone takes the model of the last rank to
  // join (the one that saw no active rank left on arrival; the highest such rank on a tie).
  const int64_t last = ddp_.all_reduce_scalar(shadowed == 0 ? ddp_.group_->rank() : -1, comm::ReduceOp::Max);
  ddp_.broadcast_state_from(static_cast<int>(last));
  ddp_.join_enabled_ = false;
  return shadowed;
}

}  // namespace ember::parallel

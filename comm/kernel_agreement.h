// Keeps the ranks of a group on the same kernels (core/kernel_select.h). In benchmark mode each
// rank times its own trials and could pick others; a training checkpoint records rank 0's
// decisions alone, so a resumed DDP run continues bit for bit only if every rank ran rank 0's.
//
//   for (data::Batch& batch : loader) {
//     ... loss.backward(); optimizer.step();
//     Tensor changed = full({1}, ember::comm::kernel_decisions_changed() ? 1 : 0, ...on device);
//     world->all_reduce(changed, ReduceOp::Max)->wait();  // beside the loop's own flags, if any
//     if (changed.item<int64_t>()) ember::comm::share_kernel_decisions(*world, device);
//   }
#pragma once

#include "comm/process_group.h"

namespace ember::comm {

// Whether this process decided a new kernel key since the ranks last agreed (local). The ranks
// all-reduce it (max) after each training step, in whatever flags they already agree on.
bool kernel_decisions_changed();
// Collective, called by every rank of `group` at the same point when any rank's
// kernel_decisions_changed() was true: every rank adopts rank 0's decisions
// (kernel_select::adopt) and runs them from then on. Its tensors go on `device` (the training
// device: an NCCL-only group carries them too).
void share_kernel_decisions(ProcessGroup& group, Device device);

}  // namespace ember::comm

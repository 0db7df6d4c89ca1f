// Keeps the ranks of a group on the same kernels (core/kernel_select.h). In benchmark mode each
// rank times its own trials and could pick others; a training checkpoint records rank 0's
// decisions alone, so a resumed DDP run continues bit for bit only if every rank ran rank 0's.
//
//   for (data::Batch& batch : loader) {
//     ... loss.backward(); optimizer.step();
//     ember::comm::agree_on_kernels(*world, device);
//   }
#pragma once

#include "comm/process_group.h"

namespace ember::comm {

// Collective: every rank of `group` calls it at the same point, after each training step. When
// any rank has decided a new key since its last call, every rank adopts rank 0's decisions
// (kernel_select::adopt), and runs them from the next step on; otherwise it costs one all-reduce
// of one integer. Its tensors go on `device` (the training device: an NCCL-only group carries
// them too).
void agree_on_kernels(ProcessGroup& group, Device device);

}  // namespace ember::comm

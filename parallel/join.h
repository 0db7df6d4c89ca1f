// Join: training with uneven inputs. Ranks may hold different numbers of batches; a rank that
// runs out calls finish() and then shadows the others' collectives (a zero gradient for each
// bucket) until every rank has finished, so nobody waits forever. Gradients stay divided by the
// full world size, as PyTorch's Join does by default. At the end every rank takes the model of
// the last rank to join, since the others skipped its final optimizer steps.
//
//   ember::parallel::Join join(*ddp);
//   for (auto& batch : loader) { ... ddp->forward(...) ... backward ... step ... }
//   join.finish();
//
// Only DDP's own collectives are shadowed: SyncBatchNorm or user collectives inside the loop
// are not supported together with Join.
#pragma once

#include "parallel/ddp.h"

namespace ember::parallel {

class Join {
 public:
  explicit Join(DistributedDataParallel& ddp);
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;
  // Returns once every rank has called finish(); returns the number of iterations shadowed.
  int64_t finish();

 private:
  DistributedDataParallel& ddp_;
  bool finished_ = false;
};

}  // namespace ember::parallel

// One skip decision for every rank: binds an amp::GradScaler to a process group, so that the
// found-inf flag each unscale_ makes is max-all-reduced over the group before step() reads it.
// DDP's averaged gradients carry an inf to every rank anyway; the flags differ when a rank's
// gradients never meet the others' (steps accumulated under no_sync, parameters outside DDP), and
// then a rank stepping while another skips would leave the replicas apart. Costs one one-element
// all-reduce per optimizer and step.
//
//   auto ddp = std::make_shared<ember::parallel::DistributedDataParallel>(model, world);
//   ember::amp::GradScaler scaler;
//   ember::parallel::sync_grad_scaler(scaler, *ddp);        // before the first step
#pragma once

#include <memory>

#include "comm/process_group.h"
#include "nn/amp/grad_scaler.h"
#include "parallel/ddp.h"
#include "parallel/sharded_data_parallel.h"

namespace ember::parallel {

// Over `group`, on the device of the flag (that of the optimizer's gradients, or the first of
// them): every rank's optimizers must have gradients on devices the group reaches.
void sync_grad_scaler(amp::GradScaler& scaler, std::shared_ptr<comm::ProcessGroup> group);
// Over DDP's process group, on DDP's device (a flag elsewhere is moved there first).
void sync_grad_scaler(amp::GradScaler& scaler, const DistributedDataParallel& ddp);
// The same for sharded data parallelism, where it is never optional: each rank unscales only its
// own rows, so an overflow shows on the rank that owns the rows it landed in.
void sync_grad_scaler(amp::GradScaler& scaler, const ShardedDataParallel& sharded);

}  // namespace ember::parallel

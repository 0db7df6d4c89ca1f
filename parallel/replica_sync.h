// What every data-parallel wrapper over a process group does to its replicas (DDP and sharded
// data parallelism alike): find the one device a module lives on, check that every rank
// registered the same parameters, exchange short texts, broadcast state, and find the leaves a
// forward's outputs reach.
#pragma once

#include <string>
#include <vector>

#include "comm/process_group.h"
#include "nn/module.h"

namespace ember::parallel {

// The one device holding the module's parameters and buffers (the CPU for a module without any).
// Raises, naming `who` and `rank`, when the module spans several.
Device module_device(const nn::Module& module, int rank, const char* who);

// `text` from every rank, as byte tensors on `device` (a group for GPUs needs no host transport).
std::vector<std::string> gather_texts(comm::ProcessGroup& group, Device device, const std::string& text);

// Raises on every rank, naming the first parameter where another rank's list (names, shapes,
// dtypes) differs. The first collective of a wrapper: a group that cannot reach `device` fails here.
void verify_same_parameters(comm::ProcessGroup& group, Device device, const nn::Module& module, const char* who);

// Rank `root`'s values into `tensors` on every rank: one broadcast per dtype over a flat copy.
void broadcast_tensors(comm::ProcessGroup& group, const std::vector<Tensor>& tensors, int root);

// The leaves (by impl) reachable from `outputs` through the autograd graph.
std::vector<const TensorImpl*> reachable_leaves(const std::vector<Tensor>& outputs);

}  // namespace ember::parallel

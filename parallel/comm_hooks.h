// Communication hooks for DDP: how one bucket of gradients is reduced. A hook receives the
// bucket (a flat buffer of this rank's gradients, on the model's device) and returns a Work; once
// that Work's wait() returns, the bucket's buffer holds the averaged gradients for what comes
// next: on the host for a CPU bucket, on the current stream for a device one (whose wait() orders
// the stream rather than blocking the host). Hooks use tensor ops, which run on either.
//
//   ddp->register_comm_hook(ember::parallel::fp16_compress_hook);   // halve the bytes on the wire
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ember::parallel {

struct GradBucket {
  size_t index = 0;
  Tensor buffer;                   // flat, this rank's gradients of the bucket's parameters
  std::vector<std::string> names;  // the parameters in the bucket, in buffer order
  bool is_last = false;            // the last bucket of the iteration
};

using CommHook = std::function<comm::WorkPtr(comm::ProcessGroup& group, GradBucket& bucket)>;

// The default: all_reduce(buffer, Avg).
comm::WorkPtr allreduce_hook(comm::ProcessGroup& group, GradBucket& bucket);
// Cast to float16 / bfloat16 divided by the world size, all-reduce (sum), cast back.
comm::WorkPtr fp16_compress_hook(comm::ProcessGroup& group, GradBucket& bucket);
comm::WorkPtr bf16_compress_hook(comm::ProcessGroup& group, GradBucket& bucket);

// A Work that runs `continuation` once after `inner` completed, on the first thread that waits
// on it or polls is_completed() (which is true only once the continuation ran): how a hook
// post-processes (decompresses) its result. A continuation that throws is the Work's error().
// For a device collective, wait() runs the continuation right after ordering the current stream
// behind it, so its ops queue there after the result; is_completed() follows the device.
comm::WorkPtr then(comm::WorkPtr inner, std::function<void()> continuation);

}  // namespace ember::parallel

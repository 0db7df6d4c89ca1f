// How spawn sends a Shared to a worker: one message with every tensor as a handle.
#pragma once

#include "parallel/multiprocessing/channel.h"
#include "parallel/multiprocessing/shared.h"

namespace ember::multiprocessing::detail {

Message encode_shared(const Shared& shared);
Shared decode_shared(Message& message);

}  // namespace ember::multiprocessing::detail

// Worker processes on one machine sharing tensors: spawn (spawn.h), Shared (shared.h) and Queue
// (queue.h). Tensor::share_memory_ and Module::share_memory move tensors to shared memory.
#pragma once

#include "parallel/multiprocessing/queue.h"
#include "parallel/multiprocessing/shared.h"
#include "parallel/multiprocessing/spawn.h"

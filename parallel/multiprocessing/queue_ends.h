// The descriptors behind a Queue: Shared sends them to the workers.
#pragma once

#include "parallel/multiprocessing/queue.h"

namespace ember::multiprocessing {

struct Queue::Ends {
  Ends();
  // Takes ownership of received descriptors.
  Ends(int put, int get) : put_fd(put), get_fd(get) {}
  ~Ends();
  Ends(const Ends&) = delete;
  Ends& operator=(const Ends&) = delete;
  int put_fd = -1;
  int get_fd = -1;
};

}  // namespace ember::multiprocessing

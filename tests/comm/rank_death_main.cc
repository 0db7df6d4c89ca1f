// Rank 1 kills itself in the middle of a run of all_reduces; the survivors must end with a
// non-zero status and a message saying which collective they were in (rank_death_test.sh).
#include <signal.h>
#include <unistd.h>

#include "comm/init.h"
#include "core/ember_core.h"

int main() {
  auto g = ember::comm::init();
  ember::Tensor t = ember::ones({1 << 16});
  for (int step = 0; step < 1000000; ++step) {
    if (g->rank() == 1 && step == 20) ::kill(::getpid(), SIGKILL);
    g->all_reduce(t, ember::comm::ReduceOp::Avg)->wait();
  }
  return 0;
}

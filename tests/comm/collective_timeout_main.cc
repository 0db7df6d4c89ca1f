// A job where rank 1 never takes part: rank 0's watchdog must end the job within
// EMBER_COLLECTIVE_TIMEOUT with a message naming what rank 0 waits for (checked by
// timeout_test.sh). Modes: "collective" (an all_reduce) or "p2p" (a recv posted, then a send
// too large for MPI to buffer; neither is ever matched, and rank 0 waits on neither).
#include <chrono>
#include <string>
#include <thread>

#include "comm/init.h"
#include "core/ember_core.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "collective";
  auto g = ember::comm::init();
  if (g->rank() == 0 && mode == "p2p") {
    auto recv = g->recv(ember::empty({3, 4}), 1, 7);
    auto send = g->send(ember::zeros({1 << 20}), 1, 8);
    std::this_thread::sleep_for(std::chrono::seconds(120));  // in-flight, not waited on
  } else if (g->rank() == 0) {
    ember::Tensor t = ember::ones({3, 4});
    g->all_reduce(t)->wait(std::chrono::milliseconds(600000));
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  return 0;
}

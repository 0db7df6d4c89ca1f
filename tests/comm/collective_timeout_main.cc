// A job where rank 1 never joins rank 0's all_reduce: rank 0's watchdog must end the job within
// EMBER_COLLECTIVE_TIMEOUT with a message naming the collective (checked by timeout_test.sh).
#include <chrono>
#include <thread>

#include "comm/init.h"
#include "core/ember_core.h"

int main() {
  auto g = ember::comm::init();
  if (g->rank() == 0) {
    ember::Tensor t = ember::ones({3, 4});
    g->all_reduce(t)->wait(std::chrono::milliseconds(600000));
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  return 0;
}

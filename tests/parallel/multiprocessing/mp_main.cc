// Catch2's main for tests that spawn workers: a re-executed worker runs its entry at
// worker_guard() and exits before any test case runs again.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "parallel/multiprocessing/spawn.h"

int main(int argc, char** argv) {
  ember::multiprocessing::worker_guard();
  return Catch::Session().run(argc, argv);
}

// Rendezvous from the environment. Under mpirun, Open MPI's OMPI_COMM_WORLD_RANK / _SIZE /
// _LOCAL_RANK name the process; RANK / WORLD_SIZE / LOCAL_RANK are accepted as well and must
// agree. EMBER_BACKEND picks the backend: "mpi" (default; "nccl" arrives with the CUDA backend).
//
//   auto world = ember::comm::init();
//   if (world->rank() == 0) std::cout << "training on " << world->size() << " ranks\n";
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.h"

namespace ember::comm {

struct LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  bool launched = false;  // true when a launcher set the variables
  std::string backend = "mpi";
};

// Parses the variables (raising on malformed or contradictory values).
LaunchEnvironment read_environment();
// Initialises the backend once and returns the world group (later calls return the same one).
std::shared_ptr<ProcessGroup> init();
// The world group, or nullptr before init().
std::shared_ptr<ProcessGroup> world();
bool is_initialized();
// Prints "[rank R] ember: <message>" and ends every rank of the job with a non-zero status.
[[noreturn]] void abort_job(const std::string& message);

}  // namespace ember::comm

// Rendezvous from the environment. The launcher's variables say whether this process was
// started as one rank of a job, and which; MPI_Init (in init()) is the rendezvous itself and must
// agree with them. In order of precedence:
//   1. Open MPI's mpirun: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (also inside a Slurm
//      allocation, where the SLURM_* variables describe mpirun's daemons, not the ranks);
//   2. a Slurm job step (srun --mpi=pmix or pmi2): SLURM_PROCID, SLURM_STEP_NUM_TASKS (else
//      SLURM_NTASKS, when PMIX_RANK or PMI_RANK confirms a launched task), SLURM_LOCALID; PMIX_RANK
//      and PMI_RANK / PMI_SIZE must agree. A batch script's own SLURM_PROCID=0 / SLURM_NTASKS=N,
//      without a step, is not a launch;
//   3. RANK / WORLD_SIZE / LOCAL_RANK set by hand.
// RANK, WORLD_SIZE and LOCAL_RANK, when set next to a launcher's variables, must agree with them.
// EMBER_BACKEND picks the backend among those the program linked (each backend's package registers
// it at static init; comm itself links none): //comm/mpi gives "mpi", //comm/gloo "gloo",
// //comm/nccl "nccl", and a host backend with NCCL "cpu:mpi,cuda:nccl" / "cpu:gloo,cuda:nccl": CPU
// tensors over MPI or Gloo, CUDA tensors over NCCL (a communicator made at the first collective on
// a CUDA tensor, on its device, its unique id broadcast over the host group). "mpi" and "gloo" take
// CPU tensors only; "nccl" CUDA tensors only, on cuda:LOCAL_RANK, with the id shared over MPI under
// a launcher, through EMBER_NCCL_ID_FILE (a path every rank sees: rank 0 writes it, and removes it
// once every rank joined) or through the store below, the last two needing no MPI at all. The
// default is what the program linked: a host backend and NCCL, the mixed group; one, that one; none,
// "mpi" (which init() then asks to link); MPI before Gloo, unless the ranks were started by hand
// (RANK/WORLD_SIZE without a launcher), where MPI cannot start. Asking for a backend the program
// did not link raises, naming the Bazel dep to add.
// Without a launcher the ranks meet at a TCP store (comm/rendezvous.h): with
// EMBER_MASTER_ADDR/EMBER_MASTER_PORT (or MASTER_ADDR/MASTER_PORT) and RANK/WORLD_SIZE set, rank 0
// serves it; Gloo always meets there (its ranks exchange their addresses), and "nccl" shares its
// id there (EMBER_NCCL_ID_FILE, when also set, comes first).
//
//   auto world = ember::comm::init();
//   if (world->rank() == 0) std::cout << "training on " << world->size() << " ranks\n";
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.h"
#include "comm/store.h"

namespace ember::comm {

struct LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  bool launched = false;  // true when a launcher (or RANK/WORLD_SIZE) named this process
  std::string source;     // the variables that did, e.g. "SLURM_PROCID/SLURM_STEP_NUM_TASKS"
  std::string backend = "mpi";
  // The backend that carries CPU tensors ("mpi" or "gloo"; from "cpu:gloo,cuda:nccl" too), or ""
  // for NCCL alone.
  std::string host_backend() const;
};

// Parses the variables (raising on malformed or contradictory values, and on an EMBER_BACKEND
// that is not a backend name).
LaunchEnvironment read_environment();
// Initialises the backend once and returns the world group (later calls return the same one).
std::shared_ptr<ProcessGroup> init();
// The world group, or nullptr before init().
std::shared_ptr<ProcessGroup> world();
// The store the ranks met at (EMBER_MASTER_ADDR), or nullptr (before init(), or under a launcher).
std::shared_ptr<Store> store();
bool is_initialized();
// Prints "[rank R] ember: <message>" and ends every rank of the job with exit status `status`
// (non-zero; under MPI the launcher's status too, as MPI_Abort's error code).
[[noreturn]] void abort_job(const std::string& message, int status = 1);

}  // namespace ember::comm

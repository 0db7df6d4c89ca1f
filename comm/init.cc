// init(): environment parsing and backend selection.
#include "comm/init.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "comm/mpi/mpi_process_group.h"
#include "comm/mpi/runtime.h"
#include "core/error.h"

namespace ember::comm {

namespace {

std::mutex init_mutex;
std::shared_ptr<ProcessGroup> world_group;

bool read_int(const char* name, int* out) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return false;
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  EMBER_CHECK(end != value && *end == '\0' && v >= 0 && v < (1 << 24), "comm::init: environment variable ", name,
              " must be a non-negative integer, got '", value, "'");
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

LaunchEnvironment read_environment() {
  LaunchEnvironment env;
  int ompi_rank = 0, ompi_size = 1, ompi_local = 0;
  bool have_ompi = read_int("OMPI_COMM_WORLD_RANK", &ompi_rank);
  read_int("OMPI_COMM_WORLD_SIZE", &ompi_size);
  read_int("OMPI_COMM_WORLD_LOCAL_RANK", &ompi_local);
  int rank = 0, size = 1, local = 0;
  bool have_rank = read_int("RANK", &rank);
  bool have_size = read_int("WORLD_SIZE", &size);
  bool have_local = read_int("LOCAL_RANK", &local);
  if (have_ompi) {
    env.rank = ompi_rank;
    env.world_size = ompi_size;
    env.local_rank = ompi_local;
    env.launched = true;
    EMBER_CHECK(!have_rank || rank == ompi_rank, "comm::init: RANK=", rank, " contradicts OMPI_COMM_WORLD_RANK=",
                ompi_rank);
    EMBER_CHECK(!have_size || size == ompi_size, "comm::init: WORLD_SIZE=", size,
                " contradicts OMPI_COMM_WORLD_SIZE=", ompi_size);
  } else if (have_rank || have_size) {
    EMBER_CHECK(have_rank && have_size, "comm::init: RANK and WORLD_SIZE must be set together");
    env.rank = rank;
    env.world_size = size;
    env.local_rank = have_local ? local : 0;
    env.launched = true;
  }
  EMBER_CHECK(env.world_size >= 1 && env.rank < env.world_size, "comm::init: rank ", env.rank,
              " is outside a world of size ", env.world_size);
  if (const char* backend = std::getenv("EMBER_BACKEND"); backend != nullptr && *backend != '\0') env.backend = backend;
  return env;
}

std::shared_ptr<ProcessGroup> init() {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (world_group) return world_group;
  LaunchEnvironment env = read_environment();
  EMBER_CHECK(env.backend == "mpi", "comm::init: EMBER_BACKEND='", env.backend,
              "' is not available (this build has: mpi; nccl comes with the CUDA backend)");
  auto group = mpi::MpiProcessGroup::world();
  EMBER_CHECK(!env.launched || (group->rank() == env.rank && group->size() == env.world_size), "comm::init: MPI says "
              "rank ", group->rank(), " of ", group->size(), " but the environment says rank ", env.rank, " of ",
              env.world_size, " (RANK/WORLD_SIZE must match the MPI launcher; run under mpirun)");
  world_group = group;
  return world_group;
}

std::shared_ptr<ProcessGroup> world() {
  std::lock_guard<std::mutex> lock(init_mutex);
  return world_group;
}

bool is_initialized() { return world() != nullptr; }

void abort_job(const std::string& message) {
  if (is_initialized()) mpi::Runtime::get().abort(message);
  std::fprintf(stderr, "ember: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace ember::comm

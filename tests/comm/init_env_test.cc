// comm::read_environment without MPI: which launcher's variables name the process (mpirun,
// srun --mpi=pmix / pmi2, RANK/WORLD_SIZE), in which order, what must agree, and EMBER_BACKEND.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <string>

#include "comm/init.h"

using namespace ember;

namespace {

// Sets exactly `values` among the variables read_environment looks at (unsetting the others)
// and restores the previous environment afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const char* name : kNames) {
      if (const char* old = std::getenv(name)) saved_[name] = old;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name, value, 1);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;
  ~ScopedEnvironment() {
    for (const char* name : kNames) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "SLURM_PROCID",
                                           "SLURM_NTASKS",
                                           "SLURM_STEP_NUM_TASKS",
                                           "SLURM_LOCALID",
                                           "PMIX_RANK",
                                           "PMI_RANK",
                                           "PMI_SIZE",
                                           "RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "EMBER_BACKEND"};
  std::map<std::string, std::string> saved_;
};

void require_launch(const comm::LaunchEnvironment& env, int rank, int size, int local, const std::string& source) {
  REQUIRE(env.launched);
  REQUIRE(env.rank == rank);
  REQUIRE(env.world_size == size);
  REQUIRE(env.local_rank == local);
  REQUIRE(env.source == source);
}

}  // namespace

TEST_CASE("no launcher: one process, not launched", "[comm][init]") {
  ScopedEnvironment scope{};
  comm::LaunchEnvironment env = comm::read_environment();
  REQUIRE_FALSE(env.launched);
  REQUIRE(env.rank == 0);
  REQUIRE(env.world_size == 1);
  REQUIRE(env.backend == "mpi");
}

TEST_CASE("mpirun: OMPI_COMM_WORLD_* name the process and win over Slurm's", "[comm][init]") {
  {
    ScopedEnvironment scope(
        {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
    require_launch(comm::read_environment(), 2, 4, 0, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
  }
  {
    // mpirun inside an allocation: its daemons were started by a Slurm step of 2 (one per node).
    ScopedEnvironment scope({{"OMPI_COMM_WORLD_RANK", "5"},
                             {"OMPI_COMM_WORLD_SIZE", "8"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                             {"SLURM_PROCID", "1"},
                             {"SLURM_STEP_NUM_TASKS", "2"},
                             {"SLURM_LOCALID", "0"},
                             {"PMIX_RANK", "5"}});
    require_launch(comm::read_environment(), 5, 8, 1, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
  }
  {
    ScopedEnvironment scope({{"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                             {"RANK", "0"}});
    REQUIRE_THROWS_WITH(comm::read_environment(), Catch::Contains("RANK=0 contradicts OMPI_COMM_WORLD_RANK=1"));
  }
  {
    ScopedEnvironment scope({{"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                             {"LOCAL_RANK", "0"}});
    REQUIRE_THROWS_WITH(comm::read_environment(),
                        Catch::Contains("LOCAL_RANK=0 contradicts OMPI_COMM_WORLD_LOCAL_RANK=1"));
  }
}

TEST_CASE("srun --mpi=pmix / pmi2: SLURM_PROCID and the step's task count", "[comm][init]") {
  {
    // A step of 4 tasks in an allocation of 8.
    ScopedEnvironment scope({{"SLURM_PROCID", "3"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_NTASKS", "8"},
                             {"SLURM_LOCALID", "1"},
                             {"PMIX_RANK", "3"}});
    require_launch(comm::read_environment(), 3, 4, 1, "SLURM_PROCID/SLURM_STEP_NUM_TASKS");
  }
  {
    // pmi2 without SLURM_STEP_NUM_TASKS: PMI_RANK shows a launched task.
    ScopedEnvironment scope({{"SLURM_PROCID", "1"},
                             {"SLURM_NTASKS", "2"},
                             {"SLURM_LOCALID", "1"},
                             {"PMI_RANK", "1"},
                             {"PMI_SIZE", "2"},
                             {"RANK", "1"},
                             {"WORLD_SIZE", "2"}});
    require_launch(comm::read_environment(), 1, 2, 1, "SLURM_PROCID/SLURM_NTASKS");
  }
  {
    // The batch script itself: an allocation of 4 tasks, but no step and no PMI.
    ScopedEnvironment scope({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}});
    REQUIRE_FALSE(comm::read_environment().launched);
  }
  {
    ScopedEnvironment scope({{"SLURM_PROCID", "2"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"PMIX_RANK", "1"}});
    REQUIRE_THROWS_WITH(comm::read_environment(), Catch::Contains("PMIX_RANK=1 contradicts SLURM_PROCID=2"));
  }
  {
    ScopedEnvironment scope(
        {{"SLURM_PROCID", "2"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_LOCALID", "0"}, {"LOCAL_RANK", "2"}});
    REQUIRE_THROWS_WITH(comm::read_environment(), Catch::Contains("LOCAL_RANK=2 contradicts SLURM_LOCALID=0"));
  }
  {
    ScopedEnvironment scope({{"SLURM_PROCID", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}});
    REQUIRE_THROWS_WITH(
        comm::read_environment(),
        Catch::Contains("rank 4 is outside a world of size 4 (from SLURM_PROCID/SLURM_STEP_NUM_TASKS)"));
  }
}

TEST_CASE("RANK / WORLD_SIZE / LOCAL_RANK by hand", "[comm][init]") {
  {
    ScopedEnvironment scope({{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "1"}});
    require_launch(comm::read_environment(), 1, 3, 1, "RANK/WORLD_SIZE");
  }
  {
    ScopedEnvironment scope({{"RANK", "1"}});
    REQUIRE_THROWS_WITH(comm::read_environment(), Catch::Contains("RANK and WORLD_SIZE must be set together"));
  }
  {
    ScopedEnvironment scope({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
    REQUIRE_THROWS_WITH(comm::read_environment(), Catch::Contains("RANK must be a non-negative integer, got 'one'"));
  }
}

// This binary links //comm alone: neither backend is registered, and asking for one names its package.
TEST_CASE("EMBER_BACKEND: unknown names are rejected, unlinked backends name their Bazel dep", "[comm][init]") {
  {
    ScopedEnvironment scope({{"EMBER_BACKEND", "mpi"}});
    REQUIRE(comm::read_environment().backend == "mpi");
  }
  {
    ScopedEnvironment scope({{"EMBER_BACKEND", "tcp"}});
    REQUIRE_THROWS_WITH(
        comm::read_environment(),
        Catch::Contains("EMBER_BACKEND='tcp' is not a backend; expected 'mpi' (CPU tensors; //comm/mpi), "
                        "'gloo' (CPU tensors; //comm/gloo), 'nccl'"));
  }
  {
    ScopedEnvironment scope({{"EMBER_BACKEND", "gloo"}});
    REQUIRE(comm::read_environment().backend == "gloo");
    REQUIRE_THROWS_WITH(comm::init(),
                        Catch::Contains("EMBER_BACKEND='gloo' needs the 'gloo' backend, which this program "
                                        "does not link: add \"//comm/gloo\" to its Bazel deps"));
    REQUIRE_FALSE(comm::is_initialized());
  }
  {
    ScopedEnvironment scope({{"EMBER_BACKEND", "cpu:gloo,cuda:nccl"}});
    REQUIRE(comm::read_environment().backend == "cpu:gloo,cuda:nccl");
    REQUIRE_THROWS_WITH(comm::init(), Catch::Contains("needs the 'nccl' backend"));
    REQUIRE_FALSE(comm::is_initialized());
  }
  {
    // Rejected before MPI is started.
    ScopedEnvironment scope({{"EMBER_BACKEND", "nccl"}});
    REQUIRE(comm::read_environment().backend == "nccl");
    REQUIRE_THROWS_WITH(comm::init(), Catch::Contains("EMBER_BACKEND='nccl' needs the 'nccl' backend, which this "
                                                      "program does not link: add \"//comm/nccl\" to its Bazel deps"));
    REQUIRE_FALSE(comm::is_initialized());
  }
  {
    // The default without either backend is "mpi", and init() says what to link.
    ScopedEnvironment scope{};
    REQUIRE(comm::read_environment().backend == "mpi");
    REQUIRE_THROWS_WITH(comm::init(), Catch::Contains("EMBER_BACKEND='mpi' needs the 'mpi' backend, which this "
                                                      "program does not link: add \"//comm/mpi\" to its Bazel deps"));
    REQUIRE_FALSE(comm::is_initialized());
  }
}

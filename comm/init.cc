// init(): environment parsing and backend selection. The backends are found by name in the
// registries their packages fill when linked (host_backend.h, device_backend.h): comm itself links
// neither MPI nor NCCL.
#include "comm/init.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "comm/device_backend.h"
#include "comm/host_backend.h"
#include "comm/mixed_process_group.h"
#include "comm/rendezvous.h"
#include "core/error.h"

namespace ember::comm {

namespace {

constexpr const char* kMixedBackend = "cpu:mpi,cuda:nccl";
constexpr const char* kMixedGlooBackend = "cpu:gloo,cuda:nccl";

std::mutex init_mutex;
std::shared_ptr<ProcessGroup> world_group;
std::shared_ptr<Store> world_store;
std::atomic<int> world_rank{-1};  // for abort_job's prefix, without MPI too

// The linked backend `name` (else an error naming the dep to add); `why` says what needs it.
const HostBackend& require_host_backend(const std::string& name, const std::string& why) {
  const HostBackend* backend = host_backend(name);
  EMBER_CHECK(backend != nullptr, "comm::init: ", why, " needs the '", name,
              "' backend, which this program does "
              "not link: add \"",
              backend_package(name), "\" to its Bazel deps");
  return *backend;
}

DeviceGroupFactory require_device_backend(const std::string& name, const std::string& why) {
  DeviceGroupFactory factory = device_backend(name);
  EMBER_CHECK(factory, "comm::init: ", why, " needs the '", name,
              "' backend, which this program does not link: "
              "add \"",
              backend_package(name), "\" to its Bazel deps");
  return factory;
}

// The backend's world (MPI_Init is the rendezvous); the environment only said that (and as which
// rank) we were launched.
std::shared_ptr<ProcessGroup> host_world(const std::string& name, const LaunchEnvironment& env,
                                         const std::string& why) {
  auto group = require_host_backend(name, why).world(env, world_store);
  EMBER_CHECK(!env.launched || (group->rank() == env.rank && group->size() == env.world_size), "comm::init: ", name,
              " says rank ", group->rank(), " of ", group->size(), " but ", env.source, " says rank ", env.rank, " of ",
              env.world_size,
              " (start the ranks with mpirun, or srun --mpi=pmix / pmi2 with an MPI built "
              "for it)");
  return group;
}

// The variable's value, or nothing when it is unset or empty; raises when it is not an integer.
std::optional<int> read_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  EMBER_CHECK(end != value && *end == '\0' && v >= 0 && v < (1 << 24), "comm::init: environment variable ", name,
              " must be a non-negative integer, got '", value, "'");
  return static_cast<int>(v);
}

// `name` (when set) must say the same as the launcher's `source_name`.
void check_agrees(const char* name, const std::optional<int>& value, const char* source_name, int expected) {
  EMBER_CHECK(!value || *value == expected, "comm::init: ", name, "=", *value, " contradicts ", source_name, "=",
              expected);
}

}  // namespace

std::string LaunchEnvironment::host_backend() const {
  if (backend.rfind("cpu:", 0) == 0) return backend.substr(4, backend.find(',') - 4);
  return backend == "nccl" ? std::string() : backend;
}

LaunchEnvironment read_environment() {
  LaunchEnvironment env;
  const std::optional<int> rank = read_int("RANK"), size = read_int("WORLD_SIZE"), local = read_int("LOCAL_RANK");
  const char* rank_name = nullptr;  // the launcher's names for rank, size and local rank
  const char* size_name = nullptr;
  const char* local_name = nullptr;
  bool local_known = false;
  if (auto ompi_rank = read_int("OMPI_COMM_WORLD_RANK")) {
    std::optional<int> ompi_size = read_int("OMPI_COMM_WORLD_SIZE"),
                       ompi_local = read_int("OMPI_COMM_WORLD_LOCAL_RANK");
    EMBER_CHECK(ompi_size.has_value(), "comm::init: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
    env.rank = *ompi_rank;
    env.world_size = *ompi_size;
    env.local_rank = ompi_local.value_or(0);
    local_known = ompi_local.has_value();
    rank_name = "OMPI_COMM_WORLD_RANK", size_name = "OMPI_COMM_WORLD_SIZE", local_name = "OMPI_COMM_WORLD_LOCAL_RANK";
    env.source = "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE";
  } else if (auto slurm_rank = read_int("SLURM_PROCID")) {
    std::optional<int> step_tasks = read_int("SLURM_STEP_NUM_TASKS"), tasks = read_int("SLURM_NTASKS");
    std::optional<int> pmix_rank = read_int("PMIX_RANK"), pmi_rank = read_int("PMI_RANK"),
                       pmi_size = read_int("PMI_SIZE");
    // A job step (srun) says how many tasks it started; without one, only a PMI rank shows that
    // this process is one of SLURM_NTASKS launched tasks rather than the batch script itself.
    if (step_tasks || (tasks && (pmix_rank || pmi_rank))) {
      env.rank = *slurm_rank;
      env.world_size = step_tasks ? *step_tasks : *tasks;
      size_name = step_tasks ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
      std::optional<int> slurm_local = read_int("SLURM_LOCALID");
      env.local_rank = slurm_local.value_or(0);
      local_known = slurm_local.has_value();
      rank_name = "SLURM_PROCID", local_name = "SLURM_LOCALID";
      env.source = std::string("SLURM_PROCID/") + size_name;
      check_agrees("PMIX_RANK", pmix_rank, rank_name, env.rank);
      check_agrees("PMI_RANK", pmi_rank, rank_name, env.rank);
      check_agrees("PMI_SIZE", pmi_size, size_name, env.world_size);
    }
  }
  if (rank_name != nullptr) {
    env.launched = true;
    check_agrees("RANK", rank, rank_name, env.rank);
    check_agrees("WORLD_SIZE", size, size_name, env.world_size);
    if (local_known)
      check_agrees("LOCAL_RANK", local, local_name, env.local_rank);
    else
      env.local_rank = local.value_or(env.local_rank);
  } else if (rank || size) {
    EMBER_CHECK(rank && size, "comm::init: RANK and WORLD_SIZE must be set together");
    env.rank = *rank;
    env.world_size = *size;
    env.local_rank = local.value_or(0);
    env.launched = true;
    env.source = "RANK/WORLD_SIZE";
  }
  EMBER_CHECK(env.world_size >= 1 && env.rank < env.world_size, "comm::init: rank ", env.rank,
              " is outside a world of size ", env.world_size, env.source.empty() ? "" : " (from " + env.source + ")");
  EMBER_CHECK(env.local_rank < env.world_size, "comm::init: local rank ", env.local_rank,
              " is outside a world of size ", env.world_size);
  // The default follows what the program linked: CPU tensors over MPI (over Gloo when MPI is not
  // linked, or when the ranks were started by hand, where MPI cannot start), CUDA tensors over
  // NCCL; with neither host backend, NCCL alone; with nothing, "mpi", which init() then asks to link.
  const bool has_mpi = host_backend("mpi") != nullptr, has_gloo = host_backend("gloo") != nullptr,
             has_nccl = static_cast<bool>(device_backend("nccl"));
  const bool by_hand = env.source == "RANK/WORLD_SIZE";
  const char* host = has_gloo && (by_hand || !has_mpi) ? "gloo" : (has_mpi ? "mpi" : nullptr);
  if (has_nccl)
    env.backend = host == nullptr ? "nccl" : std::string("cpu:") + host + ",cuda:nccl";
  else
    env.backend = host == nullptr ? "mpi" : host;
  if (const char* backend = std::getenv("EMBER_BACKEND"); backend != nullptr && *backend != '\0') env.backend = backend;
  EMBER_CHECK(env.backend == "mpi" || env.backend == "gloo" || env.backend == "nccl" || env.backend == kMixedBackend ||
                  env.backend == kMixedGlooBackend,
              "comm::init: EMBER_BACKEND='", env.backend,
              "' is not a backend; expected 'mpi' (CPU tensors; //comm/mpi), 'gloo' (CPU tensors; //comm/gloo), "
              "'nccl' (CUDA tensors only; //comm/nccl), '",
              kMixedBackend, "' or '", kMixedGlooBackend, "' (both kinds of tensor)");
  return env;
}

std::shared_ptr<ProcessGroup> init() {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (world_group) return world_group;
  LaunchEnvironment env = read_environment();
  world_rank = env.rank;
  const std::string why = "EMBER_BACKEND='" + env.backend + "'";
  const std::string host = env.host_backend();
  const bool mixed = !host.empty() && host != env.backend;
  const char* id_file = std::getenv("EMBER_NCCL_ID_FILE");
  const bool use_file = id_file != nullptr && *id_file != '\0';
  // The ranks meet at a store when they are told where, and a backend needs one: Gloo always, NCCL
  // alone for its id (unless a file carries it). MPI's own start is its rendezvous.
  const std::optional<MasterAddress> master = master_address();
  if (master && (host == "gloo" || (host.empty() && !use_file))) {
    EMBER_CHECK(env.launched, "comm::init: ", master->source,
                " is set, so the ranks meet at a store, but nothing says which rank this is: set RANK and WORLD_SIZE");
    world_store = rendezvous(rendezvous_options(*master, env.rank, env.world_size));
  }
  EMBER_CHECK(host != "gloo" || world_store || env.world_size == 1, "comm::init: ", why, " on ", env.world_size,
              " ranks (from ", env.source,
              "): Gloo's ranks meet at a TCP store that rank 0 serves; set EMBER_MASTER_ADDR and EMBER_MASTER_PORT (or "
              "MASTER_ADDR and MASTER_PORT) to rank 0's address and a free port");
  if (!host.empty() && !mixed) {
    world_group = host_world(host, env, why);
    return world_group;
  }
  DeviceGroupFactory nccl = require_device_backend("nccl", why);
  if (mixed) {
    world_group = std::make_shared<MixedProcessGroup>(host_world(host, env, why), nccl);
    return world_group;
  }
  // NCCL alone: the world is made now, on this rank's device, and CPU tensors are refused.
  DeviceGroupSpec spec;
  spec.rank = env.rank;
  spec.size = env.world_size;
  spec.device = Device::cuda(env.local_rank);
  spec.name = "WORLD";
  for (int r = 0; r < env.world_size; ++r) spec.world_ranks.push_back(r);
  if (use_file)
    spec.share = share_through_file(id_file, env.rank);
  else if (world_store)
    spec.share = share_through_store(world_store, "nccl/WORLD", env.rank);
  else if (env.world_size == 1)
    spec.share = [](std::vector<uint8_t>&) {};
  else
    spec.share = share_through(host_world("mpi", env,
                                          why + " on " + std::to_string(env.world_size) +
                                              " ranks "
                                              "without EMBER_NCCL_ID_FILE (sharing the NCCL id)"),
                               Device(kCPU));
  world_group = nccl(spec);
  // The communicator formed, so every rank has read the id: the file would only mislead a later job.
  if (use_file && env.rank == 0) std::remove(id_file);
  return world_group;
}

std::shared_ptr<ProcessGroup> world() {
  std::lock_guard<std::mutex> lock(init_mutex);
  return world_group;
}

std::shared_ptr<Store> store() {
  std::lock_guard<std::mutex> lock(init_mutex);
  return world_store;
}

bool is_initialized() { return world() != nullptr; }

void abort_job(const std::string& message, int status) {
  // Under MPI, MPI_Abort takes every rank down; otherwise the peers' own watchdogs see this one go.
  abort_through_host_backends(message, status);
  const int rank = world_rank.load();
  std::string line = (rank >= 0 ? "[rank " + std::to_string(rank) + "] " : std::string()) + "ember: " + message + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::_Exit(status);
}

}  // namespace ember::comm

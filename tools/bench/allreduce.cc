// All-reduce latency and bus bandwidth through Ember's ProcessGroup next to the raw library call on
// the same ranks, in the same run. busbw = algbw * 2(n-1)/n (nccl-tests' definition; at one rank,
// where that factor is 0, busbw is algbw), algbw = bytes / time. Both sides alternate within each
// trial, so load hits both alike, and reduce the same buffer, so memory placement does too.
//   --backend mpi (default): CPU tensors against MPI_Allreduce, 4 KB ... 100 MB.
//   --backend gloo: CPU tensors through Ember's Gloo group (EMBER_BACKEND=gloo) against Gloo's own
//     allreduce on a context of the bench's own (Gloo's FileStore in /tmp, its TCP device), 4 KB ...
//     100 MB; under mpirun also against MPI_Allreduce, as a second table. Ranks started without a
//     launcher (RANK/WORLD_SIZE, EMBER_MASTER_ADDR) time Gloo alone.
//   --backend nccl: a CUDA tensor on cuda:LOCAL_RANK against ncclAllReduce on a communicator of the
//     bench's own, on the caller's current stream, 4 KB ... 1 GB; each trial ends with that stream
//     synchronised, so completion is timed, as nccl-tests does. On emulated devices 4 KB ... 4 MB,
//     and only the ratio means something there: the times are the CPU's.
// Run: mpirun -np 2 bazel-out/k8-opt/bin/tools/bench/allreduce [--backend nccl] (after bazel build
// --config=bench); one rank on one GPU: EMBER_BACKEND=nccl allreduce --backend nccl (no MPI needed);
// Gloo: EMBER_BACKEND=gloo EMBER_MASTER_ADDR=127.0.0.1 EMBER_MASTER_PORT=29500 mpirun -np 2 -x
// EMBER_BACKEND -x EMBER_MASTER_ADDR -x EMBER_MASTER_PORT allreduce --backend gloo.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/gloo/context.h"
#include "comm/init.h"
#include "comm/rendezvous.h"
#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/device_properties.h"
#include "cuda/nccl.h"
#include "tools/bench/timing.h"

using namespace ember;

namespace {

const char* kUsage = R"(usage: allreduce [--backend mpi|gloo|nccl] [--max-bytes N] [--trials N]
  --backend mpi     CPU tensors through Ember's group against raw MPI_Allreduce (default)
  --backend gloo    CPU tensors through Ember's Gloo group against raw Gloo (and MPI under mpirun)
  --backend nccl    a CUDA tensor on cuda:LOCAL_RANK against raw ncclAllReduce
  --max-bytes N     leave out the sizes above N bytes
  --trials N        alternating trials per size (default 15)
)";

struct Options {
  std::string backend = "mpi";
  int64_t max_bytes = INT64_MAX;
  int trials = 15;
};

// The MPI world carries the bench's own barriers and timings. At one rank under EMBER_BACKEND=nccl
// nothing initialised MPI, and one rank needs none: a GPU host without Open MPI runs it that way.
bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// One side of the comparison: a call, and what makes every call so far complete.
struct Side {
  std::function<void()> call;
  std::function<void()> finish = [] {};
};

// Without MPI (Gloo's ranks started by hand) the bench's own barriers and timings go through this.
comm::ProcessGroup* timing_group = nullptr;

// Mean time of `reps` back-to-back calls, the slowest rank's; ranks start together.
double time_trial(const Side& side, int reps) {
  const bool mpi = mpi_running();
  if (mpi)
    MPI_Barrier(MPI_COMM_WORLD);
  else if (timing_group)
    timing_group->barrier()->wait();
  double start = bench::now_seconds();
  for (int r = 0; r < reps; ++r) side.call();
  side.finish();
  double elapsed = (bench::now_seconds() - start) / reps;
  if (mpi) {
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  } else if (timing_group) {
    Tensor slowest = full({1}, elapsed, TensorOptions(kFloat64));
    timing_group->all_reduce(slowest, comm::ReduceOp::Max)->wait();
    elapsed = slowest.to_vector<double>()[0];
  }
  return elapsed;
}

struct Row {
  double ember_seconds, reference_seconds, ratio;
};

// Each trial times both sides back to back, in alternating order. Times are the medians over
// trials; the ratio (reference time / Ember time) is the median of the trials' own ratios, so
// that bandwidth drifting between trials (2x within seconds on the CPU VMs) cancels instead of
// entering a ratio of two medians.
Row compare(const Side& ember, const Side& reference, int reps, int trials) {
  std::vector<double> ember_trials, reference_trials, ratios;
  for (int t = 0; t < trials; ++t) {
    if (t % 2 == 0) reference_trials.push_back(time_trial(reference, reps));
    ember_trials.push_back(time_trial(ember, reps));
    if (t % 2 == 1) reference_trials.push_back(time_trial(reference, reps));
    ratios.push_back(reference_trials.back() / ember_trials.back());
  }
  return {bench::median(ember_trials), bench::median(reference_trials), bench::median(ratios)};
}

class Table {
 public:
  Table(const char* reference, int ranks)
      : reference_(reference), factor_(ranks > 1 ? 2.0 * (ranks - 1) / ranks : 1.0) {}

  void header(bool print) const {
    if (!print) return;
    const std::string us = reference_ + "_us", busbw = reference_ + "_busbw";
    std::printf("%10s %12s %12s %12s %12s %8s\n", "bytes", "ember_us", us.c_str(), "ember_busbw", busbw.c_str(),
                "ratio");
    std::printf("%10s %12s %12s %12s %12s %8s\n", "", "", "", "GB/s", "GB/s", "");
  }

  void row(int64_t bytes, const Row& r, bool print) {
    if (bytes >= 1000 * 1000) worst_large_ = std::isnan(worst_large_) ? r.ratio : std::min(worst_large_, r.ratio);
    if (!print) return;
    std::printf("%10lld %12.1f %12.1f %12.3f %12.3f %8.3f\n", static_cast<long long>(bytes), r.ember_seconds * 1e6,
                r.reference_seconds * 1e6, bytes / r.ember_seconds * factor_ / 1e9,
                bytes / r.reference_seconds * factor_ / 1e9, r.ratio);
    std::fflush(stdout);
  }

  // The lowest ratio at 1 MB and above, where bandwidth rather than per-call cost decides; nan when
  // no size reached 1 MB.
  double worst_large() const { return worst_large_; }

 private:
  std::string reference_;
  double factor_;
  double worst_large_ = NAN;
};

std::vector<int64_t> sizes_up_to(int64_t largest, int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4096; bytes < largest; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(largest);
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](int64_t b) { return b > max_bytes; }), sizes.end());
  return sizes;
}

int run_mpi(const Options& options, comm::ProcessGroup& world) {
  const int n = world.size(), rank = world.rank();
  if (rank == 0) std::printf("all_reduce (sum, float32): Ember ProcessGroup vs raw MPI_Allreduce, %d ranks\n", n);
  Table table("mpi", n);
  table.header(rank == 0);
  for (int64_t bytes : sizes_up_to(100'000'000, options.max_bytes)) {
    const int64_t count = bytes / 4;
    // Both sides reduce the same buffer. With one buffer each, whichever was allocated later ran
    // 5-10% faster at 16-100 MB (a standalone MPI program comparing plain buffers showed it both
    // ways round), which measured memory placement rather than the ProcessGroup. Zeros, so that
    // repeated sums stay finite.
    Tensor buffer = zeros({count});
    float* raw = buffer.data_ptr<float>();
    // Enough repetitions for ~0.1 s per trial, at least 3; many short alternating trials, because
    // shared-memory bandwidth can drift within seconds (docs/BENCHMARKS.md, issue 33's notes), and
    // alternating exposes both sides to the same drift.
    int reps = static_cast<int>(std::clamp<int64_t>(100'000'000 / std::max<int64_t>(bytes, 50'000), 3, 2000));
    Side ember{[&] { world.all_reduce(buffer, comm::ReduceOp::Sum)->wait(); }};
    Side mpi{[&] { MPI_Allreduce(MPI_IN_PLACE, raw, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }};
    ember.call();
    mpi.call();
    table.row(bytes, compare(ember, mpi, reps, options.trials), rank == 0);
  }
  if (rank == 0) std::printf("bench allreduce: ranks=%d busbw_vs_mpi_min_1mb=%.3f\n", n, table.worst_large());
  return 0;
}

// The yardstick's Gloo context, made as a user of raw Gloo makes one: a FileStore in a directory
// every rank sees (rank 0 makes it and tells the others its name: ranks on several hosts need a
// shared /tmp, as the namespace hosts of tools/bench/multihost_allreduce have), and a TCP device
// where Ember's Gloo group listens (the loopback interface for a job on one machine).
std::shared_ptr<::gloo::Context> raw_gloo_context(comm::ProcessGroup& world, std::string& dir) {
  Tensor name = zeros({64}, TensorOptions(kUInt8));
  if (world.rank() == 0) {
    char path[] = "/tmp/ember-allreduce-gloo-XXXXXX";
    if (::mkdtemp(path) == nullptr) throw std::runtime_error("cannot make a directory for Gloo's FileStore in /tmp");
    std::memcpy(name.data_ptr(), path, sizeof(path));
  }
  world.broadcast(name, 0)->wait();
  dir = reinterpret_cast<const char*>(name.data_ptr());
  ::gloo::rendezvous::FileStore store(dir);
  const std::optional<comm::MasterAddress> master = comm::master_address();
  auto device =
      ::gloo::transport::tcp::CreateDevice(comm::gloo_backend::device_attributes(master ? master->host : "127.0.0.1"));
  auto context = std::make_shared<::gloo::rendezvous::Context>(world.rank(), world.size());
  context->connectFullMesh(store, device);
  return context;
}

int run_gloo(const Options& options, comm::ProcessGroup& world) {
  const int n = world.size(), rank = world.rank();
  const bool mpi = mpi_running() || std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
  const bool started_mpi = mpi && !mpi_running();
  if (started_mpi) MPI_Init(nullptr, nullptr);
  if (!mpi) timing_group = &world;
  if (rank == 0)
    std::printf("all_reduce (sum, float32): Ember ProcessGroup over Gloo vs raw Gloo allreduce%s, %d ranks\n",
                mpi ? " (then vs raw MPI_Allreduce)" : "", n);
  std::string store_dir;
  auto context = raw_gloo_context(world, store_dir);
  uint32_t tag = 0;
  Table vs_gloo("gloo", n), vs_mpi("mpi", n);
  std::vector<std::pair<int64_t, Row>> mpi_rows;
  vs_gloo.header(rank == 0);
  for (int64_t bytes : sizes_up_to(100'000'000, options.max_bytes)) {
    const int64_t count = bytes / 4;
    Tensor buffer = zeros({count});  // shared by every side, as in run_mpi
    float* raw = buffer.data_ptr<float>();
    int reps = static_cast<int>(std::clamp<int64_t>(100'000'000 / std::max<int64_t>(bytes, 50'000), 3, 2000));
    Side ember{[&] { world.all_reduce(buffer, comm::ReduceOp::Sum)->wait(); }};
    Side gloo{[&] {
      ::gloo::AllreduceOptions opts(context);
      opts.setOutput(raw, static_cast<size_t>(count));
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
      opts.setTag(++tag);
      ::gloo::allreduce(opts);
    }};
    Side mpi_side{
        [&] { MPI_Allreduce(MPI_IN_PLACE, raw, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }};
    ember.call();
    gloo.call();
    vs_gloo.row(bytes, compare(ember, gloo, reps, options.trials), rank == 0);
    if (mpi) {
      mpi_side.call();
      mpi_rows.emplace_back(bytes, compare(ember, mpi_side, reps, options.trials));
    }
  }
  if (mpi) {
    vs_mpi.header(rank == 0);
    for (const auto& [bytes, row] : mpi_rows) vs_mpi.row(bytes, row, rank == 0);
  }
  if (rank == 0) {
    std::printf("bench allreduce: backend=gloo ranks=%d busbw_vs_gloo_min_1mb=%.3f", n, vs_gloo.worst_large());
    if (mpi) std::printf(" busbw_vs_mpi_min_1mb=%.3f", vs_mpi.worst_large());
    std::printf("\n");
  }
  world.barrier()->wait();
  if (rank == 0) std::filesystem::remove_all(store_dir);
  if (started_mpi) MPI_Finalize();
  return 0;
}

void check_nccl(ncclResult_t result, ncclComm_t comm, const char* what) {
  if (result == ncclSuccess) return;
  throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(result) + " (" + ncclGetLastError(comm) + ")");
}

// The yardstick's communicator: made as a user of raw NCCL makes one, apart from Ember's.
ncclComm_t raw_communicator(int rank, int size) {
  ncclUniqueId id;
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
  if (size > 1) MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, size, id, rank), nullptr, "ncclCommInitRank");
  return comm;
}

int run_nccl(const Options& options, comm::ProcessGroup& world) {
  const int n = world.size(), rank = world.rank();
  if (n > 1 && !mpi_running())
    throw std::runtime_error("--backend nccl at " + std::to_string(n) +
                             " ranks times them over MPI: start it under "
                             "mpirun (EMBER_NCCL_ID_FILE alone does not start MPI)");
  const int local_rank = comm::read_environment().local_rank, devices = cuda::device_count();
  if (local_rank >= devices)
    throw std::runtime_error(
        "rank " + std::to_string(rank) + " has LOCAL_RANK " + std::to_string(local_rank) + " but this machine has " +
        std::to_string(devices) + " CUDA device" + (devices == 1 ? "" : "s") +
        (devices == 0 ? " (on the emulator, set EMBER_EMULATED_GPUS)" : "; one NCCL rank per device"));
  cuda::set_device(local_rank);
  const Device device = Device::cuda(local_rank);
  const cuda::DeviceProperties properties = cuda::device_properties(local_rank);
  int version = 0;
  check_nccl(ncclGetVersion(&version), nullptr, "ncclGetVersion");
  if (rank == 0) {
    std::printf(
        "all_reduce (sum, float32): Ember ProcessGroup vs raw ncclAllReduce, %d rank%s, each on "
        "cuda:LOCAL_RANK (rank 0: %s), NCCL %d.%d.%d\n",
        n, n == 1 ? "" : "s", properties.name.c_str(), version / 10000, version % 10000 / 100, version % 100);
    if (properties.emulated)
      std::printf("emulated devices: the times are the CPU running the emulator; only the ratio means something\n");
    if (n == 1)
      std::printf(
          "one rank (a GPU hosts one NCCL rank): nothing crosses a link, so this times each side's cost "
          "per call; busbw is algbw\n");
  }
  ncclComm_t raw = raw_communicator(rank, n);
  const cuda::Stream stream = cuda::current_stream(local_rank);
  Table table("nccl", n);
  table.header(rank == 0);
  const int64_t largest = properties.emulated ? 4 << 20 : int64_t{1} << 30;
  for (int64_t bytes : sizes_up_to(largest, options.max_bytes)) {
    const int64_t count = bytes / 4;
    Tensor buffer = zeros({count}, TensorOptions(device));
    float* data = buffer.data_ptr<float>();
    auto synchronize = [&] { stream.synchronize(); };
    // wait() only orders the current stream after Ember's NCCL stream; the trial's synchronize
    // waits for the work itself.
    Side ember{[&] { world.all_reduce(buffer, comm::ReduceOp::Sum)->wait(); }, synchronize};
    Side nccl{[&] {
                check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, raw, stream.handle()), raw,
                           "ncclAllReduce");
              },
              synchronize};
    // Warm-up; Ember's first call also makes its communicator.
    for (const Side* side : {&ember, &nccl}) time_trial(*side, 1);
    // Enough repetitions for ~20 ms per trial on the slower side, at least 3.
    const double per_call = std::max(time_trial(ember, 3), time_trial(nccl, 3));
    const int reps = static_cast<int>(std::clamp(0.02 / per_call, 3.0, 2000.0));
    table.row(bytes, compare(ember, nccl, reps, options.trials), rank == 0);
  }
  check_nccl(ncclCommDestroy(raw), nullptr, "ncclCommDestroy");
  if (rank == 0)
    std::printf("bench allreduce: backend=nccl ranks=%d emulated=%d busbw_vs_nccl_min_1mb=%.3f\n", n,
                properties.emulated ? 1 : 0, table.worst_large());
  return 0;
}

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    const std::string value = i + 1 < argc ? argv[++i] : "";
    if (flag == "--backend" && (value == "mpi" || value == "gloo" || value == "nccl"))
      options.backend = value;
    else if (flag == "--max-bytes" && std::atoll(value.c_str()) >= 4096)
      options.max_bytes = std::atoll(value.c_str());
    else if (flag == "--trials" && std::atoi(value.c_str()) >= 1)
      options.trials = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "allreduce: bad flag or value: '%s %s'\n%s", flag.c_str(), value.c_str(), kUsage);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) return 2;
  try {
    auto world = comm::init();
    if (options.backend == "gloo") return run_gloo(options, *world);
    return options.backend == "nccl" ? run_nccl(options, *world) : run_mpi(options, *world);
  } catch (const std::exception& e) {
    if (comm::is_initialized() && comm::world()->size() > 1) comm::abort_job(std::string("allreduce: ") + e.what());
    std::fprintf(stderr, "allreduce: %s\n", e.what());
    return 1;
  }
}

// Training images/s of one model at one global batch in Ember's ways to use N CUDA devices:
//   single         cuda:0 alone with the whole batch: the yardstick;
//   data_parallel  DataParallel over cuda:0..N-1 in this process, the loss computed per replica
//                  (forward_loss), the batch split across the devices;
//   ddp            DistributedDataParallel with one process per device: this program re-launched
//                  under `mpirun -np N` in --worker mode, rank r on cuda:LOCAL_RANK with batch/N
//                  examples, gradients over NCCL. At N = 1 (a GPU host with one GPU, maybe no
//                  Open MPI) the one worker starts without mpirun, EMBER_BACKEND=nccl, as
//                  tools/bench/allreduce runs at one rank.
// Model: ResNet-20 (CIFAR, shortcut A), random 3xSxS images and 10-class labels made once from a
// fixed seed and kept on the devices (the whole batch on cuda:0 for single and data_parallel,
// which scatters it every step as DataParallel must; each rank's slice on its device for ddp);
// cross-entropy; SGD (lr 0.1, momentum 0.9, weight decay 5e-4); fp32. Each mode starts from
// the same weights (seed 0). Modes run one after another, each after `warmup` untimed steps.
//   images/s     global batch x timed steps / wall time of those steps, every device synchronised
//                before and after (ddp: the slowest rank's time, the ranks starting together)
//   vs single    images/s / single's images/s (the ideal is N)
//   peak MiB     the caching allocator's peak allocated bytes per device over the timed steps
//                (cuda::memory_stats), the allocator's own count, so emulated devices report it too
//   loss         the last timed step's loss: a check that the mode trains (finite, and equal
//                across the modes that do the same arithmetic, see below)
// On emulated devices (cuda/emu, EMBER_EMULATED_GPUS=N) the times are the CPU running the
// emulator: the output says so, and only that each mode runs means anything.
//
//   parallel_modes [--devices N] [--steps S] [--warmup W] [--batch B] [--image-size S] [--quick]
// Last line: `bench parallel_modes: devices=N emulated=0|1 batch=B steps=S single_images_per_second=X
// data_parallel_images_per_second=X ddp_images_per_second=X data_parallel_vs_single=R ddp_vs_single=R
// {single,data_parallel,ddp}_peak_mib=M (the highest device's) {single,data_parallel,ddp}_loss=L`,
// nan for a mode that failed (the exit status is then 1). With the same split, data_parallel's and
// ddp's losses agree (each device normalises its own chunk); at N = 1 all three do.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/functional.h"
#include "comm/init.h"
#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/device_properties.h"
#include "models/zoo.h"
#include "nn/optim/sgd.h"
#include "parallel/data_parallel.h"
#include "parallel/ddp.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember;

const double kNaN = std::nan("");

const char* kUsage = R"(usage: parallel_modes [flags]
  --devices N      devices to use, cuda:0 to cuda:N-1 (default: all)
  --batch B        global batch, the same in every mode (default 256; at least N)
  --steps S        timed steps per mode (default 20)
  --warmup W       untimed steps before them (default 3)
  --image-size S   images are 3xSxS (default 32, CIFAR's)
  --quick          a smoke run: --batch 8 --steps 2 --warmup 1 --image-size 8 (later flags override)
)";

struct Options {
  int devices = 0;  // 0: all
  int64_t batch = 256, image_size = 32;
  int steps = 20, warmup = 3;
  bool quick = false, worker = false;
};

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a != "--quick") continue;
    o.quick = true;
    o.batch = 8;
    o.steps = 2;
    o.warmup = 1;
    o.image_size = 8;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--quick") continue;
    if (flag == "--worker") {
      o.worker = true;
      continue;
    }
    const bool has_value = i + 1 < args.size();
    const std::string value = has_value ? args[++i] : "";
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    const bool integer = has_value && !value.empty() && *end == '\0';
    if (flag == "--devices" && integer && number >= 1)
      o.devices = static_cast<int>(number);
    else if (flag == "--batch" && integer && number >= 1)
      o.batch = number;
    else if (flag == "--steps" && integer && number >= 1)
      o.steps = static_cast<int>(number);
    else if (flag == "--warmup" && integer && number >= 0)
      o.warmup = static_cast<int>(number);
    else if (flag == "--image-size" && integer && number >= 4)
      o.image_size = number;
    else {
      std::fprintf(stderr, "parallel_modes: bad flag or value: '%s%s%s'\n%s", flag.c_str(), has_value ? " " : "",
                   value.c_str(), kUsage);
      return std::nullopt;
    }
  }
  return o;
}

// One mode's model and optimizer, from the same seed in every mode.
struct Trainee {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::SGD> optimizer;
};

Trainee make_trainee(Device device, const Options& o) {
  manual_seed(0);
  Trainee t;
  t.model = models::make_model("resnet20", 3, o.image_size, 10);
  t.model->to(device);
  t.model->train();
  t.optimizer =
      std::make_unique<optim::SGD>(t.model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  return t;
}

// The global batch, the same in every mode and process: images [batch, 3, S, S], labels [batch].
std::pair<Tensor, Tensor> make_batch(const Options& o) {
  Generator generator(1234);
  Tensor images = randn({o.batch, 3, o.image_size, o.image_size}, {}, &generator);
  Tensor labels = randint(0, 10, {o.batch}, TensorOptions(kInt64), &generator);
  return {images, labels};
}

struct Measurement {
  double seconds = kNaN;
  std::vector<double> peak_bytes;  // per device
  double loss = kNaN;
  std::string error;  // why the mode did not run; empty when it did
};

void synchronize(const std::vector<int>& devices) {
  for (int d : devices) cuda::synchronize(d);
}

// `warmup` untimed steps, then `steps` timed ones with `devices` synchronised around them.
Measurement time_steps(const std::function<Tensor()>& step, const std::vector<int>& devices, const Options& o) {
  Measurement m;
  for (int i = 0; i < o.warmup; ++i) step();
  synchronize(devices);
  for (int d : devices) cuda::reset_peak_memory_stats(d);
  const double start = bench::now_seconds();
  Tensor loss;
  for (int i = 0; i < o.steps; ++i) loss = step();
  synchronize(devices);
  m.seconds = bench::now_seconds() - start;
  for (int d : devices) m.peak_bytes.push_back(static_cast<double>(cuda::memory_stats(d).peak_allocated_bytes));
  m.loss = loss.item<double>();
  return m;
}

Measurement run_single(const Options& o) {
  const Device gpu = Device::cuda(0);
  Trainee t = make_trainee(gpu, o);
  auto [host_images, host_labels] = make_batch(o);
  const Tensor images = host_images.to(gpu), labels = host_labels.to(gpu);
  return time_steps(
      [&] {
        t.optimizer->zero_grad();
        Tensor loss = cross_entropy(t.model->forward(images), labels);
        loss.backward();
        t.optimizer->step();
        return loss;
      },
      {0}, o);
}

Measurement run_data_parallel(const Options& o, int n) {
  Trainee t = make_trainee(Device::cuda(0), o);
  std::vector<Device> devices;
  std::vector<int> indices;
  for (int d = 0; d < n; ++d) {
    devices.push_back(Device::cuda(d));
    indices.push_back(d);
  }
  auto dp = std::make_shared<parallel::DataParallel>(t.model, devices);
  auto [host_images, host_labels] = make_batch(o);
  const Tensor images = host_images.to(devices[0]), labels = host_labels.to(devices[0]);
  const parallel::ReplicaLossFn loss_fn = [](const Tensor& out, const Tensor& target) {
    return cross_entropy(out, target);
  };
  return time_steps(
      [&] {
        t.optimizer->zero_grad();
        Tensor loss = dp->forward_loss(images, labels, loss_fn).loss;
        loss.backward();
        t.optimizer->step();
        return loss;
      },
      indices, o);
}

// ---- ddp: the worker (one rank of mpirun -np N) and the launch ----

constexpr const char* kWorkerTag = "parallel_modes worker:";

// Rank r trains on its slice of the global batch (sizes differ by at most one) on cuda:LOCAL_RANK;
// rank 0 prints the slowest rank's time and every rank's peak.
int run_worker(const Options& o) {
  auto world = comm::init();
  const int rank = world->rank(), size = world->size();
  const int local_rank = comm::read_environment().local_rank, count = cuda::device_count();
  if (local_rank >= count)
    throw std::runtime_error("rank " + std::to_string(rank) + " has LOCAL_RANK " + std::to_string(local_rank) +
                             " but this machine has " + std::to_string(count) + " CUDA device" +
                             (count == 1 ? "" : "s"));
  if (o.batch < size) throw std::runtime_error("--batch " + std::to_string(o.batch) + " is below the rank count");
  cuda::set_device(local_rank);
  const Device gpu = Device::cuda(local_rank);
  const int64_t share = o.batch / size, extra = o.batch % size;
  const int64_t rows = share + (rank < extra ? 1 : 0), offset = rank * share + std::min<int64_t>(rank, extra);
  auto [host_images, host_labels] = make_batch(o);
  const Tensor images = host_images.narrow(0, offset, rows).to(gpu);
  const Tensor labels = host_labels.narrow(0, offset, rows).to(gpu);
  Trainee t = make_trainee(gpu, o);
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(t.model, world);
  auto step = [&] {
    t.optimizer->zero_grad();
    Tensor loss = cross_entropy(ddp->forward(images), labels);
    loss.backward();
    t.optimizer->step();
    return loss;
  };
  // The collectives carry CUDA tensors, so they work under NCCL alone too (EMBER_BACKEND=nccl).
  auto reduce = [&](Tensor t, comm::ReduceOp op) {
    world->all_reduce(t, op)->wait();
    return t.to_vector<double>();
  };
  for (int i = 0; i < o.warmup; ++i) step();
  cuda::synchronize(local_rank);
  reduce(zeros({1}, TensorOptions(kFloat64).device(gpu)), comm::ReduceOp::Sum);  // the ranks start together
  cuda::synchronize(local_rank);
  cuda::reset_peak_memory_stats(local_rank);
  const double start = bench::now_seconds();
  Tensor loss;
  for (int i = 0; i < o.steps; ++i) loss = step();
  cuda::synchronize(local_rank);
  const double seconds = bench::now_seconds() - start;
  const double peak = static_cast<double>(cuda::memory_stats(local_rank).peak_allocated_bytes);
  const std::vector<double> slowest =
      reduce(full({1}, seconds, TensorOptions(kFloat64).device(gpu)), comm::ReduceOp::Max);
  Tensor peaks = zeros({size}, TensorOptions(kFloat64));
  peaks.data_ptr<double>()[rank] = peak;
  const std::vector<double> all_peaks = reduce(peaks.to(gpu), comm::ReduceOp::Sum);
  // Rank 0's loss is the mean over its slice; the global loss is their weighted mean.
  const std::vector<double> loss_sum =
      reduce(full({1}, loss.item<double>() * static_cast<double>(rows), TensorOptions(kFloat64).device(gpu)),
             comm::ReduceOp::Sum);
  if (rank == 0) {
    std::string peak_list;
    for (double p : all_peaks) peak_list += (peak_list.empty() ? "" : ",") + std::to_string(static_cast<int64_t>(p));
    std::printf("%s ranks=%d seconds=%.9g loss=%.9g peak_bytes=%s\n", kWorkerTag, size, slowest[0],
                loss_sum[0] / static_cast<double>(o.batch), peak_list.c_str());
    std::fflush(stdout);
  }
  return 0;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// The number after `key=` in `line`, or NaN.
double field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return kNaN;
  return std::strtod(line.c_str() + at + key.size() + 2, nullptr);
}

// Runs `command` through the shell, echoing its output indented; returns the worker's result line
// (empty if none) and sets `status` to its exit status.
std::string run_child(const std::string& command, int& status) {
  std::printf("  $ %s\n", command.c_str());
  std::fflush(stdout);
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return "";
  }
  std::string result;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    std::printf("  | %s\n", line.c_str());
    std::fflush(stdout);
    if (line.rfind(kWorkerTag, 0) == 0) result = line;
  }
  const int raw = pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
  return result;
}

// One worker per device: under mpirun -np N (private session directory, as tests/mpi_run.sh), or
// at N = 1 started directly with NCCL alone, needing no MPI.
Measurement run_ddp(const Options& o, int n) {
  Measurement m;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::ostringstream worker;
  worker << shell_quote(self) << " --worker --batch " << o.batch << " --steps " << o.steps << " --warmup " << o.warmup
         << " --image-size " << o.image_size;
  std::string command, session;
  if (n == 1) {
    command = "env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 EMBER_BACKEND=nccl " + worker.str();
  } else {
    const char* tmp = std::getenv("TEST_TMPDIR");
    if (tmp == nullptr || *tmp == '\0') tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/parallel_modes.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      m.error = "cannot make a session directory from " + pattern;
      return m;
    }
    session = pattern;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    command = "mpirun -np " + std::to_string(n) + " --oversubscribe --bind-to none --mca orte_tmpdir_base " +
              shell_quote(session) + " --mca btl_vader_backing_directory " + shell_quote(session);
    // -x of an unset variable is an error on some Open MPI versions: only those that are set.
    for (const char* name : {"EMBER_EMULATED_GPUS", "EMBER_EMULATED_GPU_MEMORY", "EMBER_NUM_THREADS", "EMBER_BACKEND",
                             "EMBER_COLLECTIVE_TIMEOUT", "EMBER_DISTRIBUTED_DEBUG", "LD_LIBRARY_PATH", "ASAN_OPTIONS",
                             "LSAN_OPTIONS", "UBSAN_OPTIONS"}) {
      if (std::getenv(name) != nullptr) command += std::string(" -x ") + name;
    }
    command += " " + worker.str();
  }
  int status = 0;
  const std::string line = run_child(command, status);
  if (!session.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(session, ignored);
  }
  if (status != 0 || line.empty()) {
    m.error = "the workers " + (status != 0 ? "exited with status " + std::to_string(status) : "printed no result") +
              (status == 127 ? " (is mpirun, Open MPI's launcher, on PATH?)" : "");
    return m;
  }
  m.seconds = field(line, "seconds");
  m.loss = field(line, "loss");
  const size_t at = line.find(" peak_bytes=");
  if (at != std::string::npos) {
    std::stringstream list(line.substr(at + 12));
    for (std::string item; std::getline(list, item, ',');) m.peak_bytes.push_back(std::strtod(item.c_str(), nullptr));
  }
  return m;
}

// ---- the report ----

struct Row {
  std::string mode, devices;
  Measurement m;
};

double max_mib(const Measurement& m) {
  if (!m.error.empty() || m.peak_bytes.empty()) return kNaN;
  return *std::max_element(m.peak_bytes.begin(), m.peak_bytes.end()) / (1 << 20);
}

std::string peak_cell(const Measurement& m) {
  if (m.peak_bytes.empty()) return "-";
  std::string cell;
  char number[32];
  for (size_t i = 0; i < m.peak_bytes.size(); ++i) {
    std::snprintf(number, sizeof(number), "%s%.1f", i ? "/" : "", m.peak_bytes[i] / (1 << 20));
    cell += number;
  }
  return cell;
}

std::string device_range(int n) { return n == 1 ? "cuda:0" : "cuda:0-" + std::to_string(n - 1); }

int run_parent(const Options& o) {
  const int count = cuda::device_count();
  if (count == 0) {
    std::fprintf(stderr, "parallel_modes: no CUDA device (on the emulator, set EMBER_EMULATED_GPUS=N)\n");
    return 1;
  }
  const int n = o.devices == 0 ? count : o.devices;
  if (n > count) {
    std::fprintf(stderr, "parallel_modes: --devices %d: this machine has %d CUDA device%s\n", n, count,
                 count == 1 ? "" : "s");
    return 2;
  }
  if (o.batch < n) {
    std::fprintf(stderr, "parallel_modes: --batch %lld: expected at least one example per device (%d)\n",
                 static_cast<long long>(o.batch), n);
    return 2;
  }
  const cuda::DeviceProperties properties = cuda::device_properties(0);
  std::printf(
      "parallel_modes: ResNet-20 training, global batch %lld of 3x%lldx%lld, fp32, SGD momentum 0.9; "
      "%d + %d steps per mode; %d device%s (%s: %s)\n",
      static_cast<long long>(o.batch), static_cast<long long>(o.image_size), static_cast<long long>(o.image_size),
      o.warmup, o.steps, n, n == 1 ? "" : "s", device_range(n).c_str(), properties.name.c_str());
  if (properties.emulated) {
    std::printf(
        "emulated devices (cuda/emu, EMBER_EMULATED_GPUS): the times are the CPU running the emulator, so "
        "images/s and speedups say nothing about GPUs; this run only checks that each mode runs\n");
  }
  if (n == 1) std::printf("one device: data_parallel is DataParallel over cuda:0 alone, ddp one process\n");
  std::fflush(stdout);

  std::vector<Row> rows = {{"single", "cuda:0", {}},
                           {"data_parallel", device_range(n), {}},
                           {"ddp", device_range(n) + ", " + std::to_string(n) + " process" + (n == 1 ? "" : "es"), {}}};
  const std::vector<std::function<Measurement()>> modes = {
      [&] { return run_single(o); }, [&] { return run_data_parallel(o, n); }, [&] { return run_ddp(o, n); }};
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%s...\n", rows[i].mode.c_str());
    std::fflush(stdout);
    try {
      rows[i].m = modes[i]();
    } catch (const std::exception& e) {
      rows[i].m.error = e.what();
    }
    cuda::empty_cache();
  }

  auto ips = [&](const Row& r) {
    return r.m.error.empty() ? static_cast<double>(o.batch) * o.steps / r.m.seconds : kNaN;
  };
  const double single = ips(rows[0]);
  std::printf("\n%-14s %-22s %12s %10s %22s %8s\n", "mode", "devices", "images/s", "vs single", "peak MiB per device",
              "loss");
  bool all_ran = true;
  for (const Row& r : rows) {
    if (!r.m.error.empty()) {
      all_ran = false;
      std::printf("%-14s %-22s failed: %s\n", r.mode.c_str(), r.devices.c_str(), r.m.error.c_str());
      continue;
    }
    std::printf("%-14s %-22s %12.1f %10.3f %22s %8.4f\n", r.mode.c_str(), r.devices.c_str(), ips(r), ips(r) / single,
                peak_cell(r.m).c_str(), r.m.loss);
  }
  if (properties.emulated) std::printf("(emulated: images/s and vs single measure the emulator, not a GPU)\n");
  std::printf(
      "bench parallel_modes: devices=%d emulated=%d batch=%lld steps=%d single_images_per_second=%.1f "
      "data_parallel_images_per_second=%.1f ddp_images_per_second=%.1f data_parallel_vs_single=%.3f "
      "ddp_vs_single=%.3f single_peak_mib=%.1f data_parallel_peak_mib=%.1f ddp_peak_mib=%.1f single_loss=%.5f "
      "data_parallel_loss=%.5f ddp_loss=%.5f\n",
      n, properties.emulated ? 1 : 0, static_cast<long long>(o.batch), o.steps, single, ips(rows[1]), ips(rows[2]),
      ips(rows[1]) / single, ips(rows[2]) / single, max_mib(rows[0].m), max_mib(rows[1].m), max_mib(rows[2].m),
      rows[0].m.loss, rows[1].m.loss, rows[2].m.loss);
  return all_ran ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::printf("%s", kUsage);
      return 0;
    }
  }
  const std::optional<Options> options = parse(argc, argv);
  if (!options) return 2;
  try {
    return options->worker ? run_worker(*options) : run_parent(*options);
  } catch (const std::exception& e) {
    if (comm::is_initialized() && comm::world()->size() > 1)
      comm::abort_job(std::string("parallel_modes: ") + e.what());
    std::fprintf(stderr, "parallel_modes: %s\n", e.what());
    return 1;
  }
}

// spawn: starting workers (re-executing the program, or forking a single-threaded one), sending
// them their Shared, and watching them until all finish or the first one fails.
#include "parallel/multiprocessing/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/runtime.h"
#include "core/cpu/thread_pool.h"
#include "core/error.h"
#include "parallel/multiprocessing/shared_wire.h"

extern char** environ;

namespace ember::multiprocessing {

namespace {

constexpr const char* kEntryEnv = "EMBER_MP_ENTRY";
constexpr const char* kRankEnv = "EMBER_MP_RANK";
constexpr const char* kWorldEnv = "EMBER_MP_WORLD";
constexpr const char* kChannelEnv = "EMBER_MP_CHANNEL";
constexpr char kDone = 'D', kFailed = 'E';

struct Entries {
  std::mutex mu;
  std::map<std::string, EntryFn> by_name;
};

Entries& entries() {
  static auto* e = new Entries;
  return *e;
}

std::string entry_name(EntryFn fn) {
  Entries& e = entries();
  std::lock_guard<std::mutex> lock(e.mu);
  for (const auto& [name, f] : e.by_name) {
    if (f == fn) return name;
  }
  return "";
}

int this_rank = -1;

// ---- the worker side ----

[[noreturn]] void finish_worker(int channel, bool ok, const std::string& error) {
  try {
    detail::Writer w;
    w.raw(ok ? &kDone : &kFailed, 1);
    w.text(error);
    detail::send_message(channel, w.finish(), "spawn");
  } catch (...) {
    // The parent still sees the exit status.
  }
  std::fflush(nullptr);
  std::exit(ok ? 0 : 1);
}

[[noreturn]] void run_entry(EntryFn fn, const std::string& name, int rank, int world, int channel, Shared& shared) {
  this_rank = rank;
  try {
    fn(rank, world, shared);
  } catch (const std::exception& e) {
    finish_worker(channel, false, e.what());
  } catch (...) {
    finish_worker(channel, false, "entry '" + name + "' threw a non-standard exception");
  }
  finish_worker(channel, true, "");
}

// Runs this process's entry when it is a re-executed worker; returns otherwise. `called` is the
// entry a guard-less main reached spawn with.
void dispatch_if_worker(const std::string& called) {
  static std::once_flag once;
  static bool pending = false;
  std::call_once(once, [] { pending = std::getenv(kEntryEnv) != nullptr; });
  if (!pending) return;
  pending = false;
  const std::string name = std::getenv(kEntryEnv);
  const int rank = std::atoi(std::getenv(kRankEnv) ? std::getenv(kRankEnv) : "-1");
  const int world = std::atoi(std::getenv(kWorldEnv) ? std::getenv(kWorldEnv) : "0");
  const int channel = std::atoi(std::getenv(kChannelEnv) ? std::getenv(kChannelEnv) : "-1");
  // A spawn inside the worker starts workers of its own.
  unsetenv(kEntryEnv);
  unsetenv(kRankEnv);
  unsetenv(kWorldEnv);
  unsetenv(kChannelEnv);
  fcntl(channel, F_SETFD, FD_CLOEXEC);
  if (!called.empty() && called != name) {
    finish_worker(channel, false,
                  "spawn: this worker was started for entry '" + name + "', but the program reached spawn with '" +
                      called + "' first; call multiprocessing::worker_guard() at the top of main");
  }
  EntryFn fn = nullptr;
  {
    Entries& e = entries();
    std::lock_guard<std::mutex> lock(e.mu);
    auto it = e.by_name.find(name);
    if (it != e.by_name.end()) fn = it->second;
  }
  if (fn == nullptr) finish_worker(channel, false, "spawn: the worker program has no entry named '" + name + "'");
  Shared shared;
  try {
    auto message = detail::receive_message(channel, -1, "spawn");
    EMBER_CHECK(message.has_value(), "spawn: the parent closed the channel before sending the shared state");
    shared = detail::decode_shared(*message);
  } catch (const std::exception& e) {
    finish_worker(channel, false, e.what());
  }
  run_entry(fn, name, rank, world, channel, shared);
}

// ---- the parent side ----

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
    closedir(d);
  }
  return n;
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  }
  return args;
}

std::string describe_status(int status) {
  std::ostringstream out;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    out << "killed by signal " << sig << " (" << (sigdescr_np(sig) ? sigdescr_np(sig) : "?") << ")";
  } else {
    out << "exited with status " << WEXITSTATUS(status);
  }
  return out.str();
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int channel = -1;  // the parent's end
  bool exited = false;
  int status = 0;
  std::string error;  // reported failure
};

// Records the worker's exit if it has exited (`wait`: once it has); true once it has.
bool reap(Worker& w, bool wait = false) {
  if (w.exited) return true;
  int status = 0;
  const pid_t r = waitpid(w.pid, &status, wait ? 0 : WNOHANG);
  if (r == 0) return false;
  // r < 0: not our child any more (reaped elsewhere); nothing left to wait for.
  w.exited = true;
  w.status = r == w.pid ? status : 0;
  return true;
}

// Reads whatever the worker has said so far.
void drain(Worker& w) {
  while (w.channel >= 0) {
    bool eof = false;
    std::optional<detail::Message> m;
    try {
      m = detail::receive_message(w.channel, 0, "spawn", &eof);
    } catch (const std::exception&) {
      eof = true;
    }
    if (!m) {
      if (eof) {
        close(w.channel);
        w.channel = -1;
      }
      return;
    }
    try {
      detail::Reader r(*m, "spawn");
      char kind = 0;
      r.raw(&kind, 1);
      const std::string text = r.text();
      if (kind == kFailed) w.error = text;
    } catch (const std::exception& e) {
      w.error = std::string("sent a malformed report: ") + e.what();
    }
  }
}

bool failed(const Worker& w) {
  return !w.error.empty() || (w.exited && (WIFSIGNALED(w.status) || WEXITSTATUS(w.status) != 0));
}

void stop_all(std::vector<Worker>& workers) {
  for (auto& w : workers) {
    // A worker never started (a failed start) has no pid: kill(-1) would signal every process.
    if (w.pid <= 0) w.exited = true;
    if (!w.exited) kill(w.pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (auto& w : workers) {
    while (!reap(w)) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(w.pid, SIGKILL);
        reap(w, /*wait=*/true);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (w.channel >= 0) {
      close(w.channel);
      w.channel = -1;
    }
  }
}

[[noreturn]] void report_failure(std::vector<Worker>& workers, Worker& first, int n) {
  // A worker that reported an error is exiting: wait a moment to report its status too.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!reap(first) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  drain(first);
  const Worker copy = first;
  stop_all(workers);
  std::ostringstream out;
  out << "spawn: worker " << copy.rank << " of " << n << " (pid " << copy.pid << ") failed";
  if (copy.exited) out << ": " << describe_status(copy.status);
  if (!copy.error.empty()) out << ": " << copy.error;
  if (n > 1) out << "; the other workers were stopped";
  EMBER_FAIL(out.str());
}

void check_fork_allowed() {
  const DeviceRuntime* cuda = find_runtime(DeviceType::CUDA);
  const bool cuda_started = cuda != nullptr && cuda->runtime_started != nullptr && cuda->runtime_started();
  EMBER_CHECK(!cuda_started,
              "spawn: the fork start method is refused once the process has used CUDA: a forked child cannot "
              "re-initialize CUDA. Use the default start method, which re-executes the program");
  const int threads = thread_count();
  EMBER_CHECK(threads <= 1, "spawn: the fork start method needs a single-threaded process, but this one runs ", threads,
              " threads (OpenMP's team after a parallel op, data-loader workers, ...); a forked copy would have "
              "only the calling thread and could deadlock on locks the others held. Use the default start "
              "method, which re-executes the program");
}

}  // namespace

namespace detail {
EntryRegistration::EntryRegistration(const char* name, EntryFn fn) {
  Entries& e = entries();
  std::lock_guard<std::mutex> lock(e.mu);
  e.by_name[name] = fn;
}
}  // namespace detail

void worker_guard() { dispatch_if_worker(""); }

int worker_rank() { return this_rank; }

int default_worker_threads(int n) {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    const int t = std::atoi(env);
    if (t > 0) return t;
  }
  return std::max(1, usable_cores() / std::max(1, n));
}

struct Workers::State {
  int n = 0;
  std::vector<Worker> workers;
  bool finished = false;
};

Workers start(int n, EntryFn fn, const Shared& shared, const SpawnOptions& options) {
  EMBER_CHECK(n >= 1, "spawn: expected at least 1 worker, got ", n);
  EMBER_CHECK(fn != nullptr, "spawn: the entry function is null");
  const std::string name = entry_name(fn);
  EMBER_CHECK(!name.empty(),
              "spawn: the entry function is not registered; add EMBER_SPAWN_ENTRY(fn) beside its "
              "definition so that a re-executed worker can find it");
  dispatch_if_worker(name);
  const bool fork_only = options.start_method == StartMethod::kFork;
  if (fork_only) check_fork_allowed();
  const int threads = options.threads_per_worker > 0 ? options.threads_per_worker : default_worker_threads(n);
  // Everything a re-executed worker needs is prepared before fork: between fork and exec a child
  // of a threaded parent may only make async-signal-safe calls.
  const std::vector<std::string> args = own_command_line();
  char exe[4096];
  const ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  EMBER_CHECK(exe_len > 0, "spawn: cannot find this program's executable (/proc/self/exe: ", std::strerror(errno), ")");
  exe[exe_len] = '\0';
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    const std::string key = var.substr(0, var.find('='));
    if (key.rfind("EMBER_MP_", 0) == 0 || key == "EMBER_NUM_THREADS" || key == "OMP_NUM_THREADS") continue;
    base_env.push_back(var);
  }
  base_env.push_back("EMBER_NUM_THREADS=" + std::to_string(threads));
  base_env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));

  auto state = std::make_unique<Workers::State>();
  state->n = n;
  std::vector<Worker>& workers = state->workers;
  workers.resize(n);
  const pid_t parent = getpid();
  for (int rank = 0; rank < n; ++rank) {
    Worker& w = workers[rank];
    w.rank = rank;
    int ends[2];
    try {
      detail::socket_pair(ends, "spawn");
    } catch (...) {
      stop_all(workers);
      throw;
    }
    std::vector<std::string> env = base_env;
    env.push_back(std::string(kEntryEnv) + "=" + name);
    env.push_back(std::string(kRankEnv) + "=" + std::to_string(rank));
    env.push_back(std::string(kWorldEnv) + "=" + std::to_string(n));
    env.push_back(std::string(kChannelEnv) + "=" + std::to_string(ends[1]));
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      close(ends[0]);
      close(ends[1]);
      stop_all(workers);
      EMBER_FAIL("spawn: cannot start worker ", rank, " of ", n, " (fork: ", std::strerror(err), ")");
    }
    if (pid == 0) {
      // A worker must not outlive the parent: nothing would join it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      close(ends[0]);
      if (!fork_only) {
        fcntl(ends[1], F_SETFD, 0);
        execve(exe, argv.data(), envp.data());
        _exit(127);
      }
      for (const auto& other : workers) {
        if (other.channel >= 0) close(other.channel);
      }
      cpu::set_num_threads(threads);
      Shared copy = shared;
      run_entry(fn, name, rank, n, ends[1], copy);
    }
    close(ends[1]);
    w.pid = pid;
    w.channel = ends[0];
  }

  if (!fork_only) {
    detail::Message setup = detail::encode_shared(shared);
    for (auto& w : workers) {
      try {
        detail::send_message(w.channel, setup, "spawn");
      } catch (const std::exception&) {
        // The worker is gone already; join reports how it ended.
      }
    }
  }
  return Workers(std::move(state));
}

Workers::Workers(std::unique_ptr<State> state) : state_(std::move(state)) {}
Workers::Workers(Workers&&) noexcept = default;
Workers& Workers::operator=(Workers&&) noexcept = default;

Workers::~Workers() {
  if (state_ != nullptr && !state_->finished) stop_all(state_->workers);
}

std::vector<int> Workers::pids() const {
  std::vector<int> out;
  for (const auto& w : state_->workers) out.push_back(w.pid);
  return out;
}

bool Workers::done() {
  if (state_->finished) return true;
  std::vector<Worker>& workers = state_->workers;
  bool all_done = true;
  for (auto& w : workers) {
    drain(w);
    if (!w.exited && reap(w)) drain(w);
    if (failed(w)) {
      state_->finished = true;
      report_failure(workers, w, state_->n);
    }
    all_done = all_done && w.exited;
  }
  if (all_done) {
    state_->finished = true;
    for (auto& w : workers) {
      if (w.channel >= 0) close(w.channel);
      w.channel = -1;
    }
  }
  return all_done;
}

void Workers::join(std::optional<std::chrono::milliseconds> timeout) {
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    std::vector<pollfd> fds;
    for (const auto& w : state_->workers) {
      if (w.channel >= 0) fds.push_back({w.channel, POLLIN, 0});
    }
    if (!fds.empty()) {
      poll(fds.data(), fds.size(), 50);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (timeout && std::chrono::steady_clock::now() - start > *timeout) {
      std::ostringstream late;
      for (const auto& w : state_->workers) {
        if (!w.exited) late << (late.tellp() > 0 ? ", " : "") << w.rank;
      }
      state_->finished = true;
      stop_all(state_->workers);
      EMBER_FAIL("spawn: worker(s) ", late.str(), " of ", state_->n, " did not finish within ", timeout->count(),
                 " ms; all were stopped");
    }
  }
}

void spawn(int n, EntryFn fn, const Shared& shared, const SpawnOptions& options) {
  start(n, fn, shared, options).join(options.timeout);
}

}  // namespace ember::multiprocessing

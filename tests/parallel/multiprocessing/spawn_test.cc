// spawn on this machine: workers see and change the parent's shared memory (and each other's
// writes), a failing or kill -9'd worker is reported by rank with its status and error text and
// the others are stopped, thread counts default to cores / n, and a model of 10,000 parameters is
// shared under `ulimit -n 256`.
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "parallel/multiprocessing/multiprocessing.h"
#include "tests/parallel/multiprocessing/mp_helpers.h"

using namespace ember;
namespace mp = ember::multiprocessing;
using Clock = std::chrono::steady_clock;

namespace {

// Waits (bounded) until element `i` of a shared int64 tensor becomes `value`.
bool wait_for(const Tensor& t, int64_t i, int64_t value, double seconds) {
  volatile int64_t* p = t.data_ptr<int64_t>() + i;
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (*p != value) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void write_and_meet(int rank, int n, mp::Shared& shared) {
  Tensor slots = shared.tensor("slots");
  Tensor board = shared.tensor("board");
  EMBER_CHECK(slots.is_shared(), "the worker's tensor is not shared");
  const double seen = slots.select(0, rank).item<double>();
  EMBER_CHECK(seen == 100.0 + rank, "worker ", rank, " read ", seen, " where the parent wrote ", 100 + rank);
  slots.select(0, rank).fill_(rank * 10.0 + 1.0);
  EMBER_CHECK(shared.get("greeting") == "hello", "the setting arrived as '", shared.get("greeting"), "'");
  // Worker 0 writes, every other worker waits to see it: memory shared between workers too.
  if (rank == 0) board.data_ptr<int64_t>()[0] = 42;
  EMBER_CHECK(wait_for(board, 0, 42, 30), "worker ", rank, " never saw worker 0's write");
  board.data_ptr<int64_t>()[1 + rank] = n;
}
EMBER_SPAWN_ENTRY(write_and_meet);

void fail_on_one(int rank, int, mp::Shared&) {
  if (rank == 1) EMBER_FAIL("fail_on_one: worker 1 fails on purpose");
  std::this_thread::sleep_for(std::chrono::seconds(60));
}
EMBER_SPAWN_ENTRY(fail_on_one);

void exit_three(int rank, int, mp::Shared&) {
  if (rank == 0) std::exit(3);
}
EMBER_SPAWN_ENTRY(exit_three);

void wait_to_be_killed(int rank, int, mp::Shared& shared) {
  shared.tensor("pids").data_ptr<int64_t>()[rank] = getpid();
  std::this_thread::sleep_for(std::chrono::seconds(60));
}
EMBER_SPAWN_ENTRY(wait_to_be_killed);

void report_threads(int rank, int, mp::Shared& shared) {
  shared.tensor("threads").data_ptr<int64_t>()[rank] = cpu::num_threads();
}
EMBER_SPAWN_ENTRY(report_threads);

void never_registered(int, int, mp::Shared&) {}

// A model of 10,000 small parameters, as a worker and the parent both build it.
struct ManyParams : nn::Module {
  explicit ManyParams(int count) {
    for (int i = 0; i < count; ++i) register_parameter("p" + std::to_string(i), zeros({1 + i % 5}));
  }
};
constexpr int kManyParams = 10000;

void add_to_my_share(int rank, int n, mp::Shared& shared) {
  ManyParams own(kManyParams);
  shared.attach("model", own);
  auto params = own.parameters();
  NoGradGuard no_grad;
  for (int i = rank; i < kManyParams; i += n) params[i].add_(rank + 1);
}
EMBER_SPAWN_ENTRY(add_to_my_share);

std::string spawn_error(int n, mp::EntryFn fn, const mp::Shared& shared, const mp::SpawnOptions& options = {}) {
  try {
    mp::spawn(n, fn, shared, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("workers read the parent's shared tensors, write them, and see each other's writes") {
  const auto shm_before = testing::dev_shm();
  const int n = 3;
  Tensor slots = arange(100, 100 + n, 1, kFloat64).share_memory_();
  Tensor board = zeros({1 + n}, kInt64).share_memory_();
  mp::spawn(n, write_and_meet, mp::Shared().add("slots", slots).add("board", board).set("greeting", "hello"));
  for (int r = 0; r < n; ++r) {
    CHECK(slots.select(0, r).item<double>() == r * 10.0 + 1.0);
    CHECK(board.select(0, 1 + r).item<int64_t>() == n);
  }
  CHECK(testing::dev_shm() == shm_before);
}

TEST_CASE("the first failing worker is named with its error text, and the others are stopped") {
  const auto start = Clock::now();
  const std::string m = spawn_error(3, fail_on_one, mp::Shared());
  INFO(m);
  CHECK(contains(m, "spawn: worker 1 of 3 (pid "));
  CHECK(contains(m, "exited with status 1"));
  CHECK(contains(m, "fail_on_one: worker 1 fails on purpose"));
  CHECK(contains(m, "the other workers were stopped"));
  CHECK(Clock::now() - start < std::chrono::seconds(30));  // not the others' 60 s sleep

  const std::string exit3 = spawn_error(2, exit_three, mp::Shared());
  INFO(exit3);
  CHECK(contains(exit3, "worker 0 of 2"));
  CHECK(contains(exit3, "exited with status 3"));
}

TEST_CASE("kill -9 of one worker is reported by the parent, and leaves nothing in /dev/shm") {
  const auto shm_before = testing::dev_shm();
  const int n = 3;
  Tensor pids = zeros({n}, kInt64).share_memory_();
  const size_t fds_before = testing::open_fds();  // pids' segment included
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    volatile int64_t* p = pids.data_ptr<int64_t>();
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (p[1] == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (p[1] != 0) killed = ::kill(static_cast<pid_t>(p[1]), SIGKILL) == 0;
  });
  const auto start = Clock::now();
  const std::string m = spawn_error(n, wait_to_be_killed, mp::Shared().add("pids", pids));
  killer.join();
  INFO(m);
  REQUIRE(killed);
  CHECK(contains(m, "spawn: worker 1 of 3 (pid " + std::to_string(pids.select(0, 1).item<int64_t>()) + ")"));
  CHECK(contains(m, "killed by signal 9"));
  CHECK(contains(m, "the other workers were stopped"));
  CHECK(Clock::now() - start < std::chrono::seconds(30));
  CHECK(testing::dev_shm() == shm_before);
  CHECK(testing::open_fds() == fds_before);  // every channel to the workers closed
}

TEST_CASE("a worker's compute threads default to cores / n, and the option overrides it") {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const int cores = CPU_COUNT(&set);
  for (int n : {1, 2, 3}) {
    Tensor threads = zeros({n}, kInt64).share_memory_();
    mp::spawn(n, report_threads, mp::Shared().add("threads", threads));
    const int expected = std::getenv("EMBER_NUM_THREADS") != nullptr ? std::atoi(std::getenv("EMBER_NUM_THREADS"))
                                                                     : std::max(1, cores / n);
    INFO("n = " << n << ", cores = " << cores);
    for (int r = 0; r < n; ++r) CHECK(threads.select(0, r).item<int64_t>() == expected);
  }
  Tensor threads = zeros({2}, kInt64).share_memory_();
  mp::SpawnOptions options;
  options.threads_per_worker = 3;
  mp::spawn(2, report_threads, mp::Shared().add("threads", threads), options);
  CHECK(threads.select(0, 1).item<int64_t>() == 3);
}

TEST_CASE("10,000 shared parameters under ulimit -n 256") {
  rlimit old{};
  getrlimit(RLIMIT_NOFILE, &old);
  rlimit low = old;
  low.rlim_cur = 256;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);  // the workers inherit it
  ManyParams model(kManyParams);
  model.share_memory();
  const int n = 3;
  std::string error = spawn_error(n, add_to_my_share, mp::Shared().add("model", model));
  setrlimit(RLIMIT_NOFILE, &old);
  INFO(error);
  REQUIRE(error.empty());
  const auto params = model.parameters();
  for (int i = 0; i < kManyParams; ++i) {
    const double expected = i % n + 1;
    if (params[i].min().item<double>() != expected || params[i].max().item<double>() != expected) {
      FAIL("parameter p" << i << " holds " << params[i].max().item<double>() << ", expected " << expected);
    }
  }
}

TEST_CASE("bad calls raise Errors that say what to do") {
  Tensor plain = zeros({3});
  CHECK_THROWS_WITH(mp::Shared().add("plain", plain),
                    Catch::Contains("Shared.add: tensor 'plain' is not in shared memory"));
  nn::Linear lin(3, 2);
  CHECK_THROWS_WITH(mp::Shared().add("lin", *lin), Catch::Contains("'lin.weight' is not in shared memory"));
  CHECK_THROWS_WITH(mp::spawn(2, never_registered), Catch::Contains("EMBER_SPAWN_ENTRY"));
  CHECK_THROWS_WITH(mp::spawn(0, report_threads), Catch::Contains("expected at least 1 worker, got 0"));
  CHECK_THROWS_WITH(mp::Shared().tensor("x"), Catch::Contains("no tensor named 'x'"));

  ManyParams three(3), four(4);
  three.share_memory();
  mp::Shared shared;
  shared.add("model", three);
  try {
    shared.attach("model", four);
    FAIL("attach accepted a module with another parameter");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "missing: 'p3'"));
  }
  nn::Linear wrong(4, 2);
  wrong->share_memory();
  mp::Shared linear;
  linear.add("m", *wrong);
  nn::Linear mine(3, 2);
  try {
    linear.attach("m", *mine);
    FAIL("attach accepted a weight of another shape");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "'weight': the worker's is [2, 3] float32, the shared one [2, 4] float32"));
  }
}

TEST_CASE("a worker that does not finish in time is stopped") {
  Tensor pids = zeros({2}, kInt64).share_memory_();
  mp::SpawnOptions options;
  options.timeout = std::chrono::milliseconds(1500);
  const auto start = Clock::now();
  const std::string m = spawn_error(2, wait_to_be_killed, mp::Shared().add("pids", pids), options);
  INFO(m);
  CHECK(contains(m, "did not finish within 1500 ms"));
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  for (int r = 0; r < 2; ++r) CHECK(::kill(static_cast<pid_t>(pids.select(0, r).item<int64_t>()), 0) != 0);
}

TEST_CASE("start returns at once; done reports progress; dropping the handle stops the workers") {
  Tensor board = zeros({3}, kInt64).share_memory_();
  {
    mp::Workers workers = mp::start(2, write_and_meet,
                                    mp::Shared()
                                        .add("slots", arange(100, 102, 1, kFloat64).share_memory_())
                                        .add("board", board)
                                        .set("greeting", "hello"));
    CHECK(workers.pids().size() == 2);
    workers.join();
    CHECK(workers.done());
    CHECK(board.select(0, 2).item<int64_t>() == 2);
  }
  Tensor pids = zeros({2}, kInt64).share_memory_();
  std::vector<int> started;
  {
    mp::Workers sleepers = mp::start(2, wait_to_be_killed, mp::Shared().add("pids", pids));
    started = sleepers.pids();
    CHECK_FALSE(sleepers.done());
  }
  for (int pid : started) CHECK(::kill(pid, 0) != 0);  // stopped and reaped
}

TEST_CASE("a start that fails part way stops the workers already started, and only those") {
  Tensor pids = zeros({3}, kInt64).share_memory_();
  mp::Shared shared;
  shared.add("pids", pids);
  rlimit old{};
  getrlimit(RLIMIT_NOFILE, &old);
  rlimit low = old;
  // open_fds() counts its own directory descriptor too: two workers' socket pairs fit, the
  // third's does not.
  low.rlim_cur = testing::open_fds() + 2;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::string m;
  try {
    mp::start(3, wait_to_be_killed, shared);
  } catch (const Error& e) {
    m = e.what();
  }
  setrlimit(RLIMIT_NOFILE, &old);
  INFO(m);
  CHECK(contains(m, "spawn: cannot create a socket pair"));
  CHECK(::getpid() > 0);  // still here: the unstarted workers' pid -1 was not signalled
  const auto first = static_cast<pid_t>(pids.select(0, 0).item<int64_t>());
  if (first != 0) CHECK(::kill(first, 0) != 0);
}

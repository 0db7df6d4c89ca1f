// multiprocessing::spawn: n worker processes on this machine, each running a registered entry
// point as fn(rank, n, shared), joined by the parent.
//
//   void train(int rank, int n, mp::Shared& shared) { ... }
//   EMBER_SPAWN_ENTRY(train);
//   int main(int argc, char** argv) {
//     mp::worker_guard();               // in a worker: runs its entry and exits
//     Net model; model.share_memory();
//     mp::spawn(4, train, mp::Shared().add("model", model));
//   }
//
// Workers start by re-executing the program (the default), not by forking a parent that may
// already run OpenMP's team, loader threads or CUDA: a forked copy of those is broken (the
// "cannot re-initialize CUDA in a forked subprocess" error). The re-executed program reaches its
// entry at worker_guard(), or at the spawn call itself where main has no guard (then everything
// before it runs once more in each worker, like a Python script without `if __name__ ==
// "__main__"`). Forking is offered while the process is still single-threaded and has no CUDA
// context, and refused, saying why, otherwise.
//
// The parent waits for all workers. The first one to fail (an exception, a non-zero exit, a
// signal, kill -9 included) is reported in an ember::Error with its rank, pid, exit status or
// signal and the text of its exception, sent back over a pipe; the others are stopped. Workers
// die with the parent. Each worker's compute threads default to cores / n (EMBER_NUM_THREADS in
// the parent's environment overrides it).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parallel/multiprocessing/shared.h"

namespace ember::multiprocessing {

using EntryFn = void (*)(int rank, int world_size, Shared& shared);

enum class StartMethod { kSpawn, kFork };

struct SpawnOptions {
  StartMethod start_method = StartMethod::kSpawn;
  // spawn fails (stopping every worker) when they have not all finished by then.
  std::optional<std::chrono::milliseconds> timeout;
  // Compute threads per worker; 0: EMBER_NUM_THREADS if set, else max(1, cores / n).
  int threads_per_worker = 0;
};

// Started workers, for a parent with its own work while they run (feeding or draining a Queue):
// torch.multiprocessing.spawn(join=False)'s context.
class Workers {
 public:
  Workers(Workers&&) noexcept;
  Workers& operator=(Workers&&) noexcept;
  // Workers not joined yet are stopped (SIGTERM, SIGKILL after 3 s) and reaped.
  ~Workers();
  // Waits for every worker. The first failure raises (the others are stopped), as does the
  // timeout, after stopping them all.
  void join(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Without waiting: true once every worker has finished; a failure raises as in join.
  bool done();
  std::vector<int> pids() const;

 private:
  struct State;
  explicit Workers(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
  friend Workers start(int, EntryFn, const Shared&, const SpawnOptions&);
};

// Starts n workers running `fn` (registered with EMBER_SPAWN_ENTRY) and returns at once.
Workers start(int n, EntryFn fn, const Shared& shared = Shared(), const SpawnOptions& options = {});
// start(...).join(options.timeout): starts n workers and waits for them.
void spawn(int n, EntryFn fn, const Shared& shared = Shared(), const SpawnOptions& options = {});

// In a process started by spawn, runs its entry and exits (status 0, or 1 after reporting the
// error to the parent); elsewhere returns at once. Call it first thing in main.
void worker_guard();

// This process's rank when it is a spawned worker, else -1.
int worker_rank();

// Compute threads a worker gets by default: EMBER_NUM_THREADS if set, else max(1, cores / n).
int default_worker_threads(int n);

namespace detail {
struct EntryRegistration {
  EntryRegistration(const char* name, EntryFn fn);
};
}  // namespace detail

}  // namespace ember::multiprocessing

#define EMBER_SPAWN_ENTRY(fn) \
  static ::ember::multiprocessing::detail::EntryRegistration ember_spawn_entry_##fn(#fn, &fn)

// The communication and watchdog threads. MPI is initialised with MPI_THREAD_MULTIPLE: the
// communication thread makes most calls, a caller waiting on its own next collective makes that
// one (never two collectives at once), and benchmarks may call MPI directly too.
#include "comm/mpi/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "comm/mpi/mpi_types.h"
#include "comm/terminate_message.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace ember::comm::mpi {

MpiWork::MpiWork(CollectiveInfo info, Start start, Finish finish, int rank)
    : ThreadWork(std::move(info), rank), start_(std::move(start)), finish_(std::move(finish)) {}

void MpiWork::before_wait(std::chrono::milliseconds timeout) {
  // A wait that may last as long as the watchdog allows can run the work itself; a shorter one
  // must be able to give up, so it leaves the work to the communication thread.
  if (timeout.count() <= 0 || timeout >= collective_timeout()) Runtime::get().run_here_if_next(*this);
}

void MpiWork::complete(const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    start_ = nullptr;  // drop tensor references held by the closures
    finish_ = nullptr;
  }
  mark_done(error);
}

namespace {
std::atomic<bool> runtime_started{false};
}  // namespace

Runtime& Runtime::get() {
  static Runtime runtime;
  runtime_started.store(true);
  return runtime;
}

bool Runtime::started() { return runtime_started.load(); }

Runtime::Runtime() {
  comm_thread_ = std::thread([this] { communication_loop(); });
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return ready_; });
  if (!init_error_.empty()) {
    lock.unlock();
    comm_thread_.join();
    EMBER_FAIL(init_error_);
  }
  watchdog_thread_ = std::thread([this] { watchdog_loop(); });
  install_terminate_handler();
}

Runtime::~Runtime() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  watchdog_cv_.notify_all();
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  if (comm_thread_.joinable()) comm_thread_.join();
}

void Runtime::submit(const std::shared_ptr<MpiWork>& work, bool prompt) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_CHECK(!stopping_, "rank ", world_rank_, ": ", work->info().describe(), ": the MPI runtime is shutting down");
    queue_.push_back(work);
    if (prompt) set_comm_thread_batch(false);  // this wake-up may preempt the caller: overlap needs it
    // While callers run their own collectives (submit, then wait), waking this thread only makes
    // it interrupt them; it finds the work within kDeferredStart anyway (see communication_loop).
    wake = prompt || !waiters_run_collectives_;
  }
  if (wake) cv_.notify_one();
}

void Runtime::set_comm_thread_batch(bool batch) {
  if (comm_thread_batch_ == batch) return;
  sched_param param{};
  pthread_setschedparam(comm_thread_id_, batch ? SCHED_BATCH : SCHED_OTHER, &param);
  comm_thread_batch_ = batch;
}

void Runtime::run_sync(const std::function<void()>& task) {
  CollectiveInfo info;
  info.kind = CollectiveKind::Barrier;
  info.group = "(communicator setup)";
  auto work = std::make_shared<MpiWork>(
      info,
      [&] {
        task();
        return std::vector<MPI_Request>();
      },
      nullptr, world_rank_);
  submit(work);
  work->wait(collective_timeout());
}

void Runtime::abort(const std::string& message, int status) {
  std::string line = "[rank " + std::to_string(world_rank_) + "] ember: " + message + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

void Runtime::publish_in_flight() {
  // Called at every collective's start and end: the usual single work costs one line, no sort.
  if (!current_ && posted_.empty()) {
    publish_terminate_message(TerminateSource::Mpi, "");
    return;
  }
  if ((current_ ? 1 : 0) + posted_.size() == 1) {
    publish_terminate_message(TerminateSource::Mpi,
                              terminated_message(world_rank_, (current_ ? current_ : posted_.front())->description()));
    return;
  }
  std::vector<const MpiWork*> active;
  if (current_) active.push_back(current_.get());
  for (const auto& w : posted_) active.push_back(w.get());
  std::stable_sort(active.begin(), active.end(),
                   [](const MpiWork* a, const MpiWork* b) { return a->started_ < b->started_; });
  std::vector<std::string> newer;
  for (size_t i = 1; i < active.size(); ++i) newer.push_back(active[i]->description());
  publish_terminate_message(TerminateSource::Mpi, terminated_message(world_rank_, active[0]->description(), newer));
}

void Runtime::communication_loop() {
  int provided = 0;
  int initialized = 0;
  MPI_Initialized(&initialized);
  int rc = initialized ? MPI_SUCCESS : MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rc != MPI_SUCCESS) {
      init_error_ = "comm::init: MPI_Init_thread failed (is this process started by mpirun?)";
    } else {
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
      // Errors come back as codes, so they become messages naming the collective.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      create_custom_ops();
    }
    comm_thread_id_ = pthread_self();
    ready_ = true;
  }
  cv_.notify_all();
  if (rc != MPI_SUCCESS) return;

  bool yielded_to_waiter = false;
  while (true) {
    std::shared_ptr<MpiWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // current_ set here means a waiter runs its collective itself: start nothing meanwhile.
      auto can_start = [&] { return !queue_.empty() && !current_; };
      if (!can_start() && in_flight_.empty()) {
        if (stopping_ && queue_.empty()) break;
        // Sleep as SCHED_BATCH, whose wake-ups do not preempt: a submit wakes this thread, and on
        // a core shared with the caller (mpirun binds a rank to one core) preempting a caller
        // about to run its collective inline costs that collective 10-20% at 1-4 MB
        // (tools/bench:allreduce). A prompt submit (OverlapScope) switches it back first, since a
        // DDP bucket must start on every rank at once, not at each rank's next scheduler tick.
        if (queue_.empty()) set_comm_thread_batch(true);
        const auto idle = waiters_run_collectives_ ? kDeferredStart : std::chrono::milliseconds(100);
        cv_.wait_for(lock, idle, [&] { return can_start() || stopping_; });
      }
      if (can_start() && !yielded_to_waiter) {
        // A caller that submits and waits at once runs its collective itself; one yield lets it
        // (on a core it shares with this thread, the wake-up would otherwise preempt it).
        yielded_to_waiter = true;
        lock.unlock();
        std::this_thread::yield();
        continue;
      }
      yielded_to_waiter = false;
      if (can_start()) {
        work = queue_.front();
        queue_.pop_front();
        work->started_ = std::chrono::steady_clock::now();
        current_ = work;
        publish_in_flight();
        waiters_run_collectives_ = false;  // nobody waited for this one: wake on every submit again
      }
    }
    if (work) {
      auto [requests, error] = start(*work);
      const bool in_flight = !requests.empty() && error.empty();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        current_ = nullptr;
        if (in_flight) posted_.push_back(work);
        publish_in_flight();
      }
      if (in_flight)
        in_flight_.push_back({work, std::move(requests)});
      else
        work->complete(error);
    }
    // Point-to-point requests progress here between collectives.
    bool progressed = false;
    for (size_t i = 0; i < in_flight_.size();) {
      if (progress(in_flight_[i])) {
        in_flight_.erase(in_flight_.begin() + static_cast<long>(i));
        progressed = true;
      } else {
        ++i;
      }
    }
    if (!in_flight_.empty() && !progressed) {
      // Between tests of the posted requests: a wait that releases the lock, so a submit meanwhile
      // neither blocks on it nor (when it wakes this thread) waits out the pause to start.
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait_for(lock, std::chrono::microseconds(50), [&] { return !queue_.empty(); });
    }
  }
  free_custom_ops();
#if defined(__SANITIZE_ADDRESS__)
  // The leak check at exit would run after MPI_Finalize has unloaded Open MPI's plugins and the
  // libraries they brought (PMIx, PSM2, ...): their allocations kept until exit would then have
  // no module to be suppressed by (tests/lsan_mpi.supp), unless every allocation were unwound the
  // slow way, which made each MPI test 3-5 times slower under ASan. Checked here instead, once,
  // with every library still loaded; by now the program has returned from main and its objects
  // are gone.
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
}

std::pair<std::vector<MPI_Request>, std::string> Runtime::start(MpiWork& work) {
  std::string error;
  std::vector<MPI_Request> requests;
  try {
    requests = work.start_();
    if (requests.empty() && work.finish_) work.finish_(MPI_SUCCESS);
  } catch (const std::exception& e) {
    error = e.what();
  }
  return {std::move(requests), std::move(error)};
}

void Runtime::run_here_if_next(const MpiWork& work) {
  if (work.info().kind == CollectiveKind::Send || work.info().kind == CollectiveKind::Recv) return;
  std::shared_ptr<MpiWork> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty() || queue_.front().get() != &work || current_ || !posted_.empty()) return;
    mine = queue_.front();
    queue_.pop_front();
    mine->started_ = std::chrono::steady_clock::now();
    current_ = mine;  // the watchdog times it, and the communication thread waits for it
    publish_in_flight();
    // Only short collectives gain from deferring wake-ups: a long one outlasts many of the
    // communication thread's kDeferredStart polls, each of which interrupts it.
    const int64_t bytes = shape_numel(mine->info().shape) * static_cast<int64_t>(element_size(mine->info().dtype));
    waiters_run_collectives_ = bytes < kDeferWakeBelowBytes;
  }
  auto [requests, error] = start(*mine);
  if (!requests.empty() && error.empty()) {
    // A non-blocking collective (posted for overlap) that its caller now waits for anyway: this
    // thread completes it, as the communication thread would.
    InFlight entry{mine, std::move(requests)};
    for (MPI_Request& request : entry.requests) {
      const int rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS && entry.code == MPI_SUCCESS) entry.code = rc;
    }
    error = finish_error(entry);
  }
  bool more;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = nullptr;
    publish_in_flight();
    more = !queue_.empty() || stopping_;
  }
  // The communication thread sleeps until there is something to start; waking it for nothing
  // would preempt this thread on a shared core.
  if (more) cv_.notify_one();
  mine->complete(error);
}

bool Runtime::progress(InFlight& entry) {
  bool done = true;
  for (MPI_Request& request : entry.requests) {
    if (request == MPI_REQUEST_NULL) continue;
    int flag = 0;
    int rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      if (entry.code == MPI_SUCCESS) entry.code = rc;
      request = MPI_REQUEST_NULL;  // completed with an error
    } else if (!flag) {
      done = false;
    }
  }
  if (done) finish(entry);
  return done;
}

std::string Runtime::finish_error(InFlight& entry) {
  MpiWork& work = *entry.work;
  try {
    if (work.finish_)
      work.finish_(entry.code);
    else if (entry.code != MPI_SUCCESS)
      return "rank " + std::to_string(world_rank_) + ": " + work.info().describe() + " failed in MPI";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void Runtime::finish(InFlight& entry) {
  MpiWork& work = *entry.work;
  const std::string error = finish_error(entry);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_.erase(std::find(posted_.begin(), posted_.end(), entry.work));
    publish_in_flight();
  }
  work.complete(error);
}

void Runtime::watchdog_loop() {
  const auto timeout = collective_timeout();
  const auto period =
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000), timeout / 4 + std::chrono::milliseconds(1));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    watchdog_cv_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    auto expired = [&](const std::shared_ptr<MpiWork>& w) { return w && now - w->started_ > timeout; };
    std::shared_ptr<MpiWork> late = expired(current_) ? current_ : nullptr;
    for (const auto& w : posted_)
      if (!late && expired(w)) late = w;
    if (late) {
      const std::string what = timed_out_message(late->info(), timeout);
      lock.unlock();
      abort(what);
    }
  }
}

}  // namespace ember::comm::mpi

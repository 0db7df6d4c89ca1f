// A step timeline users can look at: while a profiler::Session records, the framework's own
// recording points (forward, backward, the optimizer step, each bucket's collective, data-loader
// waits, host-device copies, pipeline stage actions, sharded gathers) and the user's Ranges land
// in one list of events, written as Chrome trace event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open. One file per rank; merge_traces() joins them with ranks as processes.
//
//   profiler::Session session({.rank = world->rank()});
//   session.start();
//   ... train some steps ...
//   session.stop();
//   session.write("trace.rank0.json");
//
// Recording points cost one relaxed atomic load when no session records, so they stay in place.
// Events on one thread are complete events ("X") and nest, as scopes do; work that starts on one
// thread and ends on another (a collective issued by backward and run by a communication thread)
// is an async event pair ("b"/"e") on a track of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/runtime.h"

namespace ember::profiler {

using Clock = std::chrono::steady_clock;
using Args = std::vector<std::pair<std::string, std::string>>;

struct Event {
  std::string name;
  std::string category;  // forward, backward, optimizer, comm, data, copy, pipeline, sharded, step, user
  char phase = 'X';      // X complete, i instant, b/e async begin/end, C counter
  int64_t start_ns = 0;  // since the session started
  int64_t duration_ns = 0;
  int64_t track = 0;  // a host thread's number in this process (thread_name() names it)
  uint64_t id = 0;    // pairs an async begin with its end
  Args args;
};

namespace detail {
extern std::atomic<bool> recording;
}  // namespace detail

// Whether a session is recording: the recording points' first check.
inline bool active() { return detail::recording.load(std::memory_order_relaxed); }

// Names the calling thread's track ("main", "communication", "loader worker 2", ...).
void set_thread_name(const std::string& name);

// A complete event on this thread from construction to destruction (nothing when no session
// records at construction).
class Range {
 public:
  Range(const char* category, std::string name, Args args = {});
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool on_ = false;
  const char* category_ = nullptr;
  std::string name_;
  Args args_;
  Clock::time_point start_;
};

// Work queued on a device while it lives, timed by the device: events (timing enabled) recorded
// on `stream` (default: the device's current stream) at construction and destruction, resolved
// when the trace is read, on a track of that stream ("cuda:0 stream 5"). Nothing here waits for the
// device while the session records. A stream's times are placed on the host clock by its first
// event of the session, at the host time it was recorded: exact when the stream was idle then (a
// step's start, after the host read the last loss), later work shown early by any backlog. On a
// host-ordered device (the CPU) it records nothing: the host's ranges are that work's times.
class DeviceRange {
 public:
  DeviceRange(Device device, const char* category, std::string name, Args args = {});
  DeviceRange(const Stream& stream, const char* category, std::string name, Args args = {});
  ~DeviceRange();
  DeviceRange(const DeviceRange&) = delete;
  DeviceRange& operator=(const DeviceRange&) = delete;

 private:
  void begin(const Stream& stream);
  bool on_ = false;
  const char* category_ = nullptr;
  std::string name_;
  Args args_;
  Stream stream_;
  ember::Event start_event_;
};

// A complete event on this thread that was timed elsewhere (start and end on the steady clock).
void complete(const char* category, std::string name, Clock::time_point start, Clock::time_point end, Args args = {});
// A point in time on this thread.
void instant(const char* category, std::string name, Args args = {});
// Work that begins and ends on different threads (or overlaps other such work): each pair
// shares an id from next_async_id(), and Perfetto draws it on a track named by its category.
uint64_t next_async_id();
void async_begin(const char* category, const std::string& name, uint64_t id, Clock::time_point at, Args args = {});
void async_end(const char* category, const std::string& name, uint64_t id, Clock::time_point at, Args args = {});
// Names the work this thread issues while it lives ("DDP bucket 3"): a collective's event is
// called by the tag of the thread that issued it. Tags nest; an empty one changes nothing.
class Tag {
 public:
  explicit Tag(std::string tag);
  ~Tag();
  Tag(const Tag&) = delete;
  Tag& operator=(const Tag&) = delete;

 private:
  std::string previous_;
  bool set_ = false;
};
// The innermost live Tag of this thread ("" when none).
const std::string& current_tag();

// A value over time (bytes in use, a queue's length).
void counter(const char* name, double value);

struct SessionOptions {
  int rank = 0;                         // the trace's process id; merge_traces() shows one process per rank
  std::string process_name;             // default "rank N"
  size_t max_events = size_t(1) << 22;  // later events are counted as dropped, not kept
};

// Records the events of every thread of this process between start() and stop(). One session
// records at a time; starting a second while one records raises an Error.
class Session {
 public:
  explicit Session(SessionOptions options = {});
  ~Session();  // stops
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start();
  void stop();
  bool recording() const { return recording_; }

  // The events recorded so far, ordered by start time (ties: longer first, so parents come first).
  std::vector<Event> events() const;
  size_t dropped() const;
  // Each track's name, by track number (set_thread_name's, else "main" or "thread N").
  std::vector<std::string> thread_names() const;
  // Chrome trace event JSON: {"traceEvents": [...], ...}, times in microseconds since the session
  // started, plus the process's and threads' names and the session's start on the system clock
  // (merge_traces() aligns ranks by it).
  std::string chrome_trace() const;
  // chrome_trace() written to `path` through a temporary file renamed over it, so a crash never
  // leaves half a trace; an Error names the path when it cannot be written.
  void write(const std::string& path) const;

 private:
  SessionOptions options_;
  bool recording_ = false;
  Clock::time_point started_{};
  std::chrono::system_clock::time_point started_wall_{};
};

// One trace of several ranks' chrome_trace() texts: each rank's events shifted by the difference
// between its session's start on the system clock and the earliest one's (exact on one host, as
// good as the hosts' clocks across hosts). An Error names the input that is not such a trace.
std::string merge_traces(const std::vector<std::string>& traces);

}  // namespace ember::profiler

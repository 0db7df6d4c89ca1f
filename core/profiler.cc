#include "core/profiler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.h"

namespace ember::profiler {

namespace detail {
std::atomic<bool> recording{false};
}  // namespace detail

namespace {

// What every thread records into. One lock: a step records hundreds to thousands of events, each
// costing far less than the work it times.
// A DeviceRange whose events the device may not have reached yet.
struct PendingDeviceRange {
  std::string name, category;
  Args args;
  Stream stream;
  ember::Event start, end;
};

// Where a stream's device times are placed on the host clock: its first event of the session.
struct StreamOrigin {
  ember::Event event;
  Clock::time_point host;
  int64_t track = 0;
};

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  std::vector<PendingDeviceRange> device_ranges;
  std::map<std::pair<std::string, uintptr_t>, StreamOrigin> origins;  // by (device, stream id)
  size_t dropped = 0, max_events = 0;
  Clock::time_point origin;
  std::vector<std::string> thread_names;  // by track, for the life of the process
  std::atomic<uint64_t> next_id{1};
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: threads may record during static destruction
  return *r;
}

thread_local int64_t my_track = -1;
thread_local std::string my_name;
thread_local std::string my_tag;

int64_t track_locked(Recorder& r) {
  if (my_track < 0) {
    my_track = static_cast<int64_t>(r.thread_names.size());
    r.thread_names.push_back(my_name.empty() ? (my_track == 0 ? "main" : "thread " + std::to_string(my_track))
                                             : my_name);
  }
  return my_track;
}

int64_t since(const Recorder& r, Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - r.origin).count();
}

void record(Event event, Clock::time_point start) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!active()) return;  // stopped since the caller looked
  if (r.events.size() >= r.max_events) {
    ++r.dropped;
    return;
  }
  event.start_ns = since(r, start);
  event.track = track_locked(r);
  r.events.push_back(std::move(event));
}

}  // namespace

void set_thread_name(const std::string& name) {
  my_name = name;
  if (my_track >= 0) {
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.thread_names[static_cast<size_t>(my_track)] = name;
  }
}

Range::Range(const char* category, std::string name, Args args) {
  if (!active()) return;
  on_ = true;
  category_ = category;
  name_ = std::move(name);
  args_ = std::move(args);
  start_ = Clock::now();
}

Range::~Range() {
  if (on_) complete(category_, std::move(name_), start_, Clock::now(), std::move(args_));
}

DeviceRange::DeviceRange(Device device, const char* category, std::string name, Args args)
    : category_(category), name_(std::move(name)), args_(std::move(args)) {
  if (!active()) return;
  const DeviceRuntime* runtime = find_runtime(device.type);
  begin(runtime && runtime->record_timing_event ? current_stream(device) : Stream());
}

DeviceRange::DeviceRange(const Stream& stream, const char* category, std::string name, Args args)
    : category_(category), name_(std::move(name)), args_(std::move(args)) {
  if (active()) begin(stream);
}

void DeviceRange::begin(const Stream& stream) {
  const DeviceRuntime* runtime = stream.defined() ? find_runtime(stream.device().type) : nullptr;
  if (!runtime || !runtime->record_timing_event || !runtime->elapsed_ms) return;  // host-ordered
  on_ = true;
  stream_ = stream;
  Recorder& r = recorder();
  const auto key = std::make_pair(stream.device().str(), stream.id());
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.origins.count(key)) {
      StreamOrigin origin;
      origin.event = runtime->record_timing_event(stream);
      origin.host = Clock::now();
      const std::string track = stream.device().str() + " stream " + std::to_string(stream.id());
      const auto found = std::find(r.thread_names.begin(), r.thread_names.end(), track);
      origin.track = found - r.thread_names.begin();
      if (found == r.thread_names.end()) r.thread_names.push_back(track);
      r.origins.emplace(key, std::move(origin));
    }
  }
  start_event_ = runtime->record_timing_event(stream);
}

DeviceRange::~DeviceRange() {
  if (!on_) return;
  const DeviceRuntime* runtime = find_runtime(stream_.device().type);
  ember::Event end = runtime->record_timing_event(stream_);
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!active()) return;
  r.device_ranges.push_back({std::move(name_), category_, std::move(args_), stream_, start_event_, std::move(end)});
}

void complete(const char* category, std::string name, Clock::time_point start, Clock::time_point end, Args args) {
  if (!active()) return;
  Event e{std::move(name), category, 'X'};
  e.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  e.args = std::move(args);
  record(std::move(e), start);
}

void instant(const char* category, std::string name, Args args) {
  if (!active()) return;
  Event e{std::move(name), category, 'i'};
  e.args = std::move(args);
  record(std::move(e), Clock::now());
}

Tag::Tag(std::string tag) {
  if (tag.empty()) return;
  previous_ = std::exchange(my_tag, std::move(tag));
  set_ = true;
}

Tag::~Tag() {
  if (set_) my_tag = std::move(previous_);
}

const std::string& current_tag() { return my_tag; }

uint64_t next_async_id() { return recorder().next_id.fetch_add(1, std::memory_order_relaxed); }

void async_begin(const char* category, const std::string& name, uint64_t id, Clock::time_point at, Args args) {
  if (!active()) return;
  Event e{name, category, 'b'};
  e.id = id;
  e.args = std::move(args);
  record(std::move(e), at);
}

void async_end(const char* category, const std::string& name, uint64_t id, Clock::time_point at, Args args) {
  if (!active()) return;
  Event e{name, category, 'e'};
  e.id = id;
  e.args = std::move(args);
  record(std::move(e), at);
}

void counter(const char* name, double value) {
  if (!active()) return;
  if (!std::isfinite(value)) return;  // JSON has no inf or NaN
  std::ostringstream text;
  text << value;
  Event e{name, "counter", 'C'};
  e.args = {{"value", text.str()}};
  record(std::move(e), Clock::now());
}

Session::Session(SessionOptions options) : options_(std::move(options)) {
  if (options_.process_name.empty()) options_.process_name = "rank " + std::to_string(options_.rank);
}

Session::~Session() { stop(); }

void Session::start() {
  if (recording_) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  EMBER_CHECK(!active(), "profiler::Session::start: another session of this process is recording (one at a time)");
  r.events.clear();
  r.device_ranges.clear();
  r.origins.clear();
  r.dropped = 0;
  r.max_events = options_.max_events;
  started_ = r.origin = Clock::now();
  started_wall_ = std::chrono::system_clock::now();
  recording_ = true;
  detail::recording.store(true);
}

void Session::stop() {
  if (!recording_) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  detail::recording.store(false);
  recording_ = false;
}

std::vector<Event> Session::events() const {
  Recorder& r = recorder();
  std::vector<Event> out;
  std::vector<PendingDeviceRange> pending;
  std::map<std::pair<std::string, uintptr_t>, StreamOrigin> origins;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    out = r.events;
    pending = r.device_ranges;
    origins = r.origins;
  }
  // Device times, read now (waiting for the device if it is still at it), outside the lock.
  for (const PendingDeviceRange& d : pending) {
    const StreamOrigin& origin = origins.at({d.stream.device().str(), d.stream.id()});
    const DeviceRuntime& runtime = *find_runtime(d.stream.device().type);
    const double from_ms = runtime.elapsed_ms(origin.event, d.start), to_ms = runtime.elapsed_ms(origin.event, d.end);
    Event e{d.name, d.category, 'X'};
    e.start_ns = since(r, origin.host) + static_cast<int64_t>(from_ms * 1e6);
    e.duration_ns = static_cast<int64_t>((to_ms - from_ms) * 1e6);
    e.track = origin.track;
    e.args = d.args;
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.duration_ns > b.duration_ns;
  });
  return out;
}

std::vector<std::string> Session::thread_names() const {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.thread_names;
}

size_t Session::dropped() const {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.dropped;
}

}  // namespace ember::profiler

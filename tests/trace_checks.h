// Reading back profiler::Session's Chrome trace JSON in tests: the events, and whether they are
// well formed the way Perfetto needs (complete events nest on each thread, async pairs match).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::testing {

struct TraceEvent {
  std::string phase, name, category;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;  // microseconds
  int64_t id = 0;
  double end() const { return ts + dur; }
};

// Every event of `trace` but the metadata ("M"); an Error when it is not JSON, lacks traceEvents,
// or an event lacks its phase's fields.
std::vector<TraceEvent> parse_trace(const std::string& trace);

// "" when every complete event ("X") lies inside or after the one before it on its (pid, tid),
// never across its end, and every async begin ("b") has exactly one end ("e") of the same category,
// id and name no earlier than it; otherwise what is wrong, naming the events.
std::string malformed(const std::vector<TraceEvent>& events);

// The async begin/end pairs as spans (phase "X", dur from begin to end), for overlap checks.
std::vector<TraceEvent> async_spans(const std::vector<TraceEvent>& events);

}  // namespace ember::testing

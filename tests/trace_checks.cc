#include "tests/trace_checks.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/io/json.h"

namespace ember::testing {

std::vector<TraceEvent> parse_trace(const std::string& trace) {
  const json::Value root = json::parse(trace, "trace");
  const json::Value* list = root.find("traceEvents");
  EMBER_CHECK(list && list->is_array(), "parse_trace: expected a traceEvents array");
  std::vector<TraceEvent> out;
  for (const json::Value& e : list->items()) {
    const json::Value* ph = e.find("ph");
    EMBER_CHECK(ph && ph->is_string(), "parse_trace: an event without its phase (ph)");
    if (ph->as_string() == "M") continue;
    TraceEvent t;
    t.phase = ph->as_string();
    for (const char* key : {"name", "cat", "pid", "tid", "ts"})
      EMBER_CHECK(e.find(key) != nullptr, "parse_trace: an event of phase ", t.phase, " lacks ", key);
    t.name = e.find("name")->as_string();
    t.category = e.find("cat")->as_string();
    t.pid = e.find("pid")->as_int();
    t.tid = e.find("tid")->as_int();
    t.ts = e.find("ts")->as_double();
    if (t.phase == "X") {
      EMBER_CHECK(e.find("dur") != nullptr, "parse_trace: complete event '", t.name, "' lacks dur");
      t.dur = e.find("dur")->as_double();
    }
    if (t.phase == "b" || t.phase == "e") {
      EMBER_CHECK(e.find("id") != nullptr, "parse_trace: async event '", t.name, "' lacks id");
      t.id = e.find("id")->as_int();
    }
    out.push_back(t);
  }
  return out;
}

std::string malformed(const std::vector<TraceEvent>& events) {
  // Complete events per thread, by start (longer first on ties): each must end by the end of
  // every open event it starts inside. Times are printed to the nanosecond, so compare with that.
  constexpr double kSlack = 0.0015;
  std::map<std::pair<int64_t, int64_t>, std::vector<TraceEvent>> threads;
  for (const TraceEvent& e : events)
    if (e.phase == "X") threads[{e.pid, e.tid}].push_back(e);
  for (auto& [thread, list] : threads) {
    std::stable_sort(list.begin(), list.end(), [](const TraceEvent& a, const TraceEvent& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
    });
    std::vector<const TraceEvent*> open;
    for (const TraceEvent& e : list) {
      while (!open.empty() && e.ts >= open.back()->end() - kSlack) open.pop_back();
      if (!open.empty() && e.end() > open.back()->end() + kSlack)
        return "'" + e.name + "' (" + std::to_string(e.ts) + " + " + std::to_string(e.dur) +
               " us) crosses the end of '" + open.back()->name + "' (" + std::to_string(open.back()->ts) + " + " +
               std::to_string(open.back()->dur) + " us) on pid " + std::to_string(thread.first) + " tid " +
               std::to_string(thread.second);
      open.push_back(&e);
    }
  }
  std::map<std::tuple<int64_t, std::string, int64_t>, std::vector<const TraceEvent*>> pairs;
  for (const TraceEvent& e : events)
    if (e.phase == "b" || e.phase == "e") pairs[{e.pid, e.category, e.id}].push_back(&e);
  for (const auto& [key, list] : pairs) {
    const std::string what = "async id " + std::to_string(std::get<2>(key)) + " ('" + list.front()->name + "')";
    if (list.size() != 2) return what + " has " + std::to_string(list.size()) + " events, expected a begin and an end";
    const TraceEvent* b = list[0]->phase == "b" ? list[0] : list[1];
    const TraceEvent* e = list[0]->phase == "e" ? list[0] : list[1];
    if (b->phase != "b" || e->phase != "e") return what + " lacks a begin or an end";
    if (b->name != e->name) return what + " begins as '" + b->name + "' and ends as '" + e->name + "'";
    if (e->ts < b->ts) return what + " ends before it begins";
  }
  return "";
}

std::vector<TraceEvent> async_spans(const std::vector<TraceEvent>& events) {
  std::map<std::tuple<int64_t, std::string, int64_t>, TraceEvent> open;
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : events) {
    const auto key = std::make_tuple(e.pid, e.category, e.id);
    if (e.phase == "b") open[key] = e;
    if (e.phase == "e" && open.count(key)) {
      TraceEvent span = open[key];
      span.phase = "X";
      span.dur = e.ts - span.ts;
      out.push_back(span);
      open.erase(key);
    }
  }
  return out;
}

}  // namespace ember::testing

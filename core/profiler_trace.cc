// The Chrome trace event format of profiler.h's sessions, and the merging of ranks' traces.
#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/io/file_io.h"
#include "core/io/json.h"
#include "core/profiler.h"

namespace ember::profiler {

namespace {

std::string quoted(const std::string& s) { return json::Value::string(s).dump(); }

std::string micros(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1e3);
  return text;
}

}  // namespace

std::string Session::chrome_trace() const {
  const std::vector<Event> list = events();
  const std::vector<std::string> names = thread_names();
  const std::string pid = std::to_string(options_.rank);
  std::string out = "{\"traceEvents\":[\n";
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid +
         ",\"tid\":0,\"args\":{\"name\":" + quoted(options_.process_name) + "}}";
  out += ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
         ",\"tid\":0,\"args\":{\"sort_index\":" + pid + "}}";
  for (size_t t = 0; t < names.size(); ++t)
    out += ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(t) +
           ",\"args\":{\"name\":" + quoted(names[t]) + "}}";
  for (const Event& e : list) {
    out += ",\n{\"ph\":\"" + std::string(1, e.phase) + "\",\"cat\":" + quoted(e.category) +
           ",\"name\":" + quoted(e.name) + ",\"pid\":" + pid + ",\"tid\":" + std::to_string(e.track) +
           ",\"ts\":" + micros(e.start_ns);
    if (e.phase == 'X') out += ",\"dur\":" + micros(e.duration_ns);
    if (e.phase == 'b' || e.phase == 'e') out += ",\"id\":" + std::to_string(e.id);
    if (e.phase == 'i') out += ",\"s\":\"t\"";
    if (!e.args.empty()) {
      out += ",\"args\":{";
      for (size_t a = 0; a < e.args.size(); ++a)
        out += (a ? "," : "") + quoted(e.args[a].first) + ":" +
               (e.phase == 'C' ? e.args[a].second : quoted(e.args[a].second));
      out += "}";
    }
    out += "}";
  }
  const int64_t wall_us =
      std::chrono::duration_cast<std::chrono::microseconds>(started_wall_.time_since_epoch()).count();
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"ember_rank\":" + pid +
         ",\"ember_start_unix_us\":" + std::to_string(wall_us) +
         ",\"ember_dropped_events\":" + std::to_string(dropped()) + "}}\n";
  return out;
}

void Session::write(const std::string& path) const {
  const std::string text = chrome_trace();
  write_file_atomic(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string merge_traces(const std::vector<std::string>& traces) {
  EMBER_CHECK(!traces.empty(), "profiler::merge_traces: expected at least one trace, got none");
  std::vector<json::Value> parsed;
  std::vector<int64_t> starts;
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string what = "profiler::merge_traces: trace " + std::to_string(i);
    parsed.push_back(json::parse(traces[i], what));
    const json::Value* events = parsed.back().find("traceEvents");
    const json::Value* other = parsed.back().find("otherData");
    const json::Value* start = other ? other->find("ember_start_unix_us") : nullptr;
    EMBER_CHECK(events && events->is_array() && start && start->is_integer(), what,
                ": expected a profiler::Session trace (traceEvents and otherData.ember_start_unix_us), found neither");
    starts.push_back(start->as_int());
  }
  const int64_t earliest = *std::min_element(starts.begin(), starts.end());
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const double shift_us = static_cast<double>(starts[i] - earliest);
    for (const json::Value& e : parsed[i].find("traceEvents")->items()) {
      json::Value shifted = e;
      if (const json::Value* ts = e.find("ts"); ts && ts->is_number())
        shifted.set("ts", json::Value::number(ts->as_double() + shift_us));
      out += (first ? "" : ",\n") + shifted.dump();
      first = false;
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"ember_start_unix_us\":" + std::to_string(earliest) + "}}\n";
  return out;
}

}  // namespace ember::profiler

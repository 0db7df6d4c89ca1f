// core/profiler.h: what a session records from several threads (ranges that nest, instants,
// async pairs, counters, tags), the Chrome trace it writes and parses back well formed, merging
// ranks' traces, and its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/ember_core.h"
#include "core/profiler.h"
#include "tests/trace_checks.h"

using namespace ember;
using namespace ember::testing;

namespace {

void spin_for(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

const TraceEvent& find(const std::vector<TraceEvent>& events, const std::string& name) {
  for (const TraceEvent& e : events)
    if (e.name == name) return e;
  FAIL("no event named " << name);
  throw;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("profiler: nothing is recorded without a session", "[profiler]") {
  CHECK_FALSE(profiler::active());
  { profiler::Range r("user", "outside"); }
  profiler::instant("user", "outside");
  profiler::Session session;
  session.start();
  session.stop();
  { profiler::Range r("user", "after stop"); }
  CHECK(session.events().empty());
}

TEST_CASE("profiler: ranges nest on each thread, async pairs span threads, the trace parses", "[profiler]") {
  profiler::Session session({.rank = 3});
  session.start();
  CHECK(profiler::active());
  const uint64_t id = profiler::next_async_id();
  const auto issued = profiler::Clock::now();
  {
    profiler::Range step("step", "step 1", {{"batch", "8"}});
    {
      profiler::Range forward("forward", "forward \"quoted\"\n");
      spin_for(std::chrono::microseconds(300));
    }
    std::thread worker([&] {
      profiler::set_thread_name("worker");
      profiler::Range r("data", "load");
      spin_for(std::chrono::microseconds(200));
      profiler::async_end("comm", "bucket 0", id, profiler::Clock::now());
    });
    worker.join();
    profiler::instant("user", "marker");
    profiler::counter("bytes", 1024);
    profiler::counter("not a number", std::nan(""));  // JSON has none: left out
  }
  profiler::async_begin("comm", "bucket 0", id, issued);
  session.stop();

  const std::vector<profiler::Event> raw = session.events();
  REQUIRE(raw.size() == 7);
  for (size_t i = 1; i < raw.size(); ++i) CHECK(raw[i - 1].start_ns <= raw[i].start_ns);
  const std::vector<TraceEvent> events = parse_trace(session.chrome_trace());
  REQUIRE(events.size() == 7);
  CHECK(malformed(events).empty());
  const TraceEvent& step = find(events, "step 1");
  const TraceEvent& forward = find(events, "forward \"quoted\"\n");
  const TraceEvent& load = find(events, "load");
  CHECK(step.pid == 3);
  CHECK(forward.tid == step.tid);
  CHECK(load.tid != step.tid);
  CHECK(forward.dur >= 300);
  CHECK(forward.ts >= step.ts);
  CHECK(forward.end() <= step.end());
  CHECK(load.ts >= forward.end());
  const std::vector<TraceEvent> spans = async_spans(events);
  REQUIRE(spans.size() == 1);
  CHECK(spans[0].ts <= step.ts + 1);
  CHECK(spans[0].end() >= load.ts + 200);  // ended by the worker after its 200 us
  CHECK(session.thread_names().at(static_cast<size_t>(load.tid)) == "worker");
  CHECK(session.chrome_trace().find("\"worker\"") != std::string::npos);
}

TEST_CASE("profiler: crossing ranges and unpaired async events are what the checker rejects", "[profiler]") {
  // The checker itself: a trace that would mislead Perfetto must not pass.
  std::vector<TraceEvent> crossing = {{"X", "a", "c", 0, 1, 0, 10}, {"X", "b", "c", 0, 1, 5, 10}};
  CHECK_FALSE(malformed(crossing).empty());
  std::vector<TraceEvent> nested = {{"X", "a", "c", 0, 1, 0, 10}, {"X", "b", "c", 0, 1, 5, 5}};
  CHECK(malformed(nested).empty());
  std::vector<TraceEvent> unpaired = {{"b", "a", "comm", 0, 1, 0, 0, 7}};
  CHECK_FALSE(malformed(unpaired).empty());
}

TEST_CASE("profiler: tags name the work a thread issues, and nest", "[profiler]") {
  CHECK(profiler::current_tag().empty());
  {
    profiler::Tag outer("DDP bucket 2");
    CHECK(profiler::current_tag() == "DDP bucket 2");
    {
      profiler::Tag empty("");
      CHECK(profiler::current_tag() == "DDP bucket 2");
      profiler::Tag inner("gather unit 1");
      CHECK(profiler::current_tag() == "gather unit 1");
    }
    CHECK(profiler::current_tag() == "DDP bucket 2");
    std::thread([] { CHECK(profiler::current_tag().empty()); }).join();
  }
  CHECK(profiler::current_tag().empty());
}

TEST_CASE("profiler: one session at a time, a cap on events, traces written whole", "[profiler]") {
  profiler::Session first({.max_events = 3});
  first.start();
  profiler::Session second;
  CHECK_THROWS_WITH(second.start(), Catch::Contains("another session") && Catch::Contains("recording"));
  for (int i = 0; i < 5; ++i) profiler::instant("user", "tick " + std::to_string(i));
  first.stop();
  CHECK(first.events().size() == 3);
  CHECK(first.dropped() == 2);
  CHECK(first.chrome_trace().find("\"ember_dropped_events\":2") != std::string::npos);

  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + "/trace.json";
  first.write(path);
  CHECK(parse_trace(read(path)).size() == 3);
  for (const auto& entry : std::filesystem::directory_iterator(dir))  // no temporary left behind
    CHECK(entry.path().filename().string().rfind("trace.json.tmp", 0) == std::string::npos);
  CHECK_THROWS_WITH(first.write(dir + "/missing/dir/trace.json"), Catch::Contains("missing/dir"));
  second.start();  // the first has stopped
  second.stop();
}

TEST_CASE("profiler: ranks' traces merge into one, aligned by their start on the system clock", "[profiler]") {
  std::vector<std::string> traces;
  for (int rank = 0; rank < 2; ++rank) {
    profiler::Session session({.rank = rank});
    session.start();
    { profiler::Range r("step", "step on rank " + std::to_string(rank)); }
    session.stop();
    traces.push_back(session.chrome_trace());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::vector<TraceEvent> merged = parse_trace(profiler::merge_traces(traces));
  REQUIRE(merged.size() == 2);
  CHECK(malformed(merged).empty());
  const TraceEvent& r0 = find(merged, "step on rank 0");
  const TraceEvent& r1 = find(merged, "step on rank 1");
  CHECK(r0.pid == 0);
  CHECK(r1.pid == 1);
  CHECK(r1.ts - r0.ts >= 20000);  // rank 1's session started 20 ms or more later
  CHECK(r1.ts - r0.ts < 5e6);
  CHECK_THROWS_WITH(profiler::merge_traces({traces[0], "{\"traceEvents\":[]}"}),
                    Catch::Contains("trace 1") && Catch::Contains("ember_start_unix_us"));
  CHECK_THROWS_WITH(profiler::merge_traces({"not json"}), Catch::Contains("trace 0"));
  CHECK_THROWS_WITH(profiler::merge_traces({}), Catch::Contains("at least one"));
}

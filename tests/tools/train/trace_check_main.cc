// trace_check FILE: reads a --profile trace, fails (exit 1, the reason on stderr) when it is not
// well formed (tests/trace_checks.h), else prints what the shell tests grep: the processes, the
// complete events per category, and per process how many DDP bucket spans began inside a backward.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/trace_checks.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_check FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  try {
    const auto events = ember::testing::parse_trace(text.str());
    const std::string wrong = ember::testing::malformed(events);
    if (!wrong.empty()) {
      std::fprintf(stderr, "trace_check: %s: %s\n", argv[1], wrong.c_str());
      return 1;
    }
    std::set<int64_t> pids;
    std::map<std::string, int> per_category;
    std::map<int64_t, std::vector<ember::testing::TraceEvent>> backwards;
    for (const auto& e : events) {
      pids.insert(e.pid);
      if (e.phase == "X") ++per_category[e.category];
      if (e.phase == "X" && e.name == "backward") backwards[e.pid].push_back(e);
    }
    std::map<int64_t, int> overlapping;
    for (const auto& span : ember::testing::async_spans(events)) {
      if (span.name.rfind("DDP bucket ", 0) != 0) continue;
      for (const auto& b : backwards[span.pid])
        if (span.ts >= b.ts && span.ts < b.end()) ++overlapping[span.pid];
    }
    std::printf("events %zu\n", events.size());
    for (int64_t pid : pids)
      std::printf("pid %lld buckets_begun_in_backward %d\n", static_cast<long long>(pid), overlapping[pid]);
    for (const auto& [category, count] : per_category) std::printf("category %s %d\n", category.c_str(), count);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_check: %s: %s\n", argv[1], e.what());
    return 1;
  }
  return 0;
}

// Catch2 compiled once, with Bazel's test sharding (Catch2 2.x has none): a target with
// `shard_count = N` runs as N processes at once, shard k taking the test cases k, k + N, k + 2N, ...
// of those selected, in Catch's order, so a long test binary keeps both cores busy instead of
// running alone at the end of the suite. On a real GPU host, EMBER_TEST_GPUS (set by
// tools/bench/run_gpu.sh to the host's count) leaves out the cases tagged [gpus:N] for a larger N,
// each named on a "not run" line: a host with one GPU still runs the rest of a test's cases.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/catch_session.h"

namespace {

// A test-spec term matching exactly `name`: quoted, with the characters Catch's parser would read
// as syntax (a comma separates alternatives even inside quotes) escaped.
std::string exact_name_spec(const std::string& name) {
  std::string spec = "\"";
  for (char c : name) {
    if (c == '\\' || c == '"' || c == ',' || c == '[' || c == ']' || c == '*' || c == '~') spec += '\\';
    spec += c;
  }
  return spec + "\",";
}

// N of a case's [gpus:N] tag: how many devices it needs (1 without the tag).
int gpus_needed(const Catch::TestCase& test) {
  for (const std::string& tag : test.tags)
    if (tag.rfind("gpus:", 0) == 0) return std::atoi(tag.c_str() + 5);
  return 1;
}

int shard_setting(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? std::atoi(value) : -1;
}

}  // namespace

namespace ember::test {

int run_catch_session(int argc, char** argv) {
  Catch::Session session;
  if (int status = session.applyCommandLine(argc, argv)) return status;
  const int shards = shard_setting("TEST_TOTAL_SHARDS"), shard = shard_setting("TEST_SHARD_INDEX");
  const int gpus = shard_setting("EMBER_TEST_GPUS");
  const bool sharded = shards > 1 && shard >= 0;
  if (!sharded && gpus < 0) return session.run();
  // Tells Bazel that this binary shards (else it would run every case in every shard).
  if (sharded)
    if (const char* status_file = std::getenv("TEST_SHARD_STATUS_FILE")) std::ofstream touch(status_file);
  const Catch::IConfig& config = session.config();
  std::vector<Catch::TestCase> selected;
  for (const Catch::TestCase& test :
       Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config)) {
    if (gpus >= 0 && gpus_needed(test) > gpus) {
      std::cout << "catch_session: not run: \"" << test.name << "\" needs " << gpus_needed(test)
                << " GPUs, EMBER_TEST_GPUS=" << gpus << "\n";
      continue;
    }
    selected.push_back(test);
  }
  Catch::ConfigData data = session.configData();
  data.testsOrTags.clear();
  const size_t first = sharded ? static_cast<size_t>(shard) : 0, step = sharded ? static_cast<size_t>(shards) : 1;
  for (size_t i = first; i < selected.size(); i += step) data.testsOrTags.push_back(exact_name_spec(selected[i].name));
  // A shard with no case (more shards than cases), or a test all of whose cases need more GPUs,
  // runs none: Catch would run all.
  if (data.testsOrTags.empty()) return 0;
  session.useConfigData(data);
  return session.run();
}

}  // namespace ember::test

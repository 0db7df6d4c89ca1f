// Catch2 compiled once, with Bazel's test sharding (Catch2 2.x has none): a target with
// `shard_count = N` runs as N processes at once, shard k taking the test cases k, k + N, k + 2N, ...
// of those selected, in Catch's order, so a long test binary keeps both cores busy instead of
// running alone at the end of the suite.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
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
  if (shards > 1 && shard >= 0) {
    // Tells Bazel that this binary shards (else it would run every case in every shard).
    if (const char* status_file = std::getenv("TEST_SHARD_STATUS_FILE")) std::ofstream touch(status_file);
    const Catch::IConfig& config = session.config();
    const std::vector<Catch::TestCase> selected =
        Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
    Catch::ConfigData data = session.configData();
    data.testsOrTags.clear();
    for (size_t i = static_cast<size_t>(shard); i < selected.size(); i += static_cast<size_t>(shards))
      data.testsOrTags.push_back(exact_name_spec(selected[i].name));
    // A shard with no case (more shards than cases) runs none, and passes: Catch would run all.
    if (data.testsOrTags.empty()) return 0;
    session.useConfigData(data);
  }
  return session.run();
}

}  // namespace ember::test

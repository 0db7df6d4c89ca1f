// Runs Catch2's session with Bazel's test sharding: tests/catch_main.cc's main() calls it, and so
// does a test binary with a main of its own (tests/backends/backend_ops_main.cc, whose extra
// modes come first).
#pragma once

namespace ember::test {

// Catch2's command line, with the shard of the test cases that TEST_SHARD_INDEX and
// TEST_TOTAL_SHARDS select (see catch_session.cc). Returns the process's exit status.
int run_catch_session(int argc, char** argv);

}  // namespace ember::test

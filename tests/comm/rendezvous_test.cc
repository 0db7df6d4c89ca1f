// Rendezvous at a TcpStore, with the ranks as threads of one process (each its own client, rank 0
// serving): every rank meets every other; a WORLD_SIZE that differs, a rank number started twice
// and a rank that never comes are errors naming them, within the timeout. And the environment's
// address variables.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "comm/rendezvous.h"
#include "core/error.h"
#include "tests/comm/free_port.h"

using namespace ember;
using namespace ember::comm;
using ember::testing::free_port;
using namespace std::chrono_literals;

namespace {

struct Outcome {
  std::shared_ptr<Store> store;
  std::string error;
};

// Runs rendezvous() for each (rank, world size) on its own thread, rank 0 serving at `port`.
std::vector<Outcome> meet(int port, const std::vector<std::pair<int, int>>& ranks, std::chrono::milliseconds timeout) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      RendezvousOptions o;
      o.master = {"127.0.0.1", port, "EMBER_MASTER_ADDR/EMBER_MASTER_PORT"};
      o.rank = ranks[i].first;
      o.world_size = ranks[i].second;
      o.job = "rendezvous-test";
      o.timeout = timeout;
      // Rank 0 first, so that every error is the late rank's own.
      if (o.rank != 0) std::this_thread::sleep_for(100ms);
      try {
        out[i].store = rendezvous(o);
      } catch (const ember::Error& e) {
        out[i].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("rendezvous: four ranks meet at rank 0's store and share through it", "[rendezvous]") {
  const int port = free_port();
  auto out = meet(port, {{0, 4}, {3, 4}, {1, 4}, {2, 4}}, 20s);
  for (const auto& o : out) REQUIRE(o.error.empty());
  // The id of a communicator, from rank 0 to the others.
  std::vector<uint8_t> id = {1, 2, 3, 0, 255};
  share_through_store(out[0].store, "nccl/WORLD", 0)(id);
  for (size_t i = 1; i < out.size(); ++i) {
    std::vector<uint8_t> mine(5, 0);
    share_through_store(out[i].store, "nccl/WORLD", 1)(mine);
    REQUIRE(mine == id);
  }
  std::vector<uint8_t> wrong(4);
  REQUIRE_THROWS_WITH(share_through_store(out[1].store, "nccl/WORLD", 1)(wrong),
                      Catch::Contains("holds 5 bytes, expected 4"));
}

TEST_CASE("rendezvous: a different WORLD_SIZE, a rank started twice and a missing rank are named",
          "[rendezvous][errors]") {
  SECTION("WORLD_SIZE") {
    auto out = meet(free_port(), {{0, 2}, {1, 3}}, 1500ms);
    REQUIRE_THAT(out[1].error, Catch::Contains("rank 1 has WORLD_SIZE=3 but the job's store at 127.0.0.1:") &&
                                   Catch::Contains("has WORLD_SIZE=2 (rank 0)"));
    // Rank 1 never counted as joined: rank 0 names it when its wait ends.
    REQUIRE_THAT(out[0].error, Catch::Contains("for every rank of 2; 1 never joined: rank 1"));
  }
  SECTION("two processes with one RANK") {
    auto out = meet(free_port(), {{0, 2}, {1, 2}, {1, 2}}, 5s);
    const int errors = !out[1].error.empty() + !out[2].error.empty();
    REQUIRE(errors == 1);
    REQUIRE(out[0].error.empty());
    const std::string& e = out[1].error.empty() ? out[2].error : out[1].error;
    REQUIRE_THAT(e, Catch::Contains("rank 1 of job 'rendezvous-test' was claimed twice") &&
                        Catch::Contains("(two processes started with RANK=1)"));
  }
  SECTION("a rank that never comes") {
    const auto start = std::chrono::steady_clock::now();
    auto out = meet(free_port(), {{0, 4}, {2, 4}}, 1s);
    REQUIRE(std::chrono::steady_clock::now() - start < 10s);
    REQUIRE_THAT(out[0].error, Catch::Contains("rank 0 waited 1 s at the store at 127.0.0.1:") &&
                                   Catch::Contains("for every rank of 4; 2 never joined: ranks 1, 3"));
    // Rank 2 may list them too, or find rank 0 gone with its store.
    REQUIRE_THAT(out[1].error, Catch::Contains("rank 2 waited 1 s at the store at 127.0.0.1:") &&
                                   (Catch::Contains("2 never joined: ranks 1, 3") ||
                                    Catch::Contains("and then the store went away (rank 0, which serves it, ended")));
  }
  SECTION("no rank 0") {
    auto out = meet(free_port(), {{1, 2}}, 500ms);
    REQUIRE_THAT(out[0].error, Catch::Contains("rank 1 could not reach the store at 127.0.0.1:"));
  }
}

TEST_CASE("master_address: EMBER_MASTER_* first, then PyTorch's MASTER_*; half a pair or a bad port raises",
          "[rendezvous][env]") {
  const auto clear = [] {
    for (const char* n : {"EMBER_MASTER_ADDR", "EMBER_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(n);
  };
  clear();
  REQUIRE_FALSE(master_address().has_value());
  setenv("MASTER_ADDR", "10.1.2.3", 1);
  setenv("MASTER_PORT", "29500", 1);
  auto m = master_address();
  REQUIRE(m.has_value());
  REQUIRE(m->host == "10.1.2.3");
  REQUIRE(m->port == 29500);
  REQUIRE(m->source == "MASTER_ADDR/MASTER_PORT");
  setenv("EMBER_MASTER_ADDR", "127.0.0.1", 1);
  setenv("EMBER_MASTER_PORT", "1234", 1);
  m = master_address();
  REQUIRE(m->host == "127.0.0.1");
  REQUIRE(m->port == 1234);
  unsetenv("EMBER_MASTER_PORT");
  REQUIRE_THROWS_WITH(master_address(), Catch::Contains("EMBER_MASTER_ADDR is set but EMBER_MASTER_PORT is not"));
  setenv("EMBER_MASTER_PORT", "70000", 1);
  REQUIRE_THROWS_WITH(master_address(), Catch::Contains("EMBER_MASTER_PORT must be a TCP port (1-65535), got '70000'"));
  setenv("EMBER_MASTER_PORT", "12ab", 1);
  REQUIRE_THROWS_WITH(master_address(), Catch::Contains("got '12ab'"));
  clear();
}

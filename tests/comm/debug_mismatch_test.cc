// EMBER_DISTRIBUTED_DEBUG=1: ranks that issue different collectives get an error naming the
// first rank and collective that differ, and the group stays usable afterwards.
#include <catch2/catch.hpp>

#include "comm/init.h"
#include "core/ember_core.h"

using namespace ember;

TEST_CASE("mismatched collectives are named on every rank", "[comm][debug]") {
  REQUIRE(comm::distributed_debug());
  auto g = comm::init();
  REQUIRE(g->size() >= 2);
  const int other = g->rank() == 0 ? 1 : 0;
  comm::WorkPtr work;
  if (g->rank() == 0)
    work = g->all_reduce(zeros({3}));
  else if (g->rank() == 1)
    work = g->broadcast(zeros({4}), 0);
  else
    work = g->all_reduce(zeros({3}));
  if (g->rank() <= 1) {
    std::string expected_other =
        g->rank() == 0 ? "broadcast #1 on WORLD, float32 [4], root 0" : "all_reduce #1 (sum) on WORLD, float32 [3]";
    REQUIRE_THROWS_WITH(work->wait(),
                        Catch::Contains("collective mismatch on WORLD") &&
                            Catch::Contains("rank " + std::to_string(other) + " called " + expected_other));
  } else {
    REQUIRE_THROWS_WITH(work->wait(), Catch::Contains("collective mismatch"));
  }
  // The failed Work reports itself completed, with the failure as its error.
  REQUIRE(work->is_completed());
  REQUIRE_THAT(work->error(), Catch::Contains("collective mismatch on WORLD"));
  // Shapes differ but the kind agrees: still caught.
  auto shapes = g->all_reduce(zeros({g->rank() == 0 ? 5 : 6}));
  REQUIRE_THROWS_WITH(shapes->wait(), Catch::Contains("float32 [5]") && Catch::Contains("float32 [6]"));
  // Rank 0 inside an OverlapScope (its all-reduce posted non-blocking), the others outside: MPI
  // would never match the two kinds (the collective timeout's message), debug mode names it.
  // (Gloo runs both kinds alike: nothing to name there.)
  if (comm::read_environment().backend == "mpi") {
    comm::WorkPtr mixed;
    if (g->rank() == 0) {
      comm::OverlapScope scope;
      mixed = g->all_reduce(zeros({2}));
    } else {
      mixed = g->all_reduce(zeros({2}));
    }
    REQUIRE_THROWS_WITH(mixed->wait(), Catch::Contains("collective mismatch on WORLD") &&
                                           Catch::Contains("all_reduce #3 (sum) on WORLD, float32 [2], non-blocking "
                                                           "(inside an OverlapScope)"));
  }
  // Matching collectives still work after the errors, inside a scope on every rank too.
  Tensor t = ones({2});
  g->all_reduce(t)->wait();
  REQUIRE(t.sum().item<double>() == 2.0 * g->size());
  {
    comm::OverlapScope scope;
    Tensor u = ones({3});
    g->all_reduce(u)->wait();
    REQUIRE(u.sum().item<double>() == 3.0 * g->size());
  }
}

TEST_CASE("send/recv: a subset's traffic keeps collectives aligned; a mismatched recv is named", "[comm][debug]") {
  auto g = comm::init();
  // Only ranks 0 and 1 exchange messages; rank 2 goes straight to the all_reduce.
  if (g->rank() <= 1) {
    const int peer = 1 - g->rank();
    Tensor out = full({3}, g->rank()), in = empty({3});
    auto s = g->send(out, peer, 2);
    g->recv(in, peer, 2)->wait();
    s->wait();
    REQUIRE(in.sum().item<double>() == 3.0 * peer);
  }
  Tensor t = ones({2});
  g->all_reduce(t)->wait();
  REQUIRE(t.sum().item<double>() == 2.0 * g->size());

  // Rank 0 sends 5 floats; rank 1 expects 4 int32s, then 6 floats (no truncation: still named).
  if (g->rank() == 0) {
    g->send(zeros({5}), 1, 3)->wait();
    g->send(zeros({5}), 1, 3)->wait();
  } else if (g->rank() == 1) {
    REQUIRE_THROWS_WITH(
        g->recv(empty({4}, TensorOptions(kInt32)), 0, 3)->wait(),
        Catch::Contains("send/recv mismatch on WORLD: rank 1 called recv #1 on WORLD, int32 [4], from "
                        "rank 0, tag 3 but rank 0 sent send #1 on WORLD, float32 [5], to rank 1, tag 3"));
    auto larger = g->recv(empty({6}), 0, 3);
    REQUIRE_THROWS_WITH(larger->wait(), Catch::Contains("recv #2 on WORLD, float32 [6]") &&
                                            Catch::Contains("sent send #2 on WORLD, float32 [5]"));
    REQUIRE(larger->is_completed());
    REQUIRE_THAT(larger->error(), Catch::Contains("send/recv mismatch"));
  }
  g->all_reduce(t)->wait();
  REQUIRE(t.sum().item<double>() == 2.0 * g->size() * g->size());
}

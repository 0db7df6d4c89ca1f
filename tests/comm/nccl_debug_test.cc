// EMBER_DISTRIBUTED_DEBUG=1 over NCCL (each rank on its emulated cuda:LOCAL_RANK): ranks that
// issue different collectives get an error naming the first rank and collective that differ,
// from wait() as on MPI, none of them queues the collective, and the group stays usable.
#include <catch2/catch.hpp>

#include "comm/init.h"
#include "core/ember_core.h"

using namespace ember;

namespace {
TensorOptions on_dev(DType dtype = kFloat32) {
  return TensorOptions(dtype).device(Device::cuda(comm::read_environment().local_rank));
}
}  // namespace

TEST_CASE("mismatched NCCL collectives are named on every rank", "[comm][debug][nccl]") {
  REQUIRE(comm::distributed_debug());
  auto g = comm::init();
  REQUIRE(g->size() >= 3);
  const int other = g->rank() == 0 ? 1 : 0;
  comm::WorkPtr work;
  if (g->rank() == 1)
    work = g->broadcast(zeros({4}, on_dev()), 0);
  else
    work = g->all_reduce(zeros({3}, on_dev()));
  if (g->rank() <= 1) {
    std::string expected_other =
        g->rank() == 0 ? "broadcast #1 on WORLD, float32 [4], root 0" : "all_reduce #1 (sum) on WORLD, float32 [3]";
    REQUIRE_THROWS_WITH(work->wait(),
                        Catch::Contains("collective mismatch on WORLD") &&
                            Catch::Contains("rank " + std::to_string(other) + " called " + expected_other));
  } else {
    REQUIRE_THROWS_WITH(work->wait(), Catch::Contains("collective mismatch"));
  }
  REQUIRE(work->is_completed());
  REQUIRE_THAT(work->error(), Catch::Contains("collective mismatch on WORLD"));
  // Same kind, different shapes and dtypes.
  auto shapes = g->all_reduce(zeros({g->rank() == 0 ? 5 : 6}, on_dev()));
  REQUIRE_THROWS_WITH(shapes->wait(), Catch::Contains("float32 [5]") && Catch::Contains("float32 [6]"));
  auto dtypes = g->all_reduce(zeros({2}, on_dev(g->rank() == 2 ? kFloat64 : kFloat32)));
  REQUIRE_THROWS_WITH(dtypes->wait(), Catch::Contains("float64 [2]") && Catch::Contains("float32 [2]"));
  // Matching collectives still work afterwards.
  Tensor t = ones({2}, on_dev());
  g->all_reduce(t)->wait();
  REQUIRE(t.sum().item<double>() == 2.0 * g->size());
}

TEST_CASE("a recv whose send differs in shape or tag is named (NCCL has no tags)", "[comm][debug][nccl]") {
  auto g = comm::init();
  if (g->rank() == 0) {
    g->send(zeros({5}, on_dev()), 1, 3)->wait();
    g->send(zeros({5}, on_dev()), 1, 4)->wait();
  } else if (g->rank() == 1) {
    REQUIRE_THROWS_WITH(
        g->recv(empty({4}, on_dev(kInt32)), 0, 3)->wait(),
        Catch::Contains("send/recv mismatch on WORLD: rank 1 called recv #1 on WORLD, int32 [4], from "
                        "rank 0, tag 3 but rank 0 sent send #1 on WORLD, float32 [5], to rank 1, tag 3"));
    REQUIRE_THROWS_WITH(g->recv(empty({5}, on_dev()), 0, 9)->wait(),
                        Catch::Contains("tag 4") && Catch::Contains("NCCL has no tags"));
  }
}

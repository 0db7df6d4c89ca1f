// Every collective and dtype of the MPI process group against an expectation each rank computes
// locally (run under mpirun with 2 and 4 ranks by tests/comm/BUILD).
#include <catch2/catch.hpp>

#include <thread>

#include "comm/init.h"
#include "core/ember_core.h"

using namespace ember;

namespace {

std::shared_ptr<comm::ProcessGroup> world() { return comm::init(); }

// Where each rank's tensors live: the CPU (MPI), or the rank's own device (the NCCL targets,
// with EMBER_EMULATED_GPUS set, build this source with EMBER_COMM_TEST_ON_CUDA).
Device dev() {
#ifdef EMBER_COMM_TEST_ON_CUDA
  static const Device device = Device::cuda(comm::read_environment().local_rank);
  return device;
#else
  return Device(kCPU);
#endif
}

TensorOptions on_dev(DType dtype = kFloat32) { return TensorOptions(dtype).device(dev()); }

// A rank-dependent value for element i, exactly representable in every dtype tested (uint8
// shifted to stay non-negative, bool thresholded).
double value(int rank, int64_t i, DType dtype = kFloat64) {
  double x = static_cast<double>((rank * 7 + i * 3) % 11) - 3.0;
  if (dtype == kUInt8) x += 3.0;
  if (dtype == kBool) x = x > 0 ? 1.0 : 0.0;
  return x;
}

Tensor rank_tensor(int rank, const Shape& shape, DType dtype) {
  int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i, dtype);
  return tensor(v, shape).to(dtype).to(dev());
}

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool};
const std::vector<comm::ReduceOp> kAllOps = {comm::ReduceOp::Sum, comm::ReduceOp::Avg, comm::ReduceOp::Min,
                                             comm::ReduceOp::Max, comm::ReduceOp::Product};

// Avg needs a floating dtype; a uint8 product wraps around.
bool op_applies(comm::ReduceOp op, DType dtype) {
  if (op == comm::ReduceOp::Avg && !is_floating(dtype)) return false;
  return !(op == comm::ReduceOp::Product && dtype == kUInt8);
}

double reduce_expected(comm::ReduceOp op, int size, int64_t i, DType dtype) {
  double acc = value(0, i, dtype);
  for (int r = 1; r < size; ++r) {
    double x = value(r, i, dtype);
    switch (op) {
      case comm::ReduceOp::Sum:
      case comm::ReduceOp::Avg:
        acc = dtype == kBool ? std::max(acc, x) : acc + x;
        break;
      case comm::ReduceOp::Min:
        acc = std::min(acc, x);
        break;
      case comm::ReduceOp::Max:
        acc = std::max(acc, x);
        break;
      case comm::ReduceOp::Product:
        acc = dtype == kBool ? std::min(acc, x) : acc * x;
        break;
    }
  }
  if (op == comm::ReduceOp::Avg) acc /= size;
  return acc;
}

// Reductions in bfloat16 / float16 round at every step; everything else is exact.
double tolerance_for(DType dtype, double expected) {
  return (dtype == kBFloat16 || dtype == kFloat16) ? 0.1 + 0.02 * std::abs(expected) : 1e-9;
}

void require_values(const Tensor& t, const std::function<double(int64_t)>& expected, double tolerance = 0.0) {
  std::vector<double> got = t.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    double want = expected(static_cast<int64_t>(i));
    INFO("element " << i << " of " << dtype_name(t.dtype()) << " " << shape_str(t.sizes()) << ": got " << got[i]
                    << ", expected " << want);
    REQUIRE(std::abs(got[i] - want) <= std::max(tolerance, tolerance_for(t.dtype(), want)));
  }
}

}  // namespace

TEST_CASE("all_reduce: every op and dtype", "[comm]") {
  auto g = world();
  for (DType dtype : kAllDTypes) {
    for (comm::ReduceOp op : kAllOps) {
      if (!op_applies(op, dtype)) continue;
      INFO("dtype " << dtype_name(dtype) << " op " << comm::reduce_op_name(op));
      Tensor t = rank_tensor(g->rank(), {3, 5}, dtype);
      g->all_reduce(t, op)->wait();
      require_values(t, [&](int64_t i) { return reduce_expected(op, g->size(), i, dtype); });
    }
  }
}

TEST_CASE("all_reduce on a non-contiguous tensor writes back through the view", "[comm]") {
  auto g = world();
  Tensor base = zeros({4, 6}, on_dev());
  Tensor view = base.t().slice(0, 1, 6, 2);  // [3, 4], strided
  {
    NoGradGuard no_grad;
    view.fill_(g->rank() + 1);
  }
  g->all_reduce(view)->wait();
  double expected = g->size() * (g->size() + 1) / 2.0;
  REQUIRE(view.sum().item<double>() == Approx(expected * 12));
  REQUIRE(base.sum().item<double>() == Approx(expected * 12));
}

TEST_CASE("broadcast and reduce (every op) from every root, every dtype", "[comm]") {
  auto g = world();
  for (DType dtype : kAllDTypes) {
    for (int root = 0; root < g->size(); ++root) {
      INFO("dtype " << dtype_name(dtype) << " root " << root);
      Tensor t = rank_tensor(g->rank(), {7}, dtype);
      g->broadcast(t, root)->wait();
      require_values(t, [&](int64_t i) { return value(root, i, dtype); });
      for (comm::ReduceOp op : kAllOps) {
        if (!op_applies(op, dtype)) continue;
        INFO("op " << comm::reduce_op_name(op));
        Tensor r = rank_tensor(g->rank(), {7}, dtype);
        g->reduce(r, root, op)->wait();
        if (g->rank() == root) require_values(r, [&](int64_t i) { return reduce_expected(op, g->size(), i, dtype); });
      }
    }
  }
}

TEST_CASE("all_gather into a list and into one tensor, every dtype", "[comm]") {
  auto g = world();
  for (DType dtype : kAllDTypes) {
    INFO("dtype " << dtype_name(dtype));
    Tensor input = rank_tensor(g->rank(), {2, 3}, dtype);
    std::vector<Tensor> outputs;
    for (int r = 0; r < g->size(); ++r) outputs.push_back(empty({2, 3}, on_dev(dtype)));
    g->all_gather(outputs, input)->wait();
    for (int r = 0; r < g->size(); ++r) require_values(outputs[r], [&](int64_t i) { return value(r, i, dtype); });
    Tensor flat = empty({g->size() * 2, 3}, on_dev(dtype));
    g->all_gather_into_tensor(flat, input)->wait();
    for (int r = 0; r < g->size(); ++r)
      require_values(flat.narrow(0, 2 * r, 2), [&](int64_t i) { return value(r, i, dtype); });
  }
}

TEST_CASE("reduce_scatter from a list and from one tensor, every op and dtype", "[comm]") {
  auto g = world();
  const int n = g->size(), me = g->rank();
  const int64_t m = 5;  // elements per rank's chunk
  for (DType dtype : kAllDTypes) {
    for (comm::ReduceOp op : kAllOps) {
      if (!op_applies(op, dtype)) continue;
      INFO("dtype " << dtype_name(dtype) << " op " << comm::reduce_op_name(op));
      // Element i of chunk r is element r * m + i of the rank's values.
      Tensor packed = rank_tensor(me, {n, m}, dtype);
      auto expected = [&](int64_t i) { return reduce_expected(op, n, me * m + i, dtype); };
      Tensor out = empty({m}, on_dev(dtype));
      g->reduce_scatter_tensor(out, packed, op)->wait();
      require_values(out, expected);
      std::vector<Tensor> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(packed.select(0, r));
      Tensor out_list = empty({m}, on_dev(dtype));
      g->reduce_scatter(out_list, inputs, op)->wait();
      require_values(out_list, expected);
    }
  }
}

TEST_CASE("all_to_all with lists and with one tensor, every dtype", "[comm]") {
  auto g = world();
  const int n = g->size(), me = g->rank();
  for (DType dtype : kAllDTypes) {
    INFO("dtype " << dtype_name(dtype));
    // What rank `from` sends to rank `to`: the values of the pseudo-rank from * n + to.
    std::vector<Tensor> inputs, outputs;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(rank_tensor(me * n + r, {2}, dtype));
      outputs.push_back(empty({2}, on_dev(dtype)));
    }
    g->all_to_all(outputs, inputs)->wait();
    for (int r = 0; r < n; ++r) require_values(outputs[r], [&](int64_t i) { return value(r * n + me, i, dtype); });
    Tensor in = stack(inputs), out = empty({n, 2}, on_dev(dtype));
    g->all_to_all_single(out, in)->wait();
    for (int r = 0; r < n; ++r)
      require_values(out.select(0, r), [&](int64_t i) { return value(r * n + me, i, dtype); });
  }
}

TEST_CASE("send and recv around a ring, both orders, without deadlock, every dtype", "[comm]") {
  auto g = world();
  const int n = g->size(), me = g->rank();
  if (n < 2) return;
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  const uint64_t collectives_before = g->barrier()->info().sequence;
  uint64_t count = 0;
  for (DType dtype : kAllDTypes) {
    INFO("dtype " << dtype_name(dtype));
    Tensor out = rank_tensor(me, {1000}, dtype);
    Tensor in = empty({1000}, on_dev(dtype));
#ifdef EMBER_COMM_TEST_ON_CUDA
    // NCCL's send completes only once its receiver has the data, and one stream runs a rank's
    // traffic in order: around a ring of even length, even ranks send first and odd ones receive.
    REQUIRE(n % 2 == 0);
    comm::WorkPtr s, r;
    if (me % 2 == 0) {
      s = g->send(out, next, 5);
      r = g->recv(in, previous, 5);
    } else {
      r = g->recv(in, previous, 5);
      s = g->send(out, next, 5);
    }
#else
    // Everyone posts the send first: with blocking semantics this would deadlock on large messages.
    auto s = g->send(out, next, 5);
    auto r = g->recv(in, previous, 5);
#endif
    s->wait();
    r->wait();
    require_values(in, [&](int64_t i) { return value(previous, i, dtype); });
    // Numbered per peer, tag and direction.
    ++count;
    REQUIRE(s->info().describe() == "send #" + std::to_string(count) + " on WORLD, " + dtype_name(dtype) +
                                        " [1000], to rank " + std::to_string(next) + ", tag 5");
    REQUIRE(r->info().describe() == "recv #" + std::to_string(count) + " on WORLD, " + dtype_name(dtype) +
                                        " [1000], from rank " + std::to_string(previous) + ", tag 5");
  }
  // Point-to-point traffic does not advance the collective numbers.
  REQUIRE(g->barrier()->info().sequence == collectives_before + 1);
}

TEST_CASE("a finished Work reports completion and no error", "[comm]") {
  auto g = world();
  Tensor t = ones({3}, on_dev());
  comm::WorkPtr work = g->all_reduce(t);
  // A bounded wait blocks the host on every backend (a plain one does not on NCCL: it orders the
  // caller's stream after the collective, see nccl_ordering_test).
  work->wait(std::chrono::seconds(60));
  REQUIRE(work->is_completed());
  REQUIRE(work->error().empty());
  // Polling alone sees it complete too.
  comm::WorkPtr polled = g->broadcast(t, 0);
  while (!polled->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(polled->error().empty());
  REQUIRE(polled->info().kind == comm::CollectiveKind::Broadcast);
}

TEST_CASE("a collective submitted in an OverlapScope completes while its caller keeps computing", "[comm]") {
  auto g = world();
  REQUIRE_FALSE(comm::OverlapScope::active());
  Tensor t = full({4096}, static_cast<double>(g->rank() + 1), on_dev());
  comm::WorkPtr work;
  {
    comm::OverlapScope outer;
    {
      comm::OverlapScope inner;
      work = g->all_reduce(t);
    }
    REQUIRE(comm::OverlapScope::active());  // scopes nest
  }
  REQUIRE_FALSE(comm::OverlapScope::active());
  // Busy, never blocking: only the communication thread can finish it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  double busy = 0;
  while (!work->is_completed() && std::chrono::steady_clock::now() < deadline) busy += 1e-9;
  REQUIRE(work->is_completed());
  REQUIRE(work->error().empty());
  const double expected = g->size() * (g->size() + 1) / 2.0;
  REQUIRE(t.to_vector<float>()[4095] == static_cast<float>(expected));
  REQUIRE(busy >= 0);
}

TEST_CASE("barrier, sub-groups and their sequence numbers", "[comm]") {
  auto g = world();
  g->barrier()->wait();
  std::vector<int> evens;
  for (int r = 0; r < g->size(); r += 2) evens.push_back(r);
  auto sub = g->new_group(evens);
  REQUIRE((sub != nullptr) == (g->rank() % 2 == 0));
  if (sub) {
    REQUIRE(sub->size() == static_cast<int>(evens.size()));
    REQUIRE(sub->rank() == g->rank() / 2);
    Tensor t = ones({3}, on_dev());
    auto work = sub->all_reduce(t);
    work->wait();
    REQUIRE(work->info().sequence == 1);
    REQUIRE(work->info().group.rfind("group(0", 0) == 0);
    require_values(t, [&](int64_t) { return static_cast<double>(evens.size()); });
  }
  g->barrier()->wait();
}

TEST_CASE("misuse raises at the call site, naming the collective", "[comm]") {
  auto g = world();
  REQUIRE_THROWS_WITH(g->broadcast(zeros({2}, on_dev()), g->size()),
                      Catch::Contains("broadcast") && Catch::Contains("outside the group"));
  REQUIRE_THROWS_WITH(g->all_reduce(zeros({2}, on_dev(kInt64)), comm::ReduceOp::Avg),
                      Catch::Contains("avg needs a floating tensor"));
  std::vector<Tensor> too_few = {zeros({2}, on_dev())};
  if (g->size() > 1)
    REQUIRE_THROWS_WITH(g->all_gather(too_few, zeros({2}, on_dev())),
                        Catch::Contains("expected " + std::to_string(g->size())));
  REQUIRE_THROWS_WITH(g->send(zeros({2}, on_dev()), g->rank()), Catch::Contains("cannot send to itself"));
}

TEST_CASE("a wait with a timeout raises naming the collective while a rank lags", "[comm]") {
  auto g = world();
  if (g->size() < 2) return;
  Tensor t = ones({4}, on_dev());
  if (g->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto work = g->all_reduce(t);
  if (g->rank() == 0) {
    REQUIRE_THROWS_WITH(work->wait(std::chrono::milliseconds(200)),
                        Catch::Contains("all_reduce #") && Catch::Contains("on WORLD") &&
                            Catch::Contains("float32 [4]") && Catch::Contains("did not complete"));
  }
  work->wait();  // it does complete once rank 1 arrives
  require_values(t, [&](int64_t) { return static_cast<double>(g->size()); });
}

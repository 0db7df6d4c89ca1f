// multiprocessing::Queue: a plain tensor travels by copy (the receiver's changes stay its own), a
// shared one as a handle (the same memory on both sides), many producers deliver every tensor
// exactly once, and a thousand handles to one segment cost the receiver one descriptor.
#include <catch2/catch.hpp>
#include <set>

#include "core/ember_core.h"
#include "parallel/multiprocessing/multiprocessing.h"
#include "tests/parallel/multiprocessing/mp_helpers.h"

using namespace ember;
namespace mp = ember::multiprocessing;

namespace {

constexpr int kHandles = 1000;
const auto kWait = std::chrono::milliseconds(30000);

void echo(int, int, mp::Shared& shared) {
  mp::Queue in = shared.queue("in"), out = shared.queue("out");
  Tensor plain = in.get(kWait);
  EMBER_CHECK(!plain.is_shared(), "a plain tensor arrived shared");
  out.put(plain * 2);
  plain.fill_(0);  // the parent's original must not change
  Tensor handle = in.get(kWait);
  EMBER_CHECK(handle.is_shared(), "a shared tensor arrived as a copy");
  handle.add_(1);
  out.put(handle);
  const size_t fds = testing::open_fds();
  std::vector<Tensor> kept;
  for (int i = 0; i < kHandles; ++i) kept.push_back(in.get(kWait));
  EMBER_CHECK(testing::open_fds() <= fds + 1, "receiving ", kHandles, " handles to one segment opened ",
              testing::open_fds() - fds, " descriptors");
  for (const auto& t : kept) {
    EMBER_CHECK(t.data_ptr() == kept[0].data_ptr(), "two handles to one tensor map different memory");
  }
}
EMBER_SPAWN_ENTRY(echo);

void produce(int rank, int, mp::Shared& shared) {
  mp::Queue out = shared.queue("out");
  for (int k = 0; k < 50; ++k) out.put(full({2, 3}, rank * 1000 + k, kInt64));
}
EMBER_SPAWN_ENTRY(produce);

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

}  // namespace

TEST_CASE("a plain tensor is copied, a shared one is handed over") {
  mp::Queue in, out;
  Tensor base = randn({5, 7}, kFloat64);
  Tensor plain = base.transpose(0, 1).narrow(0, 1, 4);  // non-contiguous: sent as its values
  Tensor original = plain.clone();
  Tensor shared = rand({3, 4}).share_memory_();
  Tensor shared_before = shared.clone();
  // The queue holds some hundreds of messages, and a full one blocks put until a worker gets:
  // the parent feeds it while the worker runs.
  mp::Workers worker = mp::start(1, echo, mp::Shared().add("in", in).add("out", out));
  in.put(plain);
  in.put(shared);
  for (int i = 0; i < kHandles; ++i) in.put(shared);
  worker.join();
  Tensor doubled = out.get(kWait);
  CHECK(doubled.sizes() == Shape{4, 5});
  CHECK(max_diff(doubled, original * 2) == 0.0);
  CHECK(max_diff(plain, original) == 0.0);
  Tensor back = out.get(kWait);
  CHECK(back.is_shared());
  CHECK(back.data_ptr() == shared.data_ptr());  // the parent's own memory, mapped once
  CHECK(max_diff(shared, shared_before + 1) < 1e-6);
  CHECK_FALSE(out.try_get().has_value());
}

TEST_CASE("many producers: every tensor arrives once") {
  mp::Queue out;
  mp::spawn(3, produce, mp::Shared().add("out", out));
  std::multiset<int64_t> got;
  for (int i = 0; i < 150; ++i) {
    Tensor t = out.get(kWait);
    REQUIRE(t.sizes() == Shape{2, 3});
    REQUIRE(t.min().item<int64_t>() == t.max().item<int64_t>());
    got.insert(t.min().item<int64_t>());
  }
  std::multiset<int64_t> expected;
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 50; ++k) expected.insert(r * 1000 + k);
  }
  CHECK(got == expected);
  CHECK_FALSE(out.try_get().has_value());
}

TEST_CASE("get on an empty queue times out with an Error") {
  mp::Queue q;
  CHECK_THROWS_WITH(q.get(std::chrono::milliseconds(50)), Catch::Contains("Queue.get: no tensor arrived within 50 ms"));
  q.put(Tensor());
  CHECK_FALSE(q.get(kWait).defined());
}

// Tensor::share_memory_ and Module::share_memory in one process: storage moves in place (views
// and values survive), many tensors pack into few segments, and running out is an Error that
// names the cause and the size (never a SIGBUS).
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <string>

#include "core/ember_core.h"
#include "core/shared_memory.h"
#include "nn/nn.h"
#include "tests/parallel/multiprocessing/mp_helpers.h"

using namespace ember;

namespace {

bool mapped_as_memfd(const void* p) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  char line[512];
  bool found = false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi) {
      found = std::string(line).find("memfd:ember-shared") != std::string::npos;
    }
  }
  std::fclose(maps);
  return found;
}

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

}  // namespace

TEST_CASE("share_memory_ moves the storage in place: views, values and autograd survive") {
  Tensor base = rand({7, 13}, kFloat64).requires_grad_(true);
  Tensor before = base.detach().clone();
  Tensor view = base.detach().transpose(0, 1).narrow(0, 2, 5);  // a non-contiguous view
  const auto shm_before = testing::dev_shm();
  REQUIRE_FALSE(base.is_shared());
  REQUIRE(&base.share_memory_() == &base);
  CHECK(base.is_shared());
  CHECK(view.is_shared());  // the view's storage moved with it
  CHECK(mapped_as_memfd(base.data_ptr()));
  CHECK(base.requires_grad());
  CHECK(max_diff(base.detach(), before) == 0.0);
  view.fill_(3.5);
  CHECK(base.detach().select(0, 2).select(0, 3).item<double>() == 3.5);
  // Sharing twice is a no-op.
  void* where = base.data_ptr();
  base.share_memory_();
  CHECK(base.data_ptr() == where);
  CHECK(testing::dev_shm() == shm_before);  // memfd segments have no name in /dev/shm
}

TEST_CASE("many small shares pack into few segments and descriptors") {
  const size_t segments_before = shm::live_segments();
  const size_t fds_before = testing::open_fds();
  std::vector<Tensor> tensors;
  for (int i = 0; i < 10000; ++i) tensors.push_back(full({1 + i % 7, 3}, static_cast<double>(i)).share_memory_());
  // Chunks grow 1, 2, 4, ... 64 MiB: ten thousand tiny tensors fit in the first one.
  CHECK(shm::live_segments() - segments_before <= 2);
  CHECK(testing::open_fds() - fds_before <= 2);
  for (int i = 0; i < 10000; i += 997)
    CHECK(tensors[i].select(0, 0).select(0, 1).item<float>() == static_cast<float>(i));
  tensors.clear();
}

TEST_CASE("Module::share_memory packs every parameter and buffer into one segment") {
  nn::Sequential net(nn::Conv2d(3, 5, 3), nn::BatchNorm2d(5), nn::Linear(11, 4));
  auto state = net->state_dict();
  std::map<std::string, Tensor> copies;
  for (const auto& [k, v] : state) copies[k] = v.clone();
  const size_t before = shm::live_segments();
  net->share_memory();
  CHECK(shm::live_segments() == before + 1);
  for (const auto& [k, v] : net->state_dict()) {
    INFO(k);
    CHECK(v.is_shared());
    CHECK(max_diff(v, copies.at(k)) == 0.0);
  }
  for (const auto& p : net->parameters()) CHECK(p.requires_grad());
}

TEST_CASE("a segment the machine cannot hold is an Error naming the size and what is available") {
  try {
    shm::Segment::create(size_t{1} << 50, "share_memory_");
    FAIL("a 1 PiB segment was created");
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("share_memory_: cannot create") != std::string::npos);
    CHECK(m.find("1125899906842624 bytes") != std::string::npos);
    CHECK(m.find("available") != std::string::npos);
  }
}

TEST_CASE("a segment the kernel refuses is an Error naming the cause and the size, not a signal") {
  // The file-size limit makes the kernel refuse the segment just as a full tmpfs would.
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 1 << 20;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  Tensor big = zeros({3, 1 << 20});  // 12 MiB, more than any chunk made so far
  std::string message;
  try {
    big.share_memory_();
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  INFO(message);
  CHECK(message.find("share_memory_: cannot create 12 MiB") != std::string::npos);
  CHECK(message.find("12582912 bytes") != std::string::npos);
  CHECK(message.find("file-size limit") != std::string::npos);
  CHECK_FALSE(big.is_shared());
  CHECK(big.sum().item<double>() == 0.0);  // still usable where it was
}

// core/kernel_select: choosing among candidates by timing them, once per key; the heuristic mode;
// forcing; adopting decisions (a resumed run's); the trial seed; the disk cache (round trip, a
// damaged file, another machine's file); profiling; and, through the CPU backend, that a
// benchmark-mode choice of GEMM kernel leaves C as one product.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu/isa.h"
#include "core/ember_core.h"
#include "core/kernel_select.h"

namespace {

using namespace ember;
namespace ks = ember::kernel_select;

void spin(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// A candidate i costs costs[i] seconds; counts[i] counts its trials.
struct Fake {
  std::vector<double> costs;
  std::vector<std::atomic<int>> counts;
  explicit Fake(std::vector<double> c) : costs(std::move(c)), counts(costs.size()) {}
  std::function<void(int)> trial() {
    return [this](int i) {
      counts[i]++;
      if (costs[i] < 0) throw Error("cannot take it");
      spin(costs[i]);
    };
  }
  int total() const {
    int t = 0;
    for (const auto& c : counts) t += c.load();
    return t;
  }
};

const ks::Decision* find(const std::vector<ks::Decision>& all, const std::string& key) {
  for (const auto& d : all)
    if (d.key == key) return &d;
  return nullptr;
}

struct ModeGuard {
  ks::Mode saved = ks::mode();
  ~ModeGuard() {
    ks::set_mode(saved);
    ks::force("");
    ks::set_trial_seed(std::nullopt);
    ks::reset();
    unsetenv("EMBER_KERNEL_CACHE");
  }
};

}  // namespace

TEST_CASE("kernel_select: benchmark mode times every candidate once and keeps the fastest", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Benchmark);
  ks::reset();
  Fake fake({0.03, 0.0005, 0.015});  // far apart: a loaded machine must not reorder them
  CHECK(ks::choose("fake problem", {"slow", "fast", "middle"}, 0, fake.trial()) == 1);
  // One untimed run and two timed ones each.
  for (const auto& c : fake.counts) CHECK(c.load() == 3);
  CHECK(ks::choose("fake problem", {"slow", "fast", "middle"}, 0, fake.trial()) == 1);
  CHECK(fake.total() == 9);
  const auto all = ks::decisions();
  const ks::Decision* d = find(all, "fake problem");
  REQUIRE(d != nullptr);
  CHECK(d->how == "measured");
  REQUIRE(d->seconds.size() == 3);
  CHECK(d->seconds[1] < d->seconds[0]);
  CHECK(d->seconds[1] < d->seconds[2]);
}

TEST_CASE("kernel_select: a failing candidate is dropped; all failing leaves the heuristic's", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Benchmark);
  ks::reset();
  Fake some({-1, 0.02, 0.0005});
  CHECK(ks::choose("some fail", {"a", "b", "c"}, 0, some.trial()) == 2);
  Fake all({-1, -1});
  CHECK(ks::choose("all fail", {"a", "b"}, 1, all.trial()) == 1);
  const auto decisions = ks::decisions();
  REQUIRE(find(decisions, "some fail") != nullptr);
  CHECK(find(decisions, "some fail")->seconds[0] < 0);
}

TEST_CASE("kernel_select: threads meeting a new key at once agree", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Benchmark);
  ks::reset();
  Fake fake({0.001, 0.001, 0.001});  // a tie: each thread's own timing could pick any
  std::vector<int> picked(4, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { picked[t] = ks::choose("tie", {"a", "b", "c"}, 0, fake.trial()); });
  for (auto& t : threads) t.join();
  for (int p : picked) CHECK(p == picked[0]);
  CHECK(ks::choose("tie", {"a", "b", "c"}, 0, fake.trial()) == picked[0]);
}

TEST_CASE("kernel_select: heuristic mode runs no trials; force overrides both modes", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Heuristic);
  ks::reset();
  Fake fake({0.002, 0.0001});
  CHECK(ks::choose("heuristic", {"a", "b"}, 0, fake.trial()) == 0);
  CHECK(fake.total() == 0);
  CHECK(find(ks::decisions(), "heuristic")->how == "heuristic");
  ks::force("b");
  CHECK(ks::choose("heuristic", {"a", "b"}, 0, fake.trial()) == 1);
  CHECK(ks::choose("no b here", {"a", "c"}, 0, fake.trial()) == 0);
  ks::set_mode(ks::Mode::Benchmark);
  ks::force("a");
  CHECK(ks::choose("forced", {"a", "b"}, 1, fake.trial()) == 0);
  CHECK(fake.total() == 0);
  CHECK(find(ks::decisions(), "forced")->how == "forced");
  CHECK_THROWS_WITH(ks::choose("bad", {"a"}, 3, fake.trial()),
                    Catch::Contains("kernel_select") && Catch::Contains("bad") && Catch::Contains("3"));
}

TEST_CASE("kernel_select: adopted decisions replace trials and switch keys already decided", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Benchmark);
  ks::reset();
  Fake fake({0.02, 0.0005, 0.01});
  const std::vector<std::string> names = {"a", "b", "c"};
  CHECK(ks::choose("decided", names, 0, fake.trial()) == 1);
  CHECK(ks::in_force() == std::map<std::string, std::string>{{"decided", "b"}});
  const size_t trials = fake.total();
  const uint64_t before = ks::generation();
  ks::adopt({{"decided", "a"}, {"not yet met", "c"}, {"another build's", "gone"}});
  // The backends' Memos must forget "decided"'s old choice.
  CHECK(ks::generation() != before);
  CHECK(ks::choose("decided", names, 0, fake.trial()) == 0);
  CHECK(ks::choose("not yet met", names, 0, fake.trial()) == 2);
  CHECK(fake.total() == trials);
  CHECK(find(ks::decisions(), "decided")->how == "adopted");
  CHECK(find(ks::decisions(), "not yet met")->how == "adopted");
  // A name that is not a candidate: measured as if nothing were adopted.
  CHECK(ks::choose("another build's", names, 0, fake.trial()) == 1);
  CHECK(fake.total() == trials + 9);
  CHECK(ks::in_force() ==
        std::map<std::string, std::string>{{"another build's", "b"}, {"decided", "a"}, {"not yet met", "c"}});
  CHECK(ks::decision_count() == 3);
  // Adopting what is in force changes nothing the Memos hold.
  const uint64_t settled = ks::generation();
  ks::adopt(ks::in_force());
  CHECK(ks::generation() == settled);
  // A forced candidate still wins; reset() forgets the adopted decisions.
  ks::force("b");
  CHECK(ks::choose("not yet met", names, 0, fake.trial()) == 1);
  ks::force("");
  ks::reset();
  CHECK(ks::choose("not yet met", names, 0, fake.trial()) == 1);
  CHECK(find(ks::decisions(), "not yet met")->how == "measured");
}

TEST_CASE("kernel_select: heuristic mode ignores adopted decisions", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Heuristic);
  ks::reset();
  Fake fake({0.0, 0.0});
  CHECK(ks::choose("fixed", {"a", "b"}, 0, fake.trial()) == 0);
  ks::adopt({{"fixed", "b"}, {"later", "b"}});
  CHECK(ks::choose("fixed", {"a", "b"}, 0, fake.trial()) == 0);
  CHECK(ks::choose("later", {"a", "b"}, 0, fake.trial()) == 0);
  CHECK(find(ks::decisions(), "later")->how == "heuristic");
  CHECK(fake.total() == 0);
}

TEST_CASE("kernel_select: a trial seed picks by key and seed; seeds s and s+1 disagree", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Benchmark);
  const std::vector<std::string> names = {"a", "broken", "b", "c"};
  const uint64_t seeds[] = {7, 8, 7};
  std::vector<std::vector<int>> picks(3);
  for (int run = 0; run < 3; ++run) {
    ks::reset();
    ks::set_trial_seed(seeds[run]);
    for (int key = 0; key < 6; ++key) {
      Fake fake({0.0005, -1, 0.0005, 0.0005});
      const int chosen = ks::choose("key " + std::to_string(key), names, 0, fake.trial());
      CHECK(fake.total() == 10);  // the trials still run; the broken candidate's once
      CHECK(chosen != 1);
      picks[run].push_back(chosen);
    }
  }
  ks::set_trial_seed(std::nullopt);
  CHECK(picks[0] == picks[2]);
  for (int key = 0; key < 6; ++key) CHECK(picks[0][key] != picks[1][key]);
}

TEST_CASE("kernel_select: the disk cache skips the trials of the next process", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Benchmark);
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                          "/kernel_cache_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  setenv("EMBER_KERNEL_CACHE", dir.c_str(), 1);
  ks::reset();
  const std::string file = ks::cache_file();
  CHECK(file.rfind(dir + "/kernels-", 0) == 0);
  Fake first({0.03, 0.0005});
  CHECK(ks::choose("disk problem", {"a", "b"}, 0, first.trial()) == 1);
  REQUIRE(std::filesystem::exists(file));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file();
  CHECK(files == 1);  // no temporary left behind

  // A new process (reset): the file's answer, without trials, even where timing would now differ.
  ks::reset();
  Fake second({0.0005, 0.03});
  CHECK(ks::choose("disk problem", {"a", "b"}, 0, second.trial()) == 1);
  CHECK(second.total() == 0);
  CHECK(find(ks::decisions(), "disk problem")->how == "cached on disk");
  // A cached name that is no longer a candidate is measured again.
  ks::reset();
  CHECK(ks::choose("disk problem", {"a", "c"}, 0, second.trial()) == 0);
  CHECK(second.total() == 6);

  // A damaged file names itself and the line.
  {
    std::ofstream out(file, std::ios::app);
    out << "no tab on this line\n";
  }
  ks::reset();
  CHECK_THROWS_WITH(ks::choose("other", {"a", "b"}, 0, second.trial()),
                    Catch::Contains(file) && Catch::Contains("malformed") && Catch::Contains("line"));
  {
    std::ofstream out(file, std::ios::trunc);
    out << "something else entirely\n";
  }
  ks::reset();
  CHECK_THROWS_WITH(ks::choose("other", {"a", "b"}, 0, second.trial()),
                    Catch::Contains(file) && Catch::Contains("ember kernel_select"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("kernel_select: profiling pairs each key's time with its decision", "[select]") {
  ModeGuard guard;
  ks::set_mode(ks::Mode::Heuristic);
  ks::reset();
  ks::set_profiling(true);
  Fake fake({0.0, 0.0});
  const int chosen = ks::choose("profiled", {"a", "b"}, 1, fake.trial());
  for (int i = 0; i < 3; ++i) {
    ks::Timer timer("profiled");
    spin(0.002);
  }
  ks::set_profiling(false);
  {
    ks::Timer timer("profiled");  // not counted
  }
  const auto usage = ks::usage();
  REQUIRE(usage.size() == 1);
  CHECK(usage[0].calls == 3);
  CHECK(usage[0].seconds >= 0.006);
  CHECK(usage[0].decision.candidates[usage[0].decision.chosen] == (chosen == 1 ? "b" : "a"));
  ks::clear_usage();
  CHECK(ks::usage().empty());
}

TEST_CASE("kernel_select: GEMM trials leave an accumulated C as one product", "[select]") {
  ModeGuard guard;
  manual_seed(3);
  // A skinny product with a long reduction, where Ember's AVX2 kernel is a candidate: its trials
  // must run into a copy of C, or C += A B would be added several times over.
  const int64_t m = 24, k = 96, n = 4096;
  Tensor a = randn({m, k}), b = randn({k, n}), c0 = randn({m, n});
  const std::vector<double> av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
  std::vector<double> expected = c0.to(kFloat64).to_vector<double>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) expected[i * n + j] += av[i * k + p] * bv[p * n + j];
  const KernelTable& table = kernels_for(Device(kCPU), "kernel_select_test");
  for (const char* forced : {"", "onednn-sgemm", "ember-skinny-avx2"}) {
    INFO("forced: '" << forced << "'");
    ks::set_mode(ks::Mode::Benchmark);
    ks::reset();
    ks::force(forced);
    Tensor c = c0.clone();
    GemmArgs g;
    g.dtype = kFloat32;
    g.m = m, g.n = n, g.k = k;
    g.a = a.data_ptr(), g.lda = k;
    g.b = b.data_ptr(), g.ldb = n;
    g.c = c.data_ptr(), g.ldc = n;
    g.alpha = 1.0, g.beta = 1.0;
    table.gemm(g);
    const std::vector<double> got = c.to(kFloat64).to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
    CHECK(worst < 1e-3);
    bool decided = false;
    for (const auto& d : ks::decisions()) decided = decided || d.key.rfind("sgemm", 0) == 0;
    if (cpu::has_avx2_fma()) CHECK(decided);
  }
}

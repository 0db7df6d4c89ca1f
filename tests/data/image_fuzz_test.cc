// The image fuzz target (tools/fuzz/image_fuzzer.cc) run in CI for a bounded time: every seed of
// the committed corpus, then random mutations of them (bit flips, overwritten, inserted and erased
// bytes, cuts, repeated spans), from a fixed seed so that a finding is reproduced by rerunning.
// Under the asan config a memory error anywhere in the decoders fails it; in every build a crash
// or an exception other than ember::Error does. EMBER_FUZZ_SECONDS sets the budget (default 8).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::vector<uint8_t>> load_corpus() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::filesystem::path dir = std::filesystem::path(srcdir ? srcdir : ".") / "ember/tools/fuzz/corpus/image";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& file : files) corpus.push_back(ember::data::read_file_bytes(file.string()));
  return corpus;
}

void mutate(std::vector<uint8_t>& bytes, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  switch (rng() % 6) {
    case 0:
      if (!bytes.empty()) bytes[pick(bytes.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1:  // an interesting value where header fields live
      if (!bytes.empty()) bytes[pick(std::min<size_t>(bytes.size(), 64))] = "\x00\x01\x7f\x80\xff"[rng() % 5];
      break;
    case 2:
      bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(pick(bytes.size() + 1)), static_cast<uint8_t>(rng()));
      break;
    case 3:
      if (!bytes.empty()) {
        size_t at = pick(bytes.size()), n = 1 + pick(std::min<size_t>(16, bytes.size() - at));
        bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                    bytes.begin() + static_cast<std::ptrdiff_t>(at + n));
      }
      break;
    case 4:
      bytes.resize(pick(bytes.size() + 1));
      break;
    default:
      if (bytes.size() > 2) {
        size_t at = pick(bytes.size() - 1), n = 1 + pick(std::min<size_t>(32, bytes.size() - at));
        std::vector<uint8_t> span(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                  bytes.begin() + static_cast<std::ptrdiff_t>(at + n));
        bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(pick(bytes.size())), span.begin(), span.end());
      }
      break;
  }
}

}  // namespace

TEST_CASE("The image decoders survive the seed corpus and its mutations", "[image_fuzz]") {
  const std::vector<std::vector<uint8_t>> corpus = load_corpus();
  REQUIRE(corpus.size() >= 10);
  int decodable = 0;
  for (const auto& seed : corpus) {
    LLVMFuzzerTestOneInput(seed.data(), seed.size());
    try {
      ember::data::read_image_header(seed.data(), seed.size(), "seed");
      ++decodable;
    } catch (const ember::Error&) {
    }
  }
  CHECK(decodable >= 7);  // the valid seeds, and the broken ones whose fault lies past the header

  const char* budget_env = std::getenv("EMBER_FUZZ_SECONDS");
  const double budget = budget_env ? std::atof(budget_env) : 8.0;
  std::mt19937_64 rng(20261128);
  const auto start = std::chrono::steady_clock::now();
  int64_t runs = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget) {
    std::vector<uint8_t> input = corpus[rng() % corpus.size()];
    for (uint64_t k = 0, n = 1 + rng() % 4; k < n; ++k) mutate(input, rng);
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
  }
  INFO(runs << " mutated inputs");
  CHECK(runs >= 100);
  WARN("image_fuzz_test: " << runs << " mutated inputs in " << budget << " s");
}

// Streaming (non-temporal) stores: stream_copy at every alignment, and the elementwise kernels'
// streamed outputs (tensors twice the last-level cache's size, so that the kernels take that path
// on any machine) against their float64 or cached-path values.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/streaming_stores.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"

using namespace ember;

TEST_CASE("stream_copy copies every byte at any alignment and touches nothing else", "[streaming]") {
  std::vector<unsigned char> src(400), dst(480);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  for (int dst_offset = 0; dst_offset < 16; ++dst_offset)
    for (int src_offset = 0; src_offset < 16; src_offset += 5)
      for (int64_t bytes : {0, 1, 15, 16, 17, 31, 64, 100, 333}) {
        INFO("dst offset " << dst_offset << " src offset " << src_offset << " bytes " << bytes);
        std::fill(dst.begin(), dst.end(), 0xEE);
        cpu::stream_copy(dst.data() + 32 + dst_offset, src.data() + src_offset, bytes);
        cpu::stream_fence();
        for (int64_t i = 0; i < static_cast<int64_t>(dst.size()); ++i) {
          const int64_t at = i - 32 - dst_offset;
          const unsigned char expected = at >= 0 && at < bytes ? src[static_cast<size_t>(src_offset + at)] : 0xEE;
          REQUIRE(static_cast<int>(dst[static_cast<size_t>(i)]) == static_cast<int>(expected));
        }
      }
}

TEST_CASE("elementwise kernels stream large outputs with the same values", "[streaming]") {
  // Twice the last-level cache, plus an odd tail, so that the thread chunks and blocks are uneven.
  const int64_t n = static_cast<int64_t>(2 * cpu::last_level_cache_bytes() / sizeof(float)) + 37;
  REQUIRE(cpu::streaming_output_preferred(n * static_cast<int64_t>(sizeof(float))));
  REQUIRE_FALSE(cpu::streaming_output_preferred(1 << 20));
  manual_seed(5);
  Tensor a = randn({n}), b = randn({n});
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  const int default_threads = cpu::num_threads();
  for (int threads : {default_threads, 3}) {
    cpu::set_num_threads(threads);
    INFO("threads " << threads);
    const std::vector<float> sum = (a + b).to_vector<float>();
    const std::vector<float> product = (a * b).to_vector<float>();
    const std::vector<float> scaled = (a * 2.5f).to_vector<float>();
    const std::vector<float> sigmoid = a.sigmoid().to_vector<float>();
    // The cached path's sigmoid of the first elements: a tensor far below the streaming size.
    const std::vector<float> sigmoid_head = a.narrow(0, 0, 5000).clone().sigmoid().to_vector<float>();
    // Mismatches per output (one REQUIRE per element would take most of the test's time).
    int64_t wrong_sum = 0, wrong_product = 0, wrong_scaled = 0, wrong_sigmoid = 0, unlike_cached = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      // The float operations themselves are exact to compare: one rounding each, either path.
      wrong_sum += sum[k] != av[k] + bv[k];
      wrong_product += product[k] != av[k] * bv[k];
      wrong_scaled += scaled[k] != av[k] * 2.5f;
      const double expected = 1.0 / (1.0 + std::exp(-static_cast<double>(av[k])));
      wrong_sigmoid += !(std::abs(sigmoid[k] - expected) <= 1e-6);
      if (i < 5000) unlike_cached += sigmoid[k] != sigmoid_head[k];
    }
    CHECK(wrong_sum == 0);
    CHECK(wrong_product == 0);
    CHECK(wrong_scaled == 0);
    CHECK(wrong_sigmoid == 0);
    CHECK(unlike_cached == 0);
  }
  cpu::set_num_threads(default_threads);
}

TEST_CASE("broadcast rows of a large output: streamed when long, stored normally when short", "[streaming]") {
  const int64_t n = static_cast<int64_t>(2 * cpu::last_level_cache_bytes() / sizeof(float));
  manual_seed(6);
  // 1031 floats: rows of one full block and a partial one, starting at every 4-byte offset mod 16.
  for (int64_t width : {int64_t{1031}, int64_t{7}}) {
    INFO("row width " << width);
    Tensor x = randn({n / width + 1, width}), row = randn({width});
    const std::vector<float> sum = (x + row).to_vector<float>();
    const std::vector<float> xv = x.to_vector<float>(), rv = row.to_vector<float>();
    int64_t wrong = 0;
    for (size_t i = 0; i < sum.size(); ++i) wrong += sum[i] != xv[i] + rv[i % static_cast<size_t>(width)];
    CHECK(wrong == 0);
  }
}

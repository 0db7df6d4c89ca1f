// libFuzzer target for the image decoders: the header, the whole image, a region at a reduced
// scale, grayscale, and RandomResizedCrop's crop-aware path, on arbitrary bytes. An ember::Error is
// the expected answer to a bad file; a crash, a sanitizer report, any other exception, or a decode
// whose buffer disagrees with the size it reports is a finding. Run for a bounded time in CI by
// //tests/data:image_fuzz_test, and for longer by tools/fuzz/run_fuzzer image (clang, libFuzzer).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "data/image.h"
#include "data/image_transforms.h"

namespace {

void check(const ember::data::DecodedImage& image, int channels) {
  const size_t expected = static_cast<size_t>(image.width * image.height * channels);
  if (image.channels != channels || image.width <= 0 || image.height <= 0 || image.pixels.size() != expected) {
    std::fprintf(stderr, "image_fuzzer: decoded %lldx%lld x %d channels (asked %d) in %zu bytes\n",
                 static_cast<long long>(image.width), static_cast<long long>(image.height), image.channels, channels,
                 image.pixels.size());
    std::abort();
  }
  // Read every byte so that AddressSanitizer checks the whole buffer, and MSan-like garbage shows.
  const volatile uint8_t* bytes = image.pixels.data();
  uint8_t sum = 0;
  for (size_t i = 0; i < expected; ++i) sum += bytes[i];
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember::data;
  // Small enough that a fuzzed header cannot make one input take seconds or gigabytes.
  DecodeLimits limits;
  limits.max_pixels = 1 << 20;
  try {
    EncodedImage image;
    image.name = "fuzz";
    image.bytes.assign(data, data + size);
    image.limits = limits;
    image.header = read_image_header(data, size, "fuzz", limits);
    check(image.decode(), 3);
    DecodeRequest region;
    region.left = image.header.width / 3, region.top = image.header.height / 4;
    region.width = image.header.width / 2 + 1, region.height = image.header.height / 2 + 1;
    region.min_width = region.width / 4, region.min_height = region.height / 4;
    region.channels = 1;
    check(decode_image(data, size, "fuzz", region, limits), 1);
    std::vector<uint8_t> out(3 * 7 * 5);
    ExampleRandom random(static_cast<uint64_t>(size), 0, 0);
    RandomResizedCrop(7, 5, {0.08, 1.0}, {0.75, 4.0 / 3.0}).apply(image, out.data(), random);
  } catch (const ember::Error&) {
    // Rejected cleanly: the expected outcome for a malformed file.
  }
  return 0;  // any other exception escapes and is reported as a crash
}

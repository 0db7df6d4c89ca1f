// Writes the image fuzzer's seed corpus (tools/fuzz/corpus/image/): tiny valid JPEG and PNG files
// of every kind the decoders convert (RGB, gray, CMYK, RGBA), and broken ones (cut, a bad CRC, a
// header claiming too many pixels). Rerun to regenerate the committed files:
//   bazel run //tools/fuzz:make_image_corpus -- $PWD/tools/fuzz/corpus/image
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "data/image.h"

namespace {

std::vector<uint8_t> pattern(int w, int h, int channels) {
  std::vector<uint8_t> p(static_cast<size_t>(w * h * channels));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + (i / 3) * 11) % 256);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_image_corpus DIR\n");
    return 2;
  }
  using ember::data::encode_jpeg;
  using ember::data::encode_png;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds;
  seeds.emplace_back("rgb_16x12.jpg", encode_jpeg(pattern(16, 12, 3).data(), 16, 12, 3, 75));
  seeds.emplace_back("gray_9x7.jpg", encode_jpeg(pattern(9, 7, 1).data(), 9, 7, 1, 90));
  seeds.emplace_back("cmyk_8x8.jpg", encode_jpeg(pattern(8, 8, 4).data(), 8, 8, 4, 50));
  seeds.emplace_back("rgb_33x17.jpg", encode_jpeg(pattern(33, 17, 3).data(), 33, 17, 3, 30));
  seeds.emplace_back("rgb_5x6.png", encode_png(pattern(5, 6, 3).data(), 5, 6, 3));
  seeds.emplace_back("gray_7x3.png", encode_png(pattern(7, 3, 1).data(), 7, 3, 1));
  seeds.emplace_back("rgba_4x4.png", encode_png(pattern(4, 4, 4).data(), 4, 4, 4));
  std::vector<uint8_t> jpeg = seeds[0].second, png = seeds[4].second;
  seeds.emplace_back("cut.jpg", std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() * 2 / 3));
  std::vector<uint8_t> bad_crc = png;
  bad_crc[8 + 25 + 8 + 3] ^= 0x10;
  seeds.emplace_back("bad_crc.png", bad_crc);
  std::vector<uint8_t> big = jpeg;
  for (size_t i = 0; i + 8 < big.size(); ++i) {
    if (big[i] == 0xFF && big[i + 1] == 0xC0) {  // the frame header's height and width
      big[i + 5] = big[i + 7] = 0x7F;
      break;
    }
  }
  seeds.emplace_back("claims_32k_square.jpg", big);
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(std::string(argv[1]) + "/" + name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "make_image_corpus: cannot write %s/%s\n", argv[1], name.c_str());
      return 1;
    }
  }
  std::printf("make_image_corpus: wrote %zu seeds to %s\n", seeds.size(), argv[1]);
  return 0;
}

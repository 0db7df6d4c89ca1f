// `sample_tree`: writes a small image folder tree of the files a real one holds, for tests of
// --data imagefolder: OUT/train/CLASS/* and OUT/val/CLASS/* with, in every class folder, each in
// turn: an RGB JPEG, a grayscale JPEG, a CMYK JPEG (Adobe marker, inverted, as Photoshop writes
// it), an RGB PNG, an RGBA PNG named .PNG, a grayscale PNG, a PNG named .JPEG (as ImageNet has),
// and an RGB JPEG named .JPG; sizes drawn between --min-side and --max-side, so some images are
// smaller than the crop. The first class folder of each split also holds a README.txt (not an
// image: skipped) and each split's root a LICENSE.txt (not a class: ignored).
//
// Class k's images are a colour of its own under stripes of its own orientation, so a model can
// tell them apart in RGB and in grayscale. The tree appears whole or not at all (tree_writer.h).
//
//   sample_tree --out /tmp/tree --classes 3 --train-per-class 8 --val-per-class 4
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "data/image.h"
#include "tools/imagefolder/tree_writer.h"
#include "tools/train/flags.h"

using namespace ember;

namespace {

struct Settings {
  int64_t classes = 3, train_per_class = 8, val_per_class = 4, min_side = 20, max_side = 64;
  uint64_t seed = 1;
};

// RGB pixels of class k of n: the class's hue, stripes at the class's angle, a little noise.
std::vector<uint8_t> class_image(int64_t k, int64_t n, int64_t width, int64_t height, std::mt19937_64& random) {
  const double hue = 6.0 * static_cast<double>(k) / static_cast<double>(n);
  const double base[3] = {std::fabs(hue - 3.0) - 1.0, 2.0 - std::fabs(hue - 2.0), 2.0 - std::fabs(hue - 4.0)};
  const double angle = 3.14159265358979 * static_cast<double>(k) / static_cast<double>(n);
  const double dx = std::cos(angle), dy = std::sin(angle);
  std::uniform_real_distribution<double> noise(-0.08, 0.08), phase(0.0, 6.3);
  const double shift = phase(random);
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      const double stripe =
          0.5 + 0.5 * std::sin(0.7 * (static_cast<double>(x) * dx + static_cast<double>(y) * dy) + shift);
      for (int c = 0; c < 3; ++c) {
        const double v = std::clamp(base[c], 0.0, 1.0) * (0.4 + 0.6 * stripe) + noise(random);
        pixels[static_cast<size_t>((y * width + x) * 3 + c)] =
            static_cast<uint8_t>(std::lround(255.0 * std::clamp(v, 0.0, 1.0)));
      }
    }
  }
  return pixels;
}

std::vector<uint8_t> to_gray(const std::vector<uint8_t>& rgb) {
  std::vector<uint8_t> gray(rgb.size() / 3);
  for (size_t i = 0; i < gray.size(); ++i)
    gray[i] = static_cast<uint8_t>((299 * rgb[3 * i] + 587 * rgb[3 * i + 1] + 114 * rgb[3 * i + 2] + 500) / 1000);
  return gray;
}

// Plain CMYK (encode_jpeg writes it inverted, with the Adobe marker), which decodes back to about
// the RGB given: R = (255 - C)(255 - K) / 255.
std::vector<uint8_t> to_cmyk(const std::vector<uint8_t>& rgb) {
  std::vector<uint8_t> cmyk(rgb.size() / 3 * 4);
  for (size_t i = 0; i < rgb.size() / 3; ++i) {
    const int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
    const int top = std::max({r, g, b});
    cmyk[4 * i + 3] = static_cast<uint8_t>(255 - top);
    for (int c = 0; c < 3; ++c) {
      const int v = rgb[3 * i + static_cast<size_t>(c)];
      cmyk[4 * i + static_cast<size_t>(c)] = static_cast<uint8_t>(top == 0 ? 0 : 255 - (v * 255 + top / 2) / top);
    }
  }
  return cmyk;
}

std::vector<uint8_t> with_alpha(const std::vector<uint8_t>& rgb, std::mt19937_64& random) {
  std::vector<uint8_t> rgba(rgb.size() / 3 * 4);
  std::uniform_int_distribution<int> alpha(0, 255);
  for (size_t i = 0; i < rgb.size() / 3; ++i) {
    for (size_t c = 0; c < 3; ++c) rgba[4 * i + c] = rgb[3 * i + c];
    rgba[4 * i + 3] = static_cast<uint8_t>(alpha(random));  // dropped by the decoder, as PIL's convert("RGB")
  }
  return rgba;
}

// The i-th file of a class folder: its name's suffix and its bytes, the kinds taken in turn.
std::pair<std::string, std::vector<uint8_t>> sample_file(int64_t i, const std::vector<uint8_t>& rgb, int64_t width,
                                                         int64_t height, std::mt19937_64& random) {
  switch (i % 8) {
    case 0:
      return {"_rgb.jpg", data::encode_jpeg(rgb.data(), width, height, 3, 90)};
    case 1:
      return {"_gray.jpeg", data::encode_jpeg(to_gray(rgb).data(), width, height, 1, 90)};
    case 2:
      return {"_cmyk.jpg", data::encode_jpeg(to_cmyk(rgb).data(), width, height, 4, 90)};
    case 3:
      return {"_rgb.png", data::encode_png(rgb.data(), width, height, 3)};
    case 4:
      return {"_rgba.PNG", data::encode_png(with_alpha(rgb, random).data(), width, height, 4)};
    case 5:
      return {"_gray.png", data::encode_png(to_gray(rgb).data(), width, height, 1)};
    case 6:
      return {"_png_disguised.JPEG", data::encode_png(rgb.data(), width, height, 3)};
    default:
      return {"_rgb_upper.JPG", data::encode_jpeg(rgb.data(), width, height, 3, 75)};
  }
}

std::vector<uint8_t> text_bytes(const std::string& text) { return {text.begin(), text.end()}; }

// File kinds start at `first_kind`, so that a short split still gets the kinds the other one lacks.
void write_split(imagefolder::TreeWriter& tree, const std::string& split, int64_t per_class, int64_t first_kind,
                 const Settings& s, std::mt19937_64& random) {
  std::uniform_int_distribution<int64_t> side(s.min_side, s.max_side);
  tree.write(split + "/LICENSE.txt", text_bytes("Generated by tools/imagefolder/sample_tree; no class folder.\n"));
  for (int64_t k = 0; k < s.classes; ++k) {
    char folder[32];
    std::snprintf(folder, sizeof folder, "class_%02lld", static_cast<long long>(k));
    const std::string dir = split + "/" + folder + "/";
    if (k == 0) tree.write(dir + "README.txt", text_bytes("Not an image: ImageFolder skips and counts it.\n"));
    for (int64_t i = 0; i < per_class; ++i) {
      const int64_t width = side(random), height = side(random);
      const std::vector<uint8_t> rgb = class_image(k, s.classes, width, height, random);
      auto [suffix, bytes] = sample_file(first_kind + i, rgb, width, height, random);
      char name[24];
      std::snprintf(name, sizeof name, "%03lld", static_cast<long long>(i));
      tree.write(dir + name + suffix, bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  train::Flags flags("sample_tree",
                     "Writes a small image folder tree of varied files (RGB, grayscale and CMYK JPEG, RGB, RGBA and\n"
                     "grayscale PNG, a PNG named .JPEG, a non-image file) for tests: OUT/train/CLASS, OUT/val/CLASS.");
  const Settings d;
  flags.add_string("out", "", "the tree to write (must not exist unless --force)");
  flags.add_int("classes", d.classes, "class folders", 1);
  flags.add_int("train-per-class", d.train_per_class, "images per class folder of train/", 1);
  flags.add_int("val-per-class", d.val_per_class, "images per class folder of val/", 1);
  flags.add_int("min-side", d.min_side, "smallest width or height", 1);
  flags.add_int("max-side", d.max_side, "largest width or height", 1);
  flags.add_int("seed", static_cast<long long>(d.seed), "seed of the sizes and pixels", 0);
  flags.add_bool("force", "replace OUT when it exists");
  Settings s;
  std::string out;
  try {
    if (!flags.parse(argc, argv)) {
      std::printf("%s", flags.help_text().c_str());
      return 0;
    }
    out = flags.get_string("out");
    if (out.empty()) throw train::FlagError("--out: required (the folder to write)");
    if (!flags.get_bool("force") && std::filesystem::exists(out))
      throw train::FlagError("--out " + out + ": already exists; give --force to replace it");
    s.classes = flags.get_int("classes");
    s.train_per_class = flags.get_int("train-per-class");
    s.val_per_class = flags.get_int("val-per-class");
    s.min_side = flags.get_int("min-side");
    s.max_side = flags.get_int("max-side");
    if (s.max_side < s.min_side)
      throw train::FlagError("--max-side " + std::to_string(s.max_side) + " is below --min-side " +
                             std::to_string(s.min_side));
    s.seed = static_cast<uint64_t>(flags.get_int("seed"));
  } catch (const train::FlagError& e) {
    std::fprintf(stderr, "sample_tree: %s\n", e.what());
    return 2;
  }
  try {
    std::mt19937_64 random(s.seed);
    imagefolder::TreeWriter tree(out, flags.get_bool("force"));
    write_split(tree, "train", s.train_per_class, 0, s, random);
    write_split(tree, "val", s.val_per_class, 4, s, random);
    tree.commit();
    std::printf("sample_tree: wrote %lld files (%lld classes, %lld + %lld images per class) to %s/{train,val}\n",
                static_cast<long long>(tree.files()), static_cast<long long>(s.classes),
                static_cast<long long>(s.train_per_class), static_cast<long long>(s.val_per_class), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sample_tree: error: %s\n", e.what());
    return 1;
  }
}

// ImageNet-style input pipeline throughput (issue 36): an ImageFolder of JPEGs through a DataLoader
// with RandomResizedCrop(224) + RandomHorizontalFlip + ToFloat + Normalize, in images/s with one
// worker thread (the per-core figure: the consumer only takes batches) and with one worker per
// core, once with the crop-aware decode (only the crop box, DCT-reduced where that still covers
// 224 x 224) and once decoding whole images (roi_decode(false)). The yardstick, measured in the
// same run: torchvision's ImageFolder + DataLoader with the same transforms and worker counts
// (tools/bench/torchvision_loader.py, under .venv-torch with PyPI's newest torchvision and Pillow,
// installed on first use).
//
// The images are generated once and cached under --dir (default /tmp/ember-image-bench-N): N JPEGs
// over 10 class folders, about 500 x 375 (some portrait), quality 90, with photo-like content
// (shaded shapes, strokes, 1/f texture and grain) so that entropy decoding costs about what it
// costs on photographs: the bytes per pixel are printed next to ImageNet's.
//
// Also printed: one thread's CPU time per image for each stage (read, decode whole or the box,
// crop + resize, flip, ToFloat, Normalize), to tell where the time goes.
//
//   bazel run --config=bench //tools/bench:image_loader [-- --images N --workers W --no-torchvision]
//
// Last line: `bench image_loader: ember_ips_per_core=X torchvision_ips_per_core=Y vs_torchvision=R
// roi_vs_full=R torchvision=VERSION` (per core: one worker; roi_vs_full: Ember's two decodes, one
// worker each). Targets: vs_torchvision >= 2, roi_vs_full >= 1.5. Each figure is the median of
// --repeats samples of at least 1,000 images (whole epochs) after a warm-up epoch.
#include <time.h>
#include <unistd.h>

#include <jconfig.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/thread_pool.h"
#include "data/data.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember::data;
namespace fs = std::filesystem;

constexpr int kQuality = 90;
constexpr int64_t kCrop = 224;
// A sample is as many whole epochs as make this many images: epochs of a few hundred images last
// about a second, and the first batches' start-up made such samples spread by +-15%.
constexpr int64_t kSampleImages = 1000;
// Bumped whenever the generator changes, so that a cached folder of older images is rebuilt.
constexpr int kGeneratorVersion = 1;
const char* const kMarker = ".ember-image-bench";

struct Options {
  int64_t images = 1000;
  int classes = 10;
  int64_t batch = 64;
  int workers = 0;  // 0: one per core
  int repeats = 5;
  int64_t phase_images = 200;
  std::string dir;
  std::string repo;
  bool torchvision = true;
  int64_t size_scale = 1;  // --size-scale: photos this many times ImageNet's size
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "image_loader: %s\nflags: --images N (1000) --classes C (10) --batch B (64) --workers W (cores) "
               "--repeats R (5) --phase-images N (200) --dir DIR (/tmp/ember-image-bench-N) --repo DIR "
               "--no-torchvision --size-scale K (1: about 500 x 375; 4: a phone photo's 2000 x 1500)\n",
               problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> int64_t {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || n < 0) usage(flag + " takes a non-negative integer, found '" + v + "'");
      return n;
    };
    if (flag == "--images") {
      o.images = number();
    } else if (flag == "--classes") {
      o.classes = static_cast<int>(number());
    } else if (flag == "--batch") {
      o.batch = number();
    } else if (flag == "--workers") {
      o.workers = static_cast<int>(number());
    } else if (flag == "--repeats") {
      o.repeats = static_cast<int>(number());
    } else if (flag == "--phase-images") {
      o.phase_images = number();
    } else if (flag == "--dir") {
      o.dir = value();
    } else if (flag == "--repo") {
      o.repo = value();
    } else if (flag == "--size-scale") {
      o.size_scale = number();
    } else if (flag == "--no-torchvision") {
      o.torchvision = false;
    } else {
      usage("unknown flag '" + flag + "'");
    }
  }
  if (o.images < 1 || o.classes < 1 || o.images < o.classes || o.batch < 1 || o.repeats < 1) {
    usage("--images >= --classes >= 1, --batch >= 1 and --repeats >= 1 are needed");
  }
  if (o.size_scale < 1) usage("--size-scale must be >= 1");
  if (o.dir.empty()) {
    o.dir = "/tmp/ember-image-bench-" + std::to_string(o.images);
    if (o.size_scale > 1) o.dir += "-x" + std::to_string(o.size_scale);
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// The generated folder.

// splitmix64: the images must not depend on the standard library's distributions, which differ
// between implementations.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float low, float high) { return low + (high - low) * uniform(); }

 private:
  uint64_t state_;
};

// Smoothly interpolated random values on a square lattice of the given period: summed over
// halving periods with equal weights it gives the 1/f-like texture that makes a JPEG's
// high-frequency coefficients nonzero, as grass, fur or foliage do.
class ValueNoise {
 public:
  ValueNoise(int64_t width, int64_t height, int64_t period, Rng& rng)
      : period_(period), columns_(width / period + 2), values_(columns_ * (height / period + 2)) {
    for (float& v : values_) v = rng.uniform(-1.0f, 1.0f);
  }
  float at(int64_t x, int64_t y) const {
    const int64_t cx = x / period_, cy = y / period_;
    float tx = static_cast<float>(x - cx * period_) / static_cast<float>(period_);
    float ty = static_cast<float>(y - cy * period_) / static_cast<float>(period_);
    tx = tx * tx * (3 - 2 * tx), ty = ty * ty * (3 - 2 * ty);
    const float* r0 = &values_[cy * columns_ + cx];
    const float* r1 = r0 + columns_;
    return (r0[0] + (r0[1] - r0[0]) * tx) * (1 - ty) + (r1[0] + (r1[1] - r1[0]) * tx) * ty;
  }

 private:
  int64_t period_, columns_;
  std::vector<float> values_;
};

using Colour = std::array<float, 3>;

// An RGB picture of width x height: a two-part background (a horizon), shaded soft-edged
// ellipses, thin strokes with sharp edges, then texture, grain and colour noise. The amounts were
// tuned so that quality-90 files come out near 0.6 bytes per pixel (ImageNet's train set: about
// 110 KB for 400 x 350 on average, 0.5-0.8 bytes per pixel).
std::vector<uint8_t> photo_like(int64_t width, int64_t height, uint64_t seed) {
  Rng rng(seed);
  auto colour = [&] { return Colour{rng.uniform(30, 220), rng.uniform(30, 220), rng.uniform(30, 220)}; };
  const auto w = static_cast<float>(width), h = static_cast<float>(height);
  std::vector<float> image(static_cast<size_t>(width * height * 3));
  auto blend = [&](int64_t x, int64_t y, const Colour& c, float alpha) {
    float* p = &image[static_cast<size_t>((y * width + x) * 3)];
    for (int k = 0; k < 3; ++k) p[k] += (c[k] - p[k]) * alpha;
  };

  const Colour sky0 = colour(), sky1 = colour(), ground0 = colour(), ground1 = colour();
  const float horizon = h * rng.uniform(0.25f, 0.7f), tilt = rng.uniform(-0.15f, 0.15f);
  for (int64_t y = 0; y < height; ++y) {
    const float a = static_cast<float>(y) / h;
    for (int64_t x = 0; x < width; ++x) {
      const float below = std::clamp((y - horizon - tilt * (x - w / 2)) / 4.0f + 0.5f, 0.0f, 1.0f);
      float* p = &image[static_cast<size_t>((y * width + x) * 3)];
      for (int c = 0; c < 3; ++c) {
        p[c] = (sky0[c] + (sky1[c] - sky0[c]) * a) * (1 - below) + (ground0[c] + (ground1[c] - ground0[c]) * a) * below;
      }
    }
  }

  for (int shape = 0; shape < 12; ++shape) {
    const Colour c = colour();
    const float cx = rng.uniform(0, w), cy = rng.uniform(0, h);
    const float rx = rng.uniform(12, 0.3f * w), ry = rng.uniform(12, 0.3f * h), angle = rng.uniform(0, 3.1416f);
    const float cos_a = std::cos(angle), sin_a = std::sin(angle), soft = rng.uniform(0.75f, 4.5f);
    const float dark = rng.uniform(0.5f, 1.0f), reach = std::max(rx, ry) + 2 * soft;
    const int64_t y0 = std::max<int64_t>(0, cy - reach), y1 = std::min<int64_t>(height, cy + reach);
    const int64_t x0 = std::max<int64_t>(0, cx - reach), x1 = std::min<int64_t>(width, cx + reach);
    for (int64_t y = y0; y < y1; ++y) {
      for (int64_t x = x0; x < x1; ++x) {
        const float dx = x - cx, dy = y - cy, u = (dx * cos_a + dy * sin_a) / rx, v = (dy * cos_a - dx * sin_a) / ry;
        // The edge is a ramp `soft` pixels wide: roughly the distance to the ellipse over `soft`.
        const float alpha = std::clamp((1 - std::sqrt(u * u + v * v)) * std::min(rx, ry) / soft + 0.5f, 0.0f, 1.0f);
        if (alpha <= 0) continue;
        const float light = dark + (1 - dark) * 0.5f * (1 - v);  // lit from above
        blend(x, y, Colour{c[0] * light, c[1] * light, c[2] * light}, alpha);
      }
    }
  }

  for (int stroke = 0; stroke < 40; ++stroke) {
    const Colour c = colour();
    const float ax = rng.uniform(0, w), ay = rng.uniform(0, h), length = rng.uniform(20, 0.5f * w);
    const float angle = rng.uniform(0, 6.2832f), half_width = rng.uniform(0.5f, 3.0f);
    const float ex = length * std::cos(angle), ey = length * std::sin(angle), ee = ex * ex + ey * ey;
    const int64_t y0 = std::max<int64_t>(0, std::min(ay, ay + ey) - 5);
    const int64_t y1 = std::min<int64_t>(height, std::max(ay, ay + ey) + 5);
    const int64_t x0 = std::max<int64_t>(0, std::min(ax, ax + ex) - 5);
    const int64_t x1 = std::min<int64_t>(width, std::max(ax, ax + ex) + 5);
    for (int64_t y = y0; y < y1; ++y) {
      for (int64_t x = x0; x < x1; ++x) {
        const float t = std::clamp(((x - ax) * ex + (y - ay) * ey) / ee, 0.0f, 1.0f);
        const float dx = x - ax - t * ex, dy = y - ay - t * ey;
        const float alpha = std::clamp(half_width + 0.5f - std::sqrt(dx * dx + dy * dy), 0.0f, 1.0f);
        if (alpha > 0) blend(x, y, c, alpha);
      }
    }
  }

  std::vector<ValueNoise> octaves;
  for (int64_t period : {96, 48, 24, 12, 6, 3, 2}) octaves.emplace_back(width, height, period, rng);
  // Where the texture is strong or faint (a photograph has flat sky next to busy foliage), and a
  // slow drift of red and blue.
  const ValueNoise busy(width, height, 80, rng), red(width, height, 40, rng), blue(width, height, 40, rng);
  std::vector<uint8_t> pixels(image.size());
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      float texture = 0;
      for (const ValueNoise& octave : octaves) texture += octave.at(x, y);
      const float b = busy.at(x, y);
      // Sums of uniforms: close enough to Gaussian noise, at unit variance.
      const float grain = (rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform() - 2.0f) * 1.73f;
      const float luma = 40 * texture * (0.6f + 0.5f * b) + 12 * grain * (0.2f + 1.6f * std::max(0.0f, b + 0.5f));
      const float shift[3] = {luma + 8 * red.at(x, y), luma, luma + 8 * blue.at(x, y)};
      const size_t at = static_cast<size_t>((y * width + x) * 3);
      for (int c = 0; c < 3; ++c) {
        const float tint = (rng.uniform() + rng.uniform() - 1.0f) * 2.45f * 12;
        pixels[at + c] = static_cast<uint8_t>(std::clamp(image[at + c] + shift[c] + tint + 0.5f, 0.0f, 255.0f));
      }
    }
  }
  return pixels;
}

// Image i's size: 440-520 wide at about 4:3, one in five portrait (ImageNet's photos are mostly
// 500 x 375 or 375 x 500 and vary around that), times `scale`.
std::pair<int64_t, int64_t> image_size(int64_t i, int64_t scale) {
  Rng rng(0x5EED0000 + static_cast<uint64_t>(i));
  const auto longer = static_cast<int64_t>(rng.uniform(440, 521)) * scale;
  const auto shorter = static_cast<int64_t>(static_cast<float>(longer) * rng.uniform(0.70f, 0.80f));
  const bool portrait = rng.uniform() < 0.2f;
  return portrait ? std::pair{longer, shorter} : std::pair{shorter, longer};  // (height, width)
}

std::string class_name(int c) {
  char name[24];
  std::snprintf(name, sizeof(name), "class%03d", c);
  return name;
}

std::string marker_text(const Options& o) {
  return "images=" + std::to_string(o.images) + " classes=" + std::to_string(o.classes) +
         " quality=" + std::to_string(kQuality) + " generator=" + std::to_string(kGeneratorVersion) + " complete\n";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes the folder unless a complete one of the same parameters is there. A folder is only ever
// deleted when it carries this program's marker, never a directory a user named by mistake.
void ensure_folder(const Options& o) {
  const fs::path root(o.dir), marker = root / kMarker;
  if (fs::exists(marker) && read_text(marker) == marker_text(o)) {
    std::printf("images: reusing %s\n", o.dir.c_str());
    return;
  }
  if (fs::exists(root)) {
    if (!fs::exists(marker) && !fs::is_empty(root)) {
      usage("--dir " + o.dir + " exists and was not written by this program; name another folder");
    }
    fs::remove_all(root);
  }
  fs::create_directories(root);
  std::ofstream(marker) << "incomplete\n";
  for (int c = 0; c < o.classes; ++c) fs::create_directories(root / class_name(c));
  const double start = ember::bench::now_seconds();
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t i = t; i < o.images; i += threads) {
        const auto [height, width] = image_size(i, o.size_scale);
        const std::vector<uint8_t> pixels = photo_like(width, height, 0xC0FFEE00 + static_cast<uint64_t>(i));
        const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), width, height, 3, kQuality);
        char name[32];
        std::snprintf(name, sizeof(name), "img%06lld.JPEG", static_cast<long long>(i));
        std::ofstream out(root / class_name(static_cast<int>(i % o.classes)) / name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
        if (!out) throw std::runtime_error("image_loader: cannot write under " + o.dir);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  std::ofstream(marker) << marker_text(o);
  std::printf("images: wrote %lld JPEGs to %s in %.1f s (%d threads)\n", static_cast<long long>(o.images),
              o.dir.c_str(), ember::bench::now_seconds() - start, threads);
}

// ---------------------------------------------------------------------------------------------
// Measurements.

double thread_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double process_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct Rate {
  double per_second = 0;            // images per wall-clock second, median over the samples
  double per_cpu_second = 0;        // images per CPU-second of the whole process, median
  double slowest = 0, fastest = 0;  // images per second, the samples' spread
};

int64_t epochs_per_sample(int64_t images) { return (kSampleImages + images - 1) / images; }

std::shared_ptr<Compose> pipeline(bool roi) {
  return std::make_shared<Compose>(RandomResizedCrop(kCrop).roi_decode(roi), RandomHorizontalFlip(), ToFloat(),
                                   Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}));
}

struct Config {
  std::string name;
  bool roi;
  int workers;
  std::unique_ptr<DataLoader> loader;
  std::vector<double> wall, cpu;
};

// Each configuration runs one warm-up epoch, then `repeats` rounds of one sample per
// configuration, alternating, so that a drift of the machine's speed touches them all alike.
void measure(std::vector<Config>& configs, const std::shared_ptr<ImageFolder>& folder, const Options& o) {
  auto sample = [epochs = epochs_per_sample(folder->size())](Config& config) {
    const double start = ember::bench::now_seconds(), cpu_start = process_cpu_seconds();
    int64_t images = 0;
    for (int64_t e = 0; e < epochs; ++e) {
      for (Batch& batch : *config.loader) images += batch.size();
    }
    const double wall = ember::bench::now_seconds() - start, cpu = process_cpu_seconds() - cpu_start;
    return std::pair{static_cast<double>(images) / wall, static_cast<double>(images) / cpu};
  };
  for (Config& config : configs) {
    config.loader = std::make_unique<DataLoader>(
        folder,
        DataLoaderOptions(o.batch).shuffle(true).seed(1).workers(config.workers).transform(pipeline(config.roi)));
    for (Batch& batch : *config.loader) (void)batch;  // warm-up
  }
  for (int r = 0; r < o.repeats; ++r) {
    for (Config& config : configs) {
      const auto [wall, cpu] = sample(config);
      config.wall.push_back(wall);
      config.cpu.push_back(cpu);
    }
  }
}

// One thread's CPU microseconds per image of each stage, on the first `count` images, each
// example with its own random stream as the loader would give it.
void phases(const ImageFolder& folder, int64_t count) {
  count = std::min(count, folder.size());
  std::vector<std::shared_ptr<const EncodedImage>> encoded;
  double start = thread_cpu_seconds();
  for (int64_t i = 0; i < count; ++i) encoded.push_back(folder.get(i).encoded);
  const double read = thread_cpu_seconds() - start;

  const RandomResizedCrop roi(kCrop), full = RandomResizedCrop(kCrop).roi_decode(false);
  std::vector<uint8_t> crop(3 * kCrop * kCrop), flipped(crop.size());
  std::vector<float> floats(crop.size()), normalised(crop.size());
  const TensorSpec crop_spec{{3, kCrop, kCrop}, ember::kUInt8}, float_spec{{3, kCrop, kCrop}, ember::kFloat32};
  const RandomHorizontalFlip flip(1.0);  // always flips: the cost of the flip itself
  const ToFloat to_float;
  const Normalize normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});

  struct Stage {
    const char* name;
    std::function<void(int64_t)> run;
  };
  double decoded_pixels_full = 0, decoded_pixels_box = 0;
  const std::vector<Stage> stages = {
      {"decode whole image",
       [&](int64_t i) {
         DecodedImage d = encoded[i]->decode();
         decoded_pixels_full += static_cast<double>(d.width * d.height);
       }},
      {"decode crop box only (roi)",
       [&](int64_t i) {
         ExampleRandom random(1, 0, i);
         const CropBox b = roi.box(encoded[i]->header.height, encoded[i]->header.width, random);
         DecodeRequest request;
         request.left = b.left, request.top = b.top, request.width = b.width, request.height = b.height;
         request.min_width = kCrop, request.min_height = kCrop;
         DecodedImage d = encoded[i]->decode(request);
         decoded_pixels_box += static_cast<double>(d.width * d.height);
       }},
      {"RandomResizedCrop roi",
       [&](int64_t i) {
         ExampleRandom random(1, 0, i);
         roi.apply(*encoded[i], crop.data(), random);
       }},
      {"RandomResizedCrop full",
       [&](int64_t i) {
         ExampleRandom random(1, 0, i);
         full.apply(*encoded[i], crop.data(), random);
       }},
      {"RandomHorizontalFlip (p=1)",
       [&](int64_t i) {
         ExampleRandom random(1, 0, i);
         flip.apply(crop.data(), crop_spec, flipped.data(), random);
       }},
      {"ToFloat",
       [&](int64_t i) {
         ExampleRandom random(1, 0, i);
         to_float.apply(crop.data(), crop_spec, floats.data(), random);
       }},
      {"Normalize",
       [&](int64_t i) {
         ExampleRandom random(1, 0, i);
         normalize.apply(floats.data(), float_spec, normalised.data(), random);
       }},
  };
  std::printf("\nOne thread's CPU time per image, by stage (%lld images):\n", static_cast<long long>(count));
  std::printf("  %-34s %8.0f us\n", "read file (ImageFolder::get)", read * 1e6 / static_cast<double>(count));
  std::vector<double> us;
  for (const Stage& stage : stages) {
    start = thread_cpu_seconds();
    for (int64_t i = 0; i < count; ++i) stage.run(i);
    us.push_back((thread_cpu_seconds() - start) * 1e6 / static_cast<double>(count));
    std::printf("  %-34s %8.0f us\n", stage.name, us.back());
  }
  // RandomResizedCrop = decode + crop and resize; the difference is the resampling's share.
  std::printf("  %-34s %8.0f us\n", "  of which resampling (roi - box)", us[2] - us[1]);
  std::printf("  %-34s %8.0f us\n", "  of which resampling (full - whole)", us[3] - us[0]);
  std::printf(
      "  decoded pixels per image: whole %.0f, crop box %.0f (%.2f of the whole); decode time whole / box %.2f\n",
      decoded_pixels_full / static_cast<double>(count), decoded_pixels_box / static_cast<double>(count),
      decoded_pixels_box / decoded_pixels_full, us[0] / us[1]);
}

// ---------------------------------------------------------------------------------------------
// The torchvision yardstick.

struct Torchvision {
  std::map<int, Rate> rates;  // by worker count
  std::string version = "none";
};

int shell(const std::string& command) { return std::system(command.c_str()); }

std::string find_repo(const Options& o) {
  if (!o.repo.empty()) return o.repo;
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) return workspace;
  return fs::current_path().string();
}

// .venv-torch is shared with tools/bench/train_step_vs_torch, which installs torch alone there;
// torchvision and Pillow are added on first use. pip picks the newest torchvision and, when the
// torch already there is older than the one it needs, upgrades torch with it.
bool ensure_torchvision(const std::string& repo) {
  const std::string python = "'" + repo + "/.venv-torch/bin/python'";
  if (shell(python + " -c 'import torchvision, PIL' 2>/dev/null") == 0) return true;
  std::printf("torchvision: installing PyPI's torch, torchvision and Pillow into %s/.venv-torch (once)\n",
              repo.c_str());
  std::fflush(stdout);
  if (!fs::exists(repo + "/.venv-torch/bin/python") &&
      shell("/usr/bin/python3 -m venv '" + repo + "/.venv-torch'") != 0) {
    return false;
  }
  return shell("'" + repo + "/.venv-torch/bin/pip' install --quiet torch torchvision pillow numpy") == 0 &&
         shell(python + " -c 'import torchvision, PIL' 2>/dev/null") == 0;
}

// The number after `key=` in a line, or 0.
double field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  return at == std::string::npos ? 0.0 : std::atof(line.c_str() + at + key.size() + 2);
}

std::string word(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size() + 2;
  return line.substr(begin, line.find(' ', begin) - begin);
}

Torchvision run_torchvision(const Options& o, const std::vector<int>& worker_counts) {
  Torchvision result;
  const std::string repo = find_repo(o);
  if (repo.find('\'') != std::string::npos || o.dir.find('\'') != std::string::npos) {
    std::printf("torchvision: skipped, the repository's or the images' path holds a quote\n");
    return result;
  }
  if (!fs::exists(repo + "/tools/bench/torchvision_loader.py")) {
    std::printf("torchvision: no tools/bench/torchvision_loader.py under '%s' (use bazel run, or --repo)\n",
                repo.c_str());
    return result;
  }
  if (!ensure_torchvision(repo)) {
    std::printf("torchvision: did not install; its figures are reported as 0\n");
    return result;
  }
  std::string workers;
  for (int w : worker_counts) workers += (workers.empty() ? "" : ",") + std::to_string(w);
  const std::string command = "'" + repo + "/.venv-torch/bin/python' '" + repo +
                              "/tools/bench/torchvision_loader.py' --root '" + o.dir + "' --workers " + workers +
                              " --batch " + std::to_string(o.batch) + " --repeats " + std::to_string(o.repeats) +
                              " --epochs-per-sample " + std::to_string(epochs_per_sample(o.images)) +
                              " --phase-images " + std::to_string(o.phase_images) + " 2>&1";
  std::fflush(stdout);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe)) {
    std::string line(buffer);
    std::fputs(("  " + line).c_str(), stdout);
    if (line.rfind("torchvision_loader: workers=", 0) == 0) {
      const int w = static_cast<int>(field(line, "workers"));
      result.rates[w] = {field(line, "images_per_s"), field(line, "images_per_cpu_s"), field(line, "slowest"),
                         field(line, "fastest")};
    } else if (line.rfind("bench torchvision_loader:", 0) == 0) {
      result.version = word(line, "torchvision");
      if (result.version.empty()) result.version = "unknown";
    }
  }
  if (pclose(pipe) != 0) {
    std::printf("torchvision: the script failed; its figures are reported as 0\n");
    return Torchvision();
  }
  return result;
}

// ---------------------------------------------------------------------------------------------

std::string cpu_header() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown", family = "?", number = "?", flags;
  while (std::getline(cpuinfo, line)) {
    auto value = [&] { return line.substr(line.find(':') + 2); };
    if (line.rfind("model name", 0) == 0) {
      model = value();
    } else if (line.rfind("cpu family", 0) == 0) {
      family = value();
    } else if (line.rfind("model\t", 0) == 0) {
      number = value();
    } else if (line.rfind("flags", 0) == 0) {
      std::istringstream all(value());
      for (std::string flag; all >> flag;) {
        if (flag == "avx2" || flag == "fma" || flag == "avx512f" || flag == "avx512bw" || flag == "avx512vl") {
          flags += " " + flag;
        }
      }
      break;  // the first processor's lines are enough
    }
  }
  return model + " (family " + family + " model " + number + "), flags:" + (flags.empty() ? " no AVX2" : flags) + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " cores";
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // The loader's worker threads are what is measured; Ember's compute pool stays out of the way.
  ember::cpu::set_num_threads(1);
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const int all = o.workers > 0 ? o.workers : cores;

  std::printf("image_loader: CPU %s\n", cpu_header().c_str());
  std::printf(
      "Ember: libjpeg-turbo %d (the system's), batch %lld, RandomResizedCrop(%lld) + flip + ToFloat + "
      "Normalize, median of %d samples of %lld epochs after a warm-up epoch\n",
      LIBJPEG_TURBO_VERSION_NUMBER, static_cast<long long>(o.batch), static_cast<long long>(kCrop), o.repeats,
      static_cast<long long>(epochs_per_sample(o.images)));
  ensure_folder(o);

  auto folder = std::make_shared<ImageFolder>(o.dir);
  double bytes = 0, pixels = 0;
  for (int64_t i = 0; i < folder->size(); ++i) {
    const Example e = folder->get(i);
    bytes += static_cast<double>(e.encoded->bytes.size());
    pixels += static_cast<double>(e.encoded->header.width * e.encoded->header.height);
  }
  const double n = static_cast<double>(folder->size());
  std::printf(
      "images: %lld in %zu classes, mean %.0f pixels (%.0f x %.0f at 4:3), mean file %.1f KB, %.2f bytes/pixel "
      "(ImageNet train: about 110 KB, 0.5-0.8 bytes/pixel)\n",
      static_cast<long long>(folder->size()), folder->classes().size(), pixels / n, std::sqrt(pixels / n * 4 / 3),
      std::sqrt(pixels / n * 3 / 4), bytes / n / 1024, bytes / pixels);

  if (o.phase_images > 0) phases(*folder, o.phase_images);

  std::vector<Config> configs;
  configs.push_back({"ember roi", true, 1, nullptr, {}, {}});
  configs.push_back({"ember full", false, 1, nullptr, {}, {}});
  if (all != 1) {
    configs.push_back({"ember roi", true, all, nullptr, {}, {}});
    configs.push_back({"ember full", false, all, nullptr, {}, {}});
  }
  std::printf("\nEmber's DataLoader (%s)...\n", all != 1 ? "1 and all workers" : "1 worker");
  std::fflush(stdout);
  measure(configs, folder, o);
  for (Config& config : configs) config.loader.reset();

  std::vector<int> worker_counts = {1};
  if (all != 1) worker_counts.push_back(all);
  Torchvision torchvision;
  if (o.torchvision) {
    std::printf("\ntorchvision's DataLoader (tools/bench/torchvision_loader.py)...\n");
    torchvision = run_torchvision(o, worker_counts);
  } else {
    std::printf("\ntorchvision: skipped (--no-torchvision)\n");
  }

  std::printf("\n%-26s %8s %10s %13s %12s\n", "loader", "workers", "images/s", "images/CPU-s", "spread");
  auto row = [](const std::string& name, int workers, const Rate& rate) {
    std::printf("%-26s %8d %10.1f %13.1f %5.0f-%-6.0f\n", name.c_str(), workers, rate.per_second, rate.per_cpu_second,
                rate.slowest, rate.fastest);
  };
  for (const Config& config : configs) {
    const auto [low, high] = std::minmax_element(config.wall.begin(), config.wall.end());
    row(config.name, config.workers,
        {ember::bench::median(config.wall), ember::bench::median(config.cpu), *low, *high});
  }
  for (int w : worker_counts) {
    row("torchvision " + torchvision.version, w, torchvision.rates.count(w) ? torchvision.rates.at(w) : Rate());
  }

  const double ember_per_core = ember::bench::median(configs[0].wall);
  const double full_per_core = ember::bench::median(configs[1].wall);
  const double torch_per_core = torchvision.rates.count(1) ? torchvision.rates.at(1).per_second : 0.0;
  const double vs_torchvision = torch_per_core > 0 ? ember_per_core / torch_per_core : 0.0;
  const double roi_vs_full = ember_per_core / full_per_core;
  std::printf("\nissue 36 targets: vs_torchvision %.2f (>= 2: %s), roi_vs_full %.2f (>= 1.5: %s)\n", vs_torchvision,
              torch_per_core > 0 ? (vs_torchvision >= 2 ? "met" : "NOT met") : "not measured", roi_vs_full,
              roi_vs_full >= 1.5 ? "met" : "NOT met");
  std::printf("one GPU at 2,500 images/s needs %.1f cores of Ember's loader (%.1f of torchvision's)\n",
              2500 / ember_per_core, torch_per_core > 0 ? 2500 / torch_per_core : 0.0);
  std::printf(
      "bench image_loader: ember_ips_per_core=%.1f torchvision_ips_per_core=%.1f vs_torchvision=%.2f "
      "roi_vs_full=%.2f torchvision=%s\n",
      ember_per_core, torch_per_core, vs_torchvision, roi_vs_full, torchvision.version.c_str());
  return 0;
}

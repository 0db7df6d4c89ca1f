// ImageFolder on trees written here: torchvision's class and file order, the files it leaves out or
// refuses, the DataLoader's batches from encoded examples (the same for any worker count, and the
// same pixels as decoding each file whole), and bad files raising or skipped by option.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/ember_core.h"
#include "data/data.h"
#include "tests/data/test_files.h"

using namespace ember;
using namespace ember::data;
using ember::data::testing::photo_pixels;
using ember::data::testing::scratch_dir;
using ember::data::testing::write_bytes;

namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> jpeg_file(int64_t w, int64_t h, int channels, uint64_t seed) {
  std::vector<uint8_t> pixels = photo_pixels(w, h, channels, seed);
  return encode_jpeg(pixels.data(), w, h, channels, 90);
}

std::vector<uint8_t> png_file(int64_t w, int64_t h, uint64_t seed) {
  std::vector<uint8_t> pixels = photo_pixels(w, h, 3, seed);
  return encode_png(pixels.data(), w, h, 3);
}

// root/cat/{b.jpg (gray), a.PNG, sub/c.jpeg}, root/ant/{z.JPEG (a PNG), y.jpg (CMYK), notes.txt}, root/dog/x.jpg.
std::string varied_tree(const std::string& name) {
  const std::string root = scratch_dir(name);
  for (const char* dir : {"/cat/sub", "/ant", "/dog"}) fs::create_directories(root + dir);
  write_bytes(root + "/cat/b.jpg", jpeg_file(40, 30, 1, 1));
  write_bytes(root + "/cat/a.PNG", png_file(33, 41, 2));
  write_bytes(root + "/cat/sub/c.jpeg", jpeg_file(50, 20, 3, 3));
  write_bytes(root + "/ant/z.JPEG", png_file(24, 24, 4));
  write_bytes(root + "/ant/y.jpg", jpeg_file(30, 30, 4, 5));
  write_bytes(root + "/ant/notes.txt", {'h', 'i'});
  write_bytes(root + "/dog/x.jpg", jpeg_file(64, 48, 3, 6));
  return root;
}

std::vector<std::vector<float>> epoch_batches(DatasetPtr dataset, int workers, TransformPtr transform) {
  DataLoader loader(dataset, DataLoaderOptions(2).shuffle(true).seed(9).workers(workers).transform(transform));
  std::vector<std::vector<float>> out;
  for (Batch& batch : loader) {
    out.push_back(batch.data.to(kFloat32).contiguous().to_vector<float>());
    std::vector<int64_t> targets = batch.target.to_vector<int64_t>();
    for (size_t j = 0; j < targets.size(); ++j) {
      out.back().push_back(static_cast<float>(targets[j]));
      out.back().push_back(static_cast<float>(batch.indices[j]));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("ImageFolder orders classes and files as torchvision and leaves out non-images", "[image_folder]") {
  const std::string root = varied_tree("folder_order");
  ImageFolder folder(root);
  CHECK(folder.classes() == std::vector<std::string>{"ant", "cat", "dog"});
  CHECK(folder.class_to_idx().at("dog") == 2);
  REQUIRE(folder.size() == 6);
  std::vector<std::string> paths;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < folder.size(); ++i)
    paths.push_back(folder.path_relative(i)), targets.push_back(folder.target(i));
  // Within a class: the class folder's names sorted (byte order: capitals first), then sub-folders.
  CHECK(paths ==
        std::vector<std::string>{"ant/y.jpg", "ant/z.JPEG", "cat/a.PNG", "cat/b.jpg", "cat/sub/c.jpeg", "dog/x.jpg"});
  CHECK(targets == std::vector<int64_t>{0, 0, 1, 1, 1, 2});
  CHECK(folder.non_images() == 1);
  CHECK(folder.path(5) == root + "/dog/x.jpg");

  Example e = folder.get(1);
  CHECK(!e.data.defined());
  REQUIRE(e.encoded);
  CHECK(e.encoded->header.format == ImageFormat::kPng);  // the PNG called .JPEG
  CHECK(e.target.item<int64_t>() == 0);
  CHECK(folder.load(0).sizes() == Shape{3, 30, 30});  // CMYK, as RGB
  CHECK(folder.load(3).sizes() == Shape{3, 30, 40});  // gray, as RGB
  CHECK(ImageFolder(root, ImageFolderOptions().channels(1)).load(2).sizes() == Shape{1, 41, 33});

  CHECK_THROWS_WITH(ImageFolder(root, ImageFolderOptions().refuse_non_images(true)),
                    Catch::Contains("ant/notes.txt' is not a .jpg, .jpeg or .png file"));
  CHECK_THROWS_WITH(ImageFolder(root + "/missing"),
                    Catch::Contains("ImageFolder: the root '" + root + "/missing' is not a directory"));
  fs::create_directories(root + "/empty");
  CHECK_THROWS_WITH(ImageFolder(root),
                    Catch::Contains("no .jpg, .jpeg or .png file in the class folder '" + root + "/empty'"));
  CHECK_THROWS_WITH(ImageFolder(root, ImageFolderOptions().channels(2)), Catch::Contains("channels must be 1"));

  // A list file instead of the scan: its order, its classes.
  const std::string list = root + "/../folder_order_list.txt";
  write_bytes(list, std::vector<uint8_t>{'d', 'o', 'g', '/', 'x', '.', 'j', 'p', 'g', '\n', '\n',
                                         'c', 'a', 't', '/', 'b', '.', 'j', 'p', 'g', '\n'});
  ImageFolder listed(root, ImageFolderOptions().list_file(list));
  CHECK(listed.classes() == std::vector<std::string>{"cat", "dog"});
  CHECK(listed.size() == 2);
  CHECK(listed.target(0) == 1);
  CHECK(listed.load(1).sizes() == Shape{3, 30, 40});
  write_bytes(list, std::vector<uint8_t>{'x', '.', 'j', 'p', 'g', '\n'});
  CHECK_THROWS_WITH(ImageFolder(root, ImageFolderOptions().list_file(list)),
                    Catch::Contains("line 1 of the list file"));
}

TEST_CASE("The DataLoader decodes an ImageFolder the same for any worker count", "[image_folder]") {
  const std::string root = varied_tree("folder_loader");
  auto folder = std::make_shared<ImageFolder>(root);
  auto augment = std::make_shared<Compose>(RandomResizedCrop(16), RandomHorizontalFlip(), ToFloat(),
                                           Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}));
  auto serial = epoch_batches(folder, 0, augment);
  REQUIRE(serial.size() == 3);
  CHECK(epoch_batches(folder, 2, augment) == serial);

  // Each slot is the transform of that file, decoded crop-aware, with the example's stream.
  DataLoader loader(folder, DataLoaderOptions(3).workers(1).transform(augment).channels_last(true));
  for (Batch& batch : loader) {
    REQUIRE(batch.data.sizes() == Shape{3, 3, 16, 16});
    for (int64_t j = 0; j < batch.size(); ++j) {
      const int64_t index = batch.indices[j];
      Tensor one = empty({3, 16, 16});
      ExampleRandom random(0, 0, index);
      augment->apply(*folder->get(index).encoded, one.data_ptr(), random);
      CHECK(batch.data.select(0, j).contiguous().to_vector<float>() == one.to_vector<float>());
      CHECK(batch.target.select(0, j).item<int64_t>() == folder->target(index));
    }
  }

  // Without a transform: whole images, which must then share a size.
  auto same = std::make_shared<Subset>(folder, std::vector<int64_t>{0, 0});
  DataLoader whole(same, DataLoaderOptions(2));
  Batch& first = *whole.begin();
  CHECK(first.data.dtype() == kUInt8);
  CHECK(first.data.select(0, 1).contiguous().to_vector<uint8_t>() == folder->load(0).to_vector<uint8_t>());
  DataLoader mixed(folder, DataLoaderOptions(6));
  CHECK_THROWS_WITH(mixed.begin(), Catch::Contains("a batch needs examples of one shape"));
}

TEST_CASE("Bad image files raise naming the file, or are skipped and counted", "[image_folder]") {
  const std::string root = scratch_dir("folder_bad");
  fs::create_directories(root + "/a");
  fs::create_directories(root + "/b");
  std::vector<uint8_t> good = jpeg_file(20, 20, 3, 1), png = png_file(20, 20, 2);
  write_bytes(root + "/a/0_good.jpg", good);
  write_bytes(root + "/a/1_empty.jpg", {});
  write_bytes(root + "/a/2_cut.jpg", std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
  png[33 + 8 + 2] ^= 0xFF;  // inside IDAT's data
  write_bytes(root + "/a/3_bad.png", png);
  write_bytes(root + "/b/4_big.jpg", jpeg_file(64, 64, 3, 3));
  fs::create_symlink(root + "/nowhere.jpg", root + "/b/5_dangling.jpg");
  write_bytes(root + "/b/6_good.jpg", good);
  auto crop = std::make_shared<RandomResizedCrop>(8);

  auto strict = std::make_shared<ImageFolder>(root, ImageFolderOptions().max_pixels(1000));
  REQUIRE(strict->size() == 7);
  auto fails_at = [&](int64_t index, const std::string& fault) {
    CAPTURE(index, fault);
    DataLoader loader(std::make_shared<Subset>(strict, std::vector<int64_t>{0, index}),
                      DataLoaderOptions(2).transform(crop));
    CHECK_THROWS_WITH(loader.begin(), Catch::Contains(strict->path(index)) && Catch::Contains(fault));
  };
  fails_at(1, "the file is empty (0 bytes)");
  fails_at(2, "truncated JPEG data");
  fails_at(3, "IDAT");
  fails_at(4, "64x64 = 4096 pixels, more than the limit of 1000");
  fails_at(5, "cannot open");

  auto lenient = std::make_shared<ImageFolder>(root, ImageFolderOptions().max_pixels(1000).skip_bad(true));
  DataLoader loader(lenient, DataLoaderOptions(7).workers(1).transform(crop));
  Batch& batch = *loader.begin();
  CHECK(batch.size() == 7);
  // 1..5 are bad: each gives way to the next good index, 6, whose class is b.
  CHECK(batch.target.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 1, 1, 1, 1});
  CHECK(lenient->bad_files() == 5);
}

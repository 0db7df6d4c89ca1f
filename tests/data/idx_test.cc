// The IDX reader and the MNIST dataset on small files written here: gzip'd and plain files, and
// every error a damaged file must produce (each naming the path and the problem).
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "data/idx.h"
#include "data/mnist.h"
#include "tests/data/test_files.h"

using namespace ember;
using namespace ember::data;
using namespace ember::data::testing;

namespace {

// 3 images of 4 rows x 5 columns: pixel k of image n is 20 n + k; labels 7, 0, 3.
std::vector<uint8_t> image_payload() {
  std::vector<uint8_t> pixels;
  for (int n = 0; n < 3; ++n) {
    for (int k = 0; k < 20; ++k) pixels.push_back(static_cast<uint8_t>(20 * n + k));
  }
  return pixels;
}

std::vector<uint8_t> images_file() { return idx_file({3, 4, 5}, image_payload()); }
std::vector<uint8_t> labels_file() { return idx_file({3}, {7, 0, 3}); }

void check_small_mnist(const MNIST& mnist) {
  REQUIRE(mnist.size() == 3);
  CHECK(mnist.images().sizes() == Shape{3, 1, 4, 5});
  CHECK(mnist.images().dtype() == kUInt8);
  CHECK(mnist.targets().dtype() == kInt64);
  CHECK(mnist.targets().to_vector<int64_t>() == std::vector<int64_t>{7, 0, 3});
  Example e = mnist.get(1);
  CHECK(e.data.sizes() == Shape{1, 4, 5});
  CHECK(e.target.item<int64_t>() == 0);
  std::vector<uint8_t> pixels = e.data.to_vector<uint8_t>();
  REQUIRE(pixels.size() == 20);
  CHECK(pixels[0] == 20);
  CHECK(pixels[7] == 27);  // row 1, column 2: row-major with 5 columns
  CHECK(e.data[0][1][2].item<int64_t>() == 27);
}

}  // namespace

TEST_CASE("MNIST reads plain IDX files", "[idx]") {
  std::string dir = scratch_dir("idx_plain");
  write_bytes(dir + "/train-images-idx3-ubyte", images_file());
  write_bytes(dir + "/train-labels-idx1-ubyte", labels_file());
  check_small_mnist(MNIST(dir, /*train=*/true));
}

TEST_CASE("MNIST reads gzip'd IDX files, test split", "[idx]") {
  std::string dir = scratch_dir("idx_gz");
  write_bytes(dir + "/t10k-images-idx3-ubyte.gz", gzip(images_file()));
  write_bytes(dir + "/t10k-labels-idx1-ubyte.gz", gzip(labels_file()));
  check_small_mnist(MNIST(dir, /*train=*/false));
  FashionMNIST fashion(dir, /*train=*/false);
  CHECK(fashion.size() == 3);
}

TEST_CASE("read_idx accepts concatenated gzip members", "[idx][gzip]") {
  std::string path = scratch_dir("idx_members") + "/two-members.gz";
  std::vector<uint8_t> file = images_file();
  std::vector<uint8_t> head(file.begin(), file.begin() + 10), tail(file.begin() + 10, file.end());
  std::vector<uint8_t> both = gzip(head), second = gzip(tail);
  both.insert(both.end(), second.begin(), second.end());
  write_bytes(path, both);
  CHECK(read_idx(path, 3).to_vector<uint8_t>() == image_payload());
}

TEST_CASE("MNIST reports a missing file with both names it tried", "[idx][errors]") {
  std::string dir = scratch_dir("idx_missing");
  write_bytes(dir + "/train-images-idx3-ubyte", images_file());
  CHECK_THROWS_WITH(MNIST(dir), Catch::Contains("MNIST: missing file") &&
                                    Catch::Contains(dir + "/train-labels-idx1-ubyte.gz") &&
                                    Catch::Contains(dir + "/train-labels-idx1-ubyte'"));
}

TEST_CASE("read_idx errors name the path and the problem", "[idx][errors]") {
  std::string dir = scratch_dir("idx_errors");
  auto written = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    std::string path = dir + "/" + name;
    write_bytes(path, bytes);
    return path;
  };

  SECTION("truncated pixel data") {
    std::vector<uint8_t> bytes = images_file();
    bytes.resize(bytes.size() - 7);
    std::string path = written("short", bytes);
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("truncated data") &&
                                             Catch::Contains("60 bytes of data, found 53"));
  }
  SECTION("truncated header") {
    std::string path = written("header", {0, 0, 8, 3, 0, 0});
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("truncated data"));
    std::string tiny = written("tiny", {0, 0});
    CHECK_THROWS_WITH(read_idx(tiny), Catch::Contains(tiny) && Catch::Contains("truncated data"));
  }
  SECTION("wrong magic number") {
    std::vector<uint8_t> bytes = images_file();
    bytes[0] = 0x1a;  // not a gzip header either
    std::string path = written("magic", bytes);
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("wrong magic number 0x1A000803"));
    std::string ints = written("int32", idx_file({1}, {0, 0, 0, 1}, 0x0C));
    CHECK_THROWS_WITH(read_idx(ints, 1), Catch::Contains("wrong magic number 0x00000C01"));
  }
  SECTION("wrong dimension count") {
    std::string path = written("labels-as-images", labels_file());
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("wrong dimension count") &&
                                             Catch::Contains("says 1 dims, expected 3"));
  }
  SECTION("trailing bytes") {
    std::vector<uint8_t> bytes = labels_file();
    bytes.push_back(1);
    std::string path = written("long", bytes);
    CHECK_THROWS_WITH(read_idx(path, 1), Catch::Contains(path) && Catch::Contains("1 unexpected trailing bytes"));
  }
  SECTION("bad gzip stream") {
    std::vector<uint8_t> bytes = gzip(images_file());
    for (size_t k = 10; k < bytes.size() - 8; ++k) bytes[k] ^= 0x5a;
    std::string path = written("corrupt.gz", bytes);
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("bad gzip stream"));
  }
  SECTION("truncated gzip stream") {
    std::vector<uint8_t> bytes = gzip(images_file());
    bytes.resize(bytes.size() / 2);
    std::string path = written("cut.gz", bytes);
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("truncated gzip stream"));
  }
  SECTION("garbage after the gzip stream") {
    std::vector<uint8_t> bytes = gzip(images_file());
    bytes.push_back(0);
    bytes.push_back(0);
    std::string path = written("junk.gz", bytes);
    CHECK_THROWS_WITH(read_idx(path, 3), Catch::Contains(path) && Catch::Contains("2 trailing bytes"));
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(read_idx(dir + "/nothing-here"), Catch::Contains(dir + "/nothing-here"));
  }
}

TEST_CASE("MNIST rejects label/image count mismatches", "[idx][errors]") {
  std::string dir = scratch_dir("idx_mismatch");
  write_bytes(dir + "/train-images-idx3-ubyte.gz", gzip(images_file()));
  write_bytes(dir + "/train-labels-idx1-ubyte.gz", gzip(idx_file({2}, {1, 2})));
  CHECK_THROWS_WITH(FashionMNIST(dir), Catch::Contains("FashionMNIST: label/image count mismatch") &&
                                           Catch::Contains("holds 3 images") && Catch::Contains("holds 2 labels") &&
                                           Catch::Contains(dir + "/train-labels-idx1-ubyte.gz"));
}

TEST_CASE("MNIST rejects an images file that holds labels", "[idx][errors]") {
  std::string dir = scratch_dir("idx_swapped");
  write_bytes(dir + "/train-images-idx3-ubyte", labels_file());
  write_bytes(dir + "/train-labels-idx1-ubyte", labels_file());
  CHECK_THROWS_WITH(MNIST(dir),
                    Catch::Contains(dir + "/train-images-idx3-ubyte") && Catch::Contains("wrong dimension count"));
}

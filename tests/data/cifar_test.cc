// CIFAR-10 and CIFAR-100 binary readers on small files written here: record layout, label choice,
// file order, and the errors for missing, truncated, empty and foreign files.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/ember_core.h"
#include "data/cifar.h"
#include "tests/data/test_files.h"

using namespace ember;
using namespace ember::data;
using namespace ember::data::testing;

namespace {

// Five training files of 2, 1, 1, 1, 1 records (labels start at 0, 2, 3, 4, 5) and a test file.
std::string write_cifar10(const std::string& name) {
  std::string dir = scratch_dir(name);
  write_bytes(dir + "/data_batch_1.bin", cifar_records(2, 1, 0));
  for (int k = 2; k <= 5; ++k) {
    write_bytes(dir + "/data_batch_" + std::to_string(k) + ".bin", cifar_records(1, 1, static_cast<uint8_t>(k)));
  }
  write_bytes(dir + "/test_batch.bin", cifar_records(3, 1, 7));
  return dir;
}

}  // namespace

TEST_CASE("CIFAR10 reads the five training files in order", "[cifar]") {
  CIFAR10 train(write_cifar10("cifar10_ok"));
  REQUIRE(train.size() == 6);
  CHECK(train.images().sizes() == Shape{6, 3, 32, 32});
  CHECK(train.targets().to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  Example e = train.get(1);  // record 1 of data_batch_1
  CHECK(e.data.sizes() == Shape{3, 32, 32});
  CHECK(e.data.dtype() == kUInt8);
  CHECK(e.target.item<int64_t>() == 1);
  // Channel-major planes: pixel byte 1024 c + 32 y + x is channel c, row y, column x.
  CHECK(e.data[0][0][0].item<int64_t>() == cifar_pixel(1, 0));
  CHECK(e.data[1][2][3].item<int64_t>() == cifar_pixel(1, 1024 + 64 + 3));
  CHECK(e.data[2][31][31].item<int64_t>() == cifar_pixel(1, 3071));
  CHECK(train.get(2).data[0][0][5].item<int64_t>() == cifar_pixel(0, 5));  // data_batch_2's only record
}

TEST_CASE("CIFAR10 test split", "[cifar]") {
  CIFAR10 test(write_cifar10("cifar10_test"), /*train=*/false);
  REQUIRE(test.size() == 3);
  CHECK(test.targets().to_vector<int64_t>() == std::vector<int64_t>{7, 8, 9});
  CHECK(test.get(2).data[0][0][9].item<int64_t>() == cifar_pixel(2, 9));
}

TEST_CASE("CIFAR100 selects fine or coarse labels", "[cifar]") {
  std::string dir = scratch_dir("cifar100_ok");
  write_bytes(dir + "/train.bin", cifar_records(4, 2, 10));  // coarse 10 + n, fine 11 + n
  write_bytes(dir + "/test.bin", cifar_records(2, 2, 0));
  CIFAR100 fine(dir);
  CIFAR100 coarse(dir, /*train=*/true, CifarLabels::kCoarse);
  REQUIRE(fine.size() == 4);
  CHECK(fine.targets().to_vector<int64_t>() == std::vector<int64_t>{11, 12, 13, 14});
  CHECK(coarse.targets().to_vector<int64_t>() == std::vector<int64_t>{10, 11, 12, 13});
  CHECK(fine.get(3).target.item<int64_t>() == 14);
  CHECK(coarse.get(3).target.item<int64_t>() == 13);
  CHECK(coarse.fine_targets().to_vector<int64_t>() == fine.targets().to_vector<int64_t>());
  CHECK(fine.get(3).data[2][0][1].item<int64_t>() == cifar_pixel(3, 2048 + 1));
  CHECK(CIFAR100(dir, /*train=*/false).size() == 2);
}

TEST_CASE("CIFAR errors name the file and the problem", "[cifar][errors]") {
  SECTION("truncated CIFAR-10 file") {
    std::string dir = write_cifar10("cifar10_truncated");
    std::vector<uint8_t> bytes = cifar_records(2, 1);
    bytes.pop_back();
    write_bytes(dir + "/data_batch_3.bin", bytes);
    CHECK_THROWS_WITH(CIFAR10(dir), Catch::Contains(dir + "/data_batch_3.bin") && Catch::Contains("file size 6145") &&
                                        Catch::Contains("not a multiple of the record size 3073"));
  }
  SECTION("truncated CIFAR-100 file") {
    std::string dir = scratch_dir("cifar100_truncated");
    std::vector<uint8_t> bytes = cifar_records(2, 2);
    bytes.resize(bytes.size() - 100);
    write_bytes(dir + "/test.bin", bytes);
    CHECK_THROWS_WITH(CIFAR100(dir, false),
                      Catch::Contains(dir + "/test.bin") && Catch::Contains("not a multiple of the record size 3074"));
  }
  SECTION("a CIFAR-100 file read as CIFAR-10") {
    std::string dir = write_cifar10("cifar10_foreign");
    // 3073 records of 3074 bytes: a size CIFAR-10's record size divides too, so the label check
    // catches it: CIFAR-10's record 1 starts at the last pixel of CIFAR-100's record 0.
    write_bytes(dir + "/test_batch.bin", cifar_records(3073, 2, 0));
    CHECK_THROWS_WITH(CIFAR10(dir, false), Catch::Contains(dir + "/test_batch.bin") &&
                                               Catch::Contains("record 1 has label byte 0 = 59, expected 0..9"));
  }
  SECTION("missing file") {
    std::string dir = write_cifar10("cifar10_missing");
    std::filesystem::remove(dir + "/data_batch_4.bin");
    CHECK_THROWS_WITH(CIFAR10(dir), Catch::Contains("CIFAR10: missing file '" + dir + "/data_batch_4.bin'"));
    CHECK_THROWS_WITH(CIFAR100(dir), Catch::Contains("CIFAR100: missing file '" + dir + "/train.bin'"));
  }
  SECTION("empty file") {
    std::string dir = write_cifar10("cifar10_empty");
    write_bytes(dir + "/test_batch.bin", {});
    CHECK_THROWS_WITH(CIFAR10(dir, false), Catch::Contains(dir + "/test_batch.bin' is empty"));
  }
}

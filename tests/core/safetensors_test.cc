// safetensors: round trips of every dtype, and hostile files (truncated at every length,
// corrupted headers, offsets out of bounds / overlapping / leaving gaps, absurd sizes) that must
// raise an ember::Error naming the problem, never crash or read out of bounds. Also: a process
// killed in the middle of writing never leaves a torn file behind.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/ember_core.h"
#include "core/io/file_io.h"
#include "core/io/safetensors.h"

using namespace ember;

namespace {

std::string temp_dir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/safetensors_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<uint8_t> make_file(const std::string& header_json, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header_json.size() + data_bytes, 0);
  uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header_json.data(), header_json.size());
  return out;
}

void require_rejected(const std::vector<uint8_t>& bytes, const std::string& expected_text) {
  INFO("expected an error containing: " << expected_text);
  REQUIRE_THROWS_WITH(parse_safetensors(bytes.data(), bytes.size(), "bad.safetensors"),
                      Catch::Contains("bad.safetensors") && Catch::Contains(expected_text));
}

}  // namespace

TEST_CASE("every dtype, shape and metadata survive a round trip", "[safetensors]") {
  NamedTensors tensors;
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool})
    tensors.emplace_back(std::string("t_") + dtype_name(d), (arange(12).view({3, 4}).to(kFloat64) * 0.5).floor().to(d));
  tensors.emplace_back("scalar", full({}, 2.5));
  tensors.emplace_back("empty", zeros({0, 7}));
  tensors.emplace_back("strided", randn({4, 6}).t().slice(0, 0, 6, 2));
  std::vector<uint8_t> bytes = serialize_safetensors(tensors, {{"epoch", "3"}, {"note", "x\"y\\z"}});
  SafetensorsFile back = parse_safetensors(bytes.data(), bytes.size(), "memory");
  REQUIRE(back.metadata.at("epoch") == "3");
  REQUIRE(back.metadata.at("note") == "x\"y\\z");
  REQUIRE(back.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor& u = back.at(name);
    REQUIRE(u.dtype() == t.dtype());
    REQUIRE(u.sizes() == t.sizes());
    REQUIRE(u.to_vector<double>() == t.to_vector<double>());
  }
  // Data starts 8-byte aligned, as the reference writer lays it out.
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  REQUIRE(header % 8 == 0);
}

TEST_CASE("a file truncated at any length is rejected cleanly", "[safetensors]") {
  std::vector<uint8_t> bytes = serialize_safetensors({{"a", randn({5, 3})}, {"b", arange(4)}});
  for (size_t length = 0; length < bytes.size(); ++length) {
    INFO("truncated to " << length << " of " << bytes.size() << " bytes");
    REQUIRE_THROWS_AS(parse_safetensors(bytes.data(), length, "cut.safetensors"), Error);
  }
  REQUIRE_NOTHROW(parse_safetensors(bytes.data(), bytes.size(), "whole.safetensors"));
}

TEST_CASE("hostile headers name what is wrong", "[safetensors]") {
  require_rejected(std::vector<uint8_t>(4, 0), "too short");
  {
    std::vector<uint8_t> huge = make_file("{}", 0);
    huge[7] = 0x7f;  // an 8-exabyte header length
    require_rejected(huge, "exceeds the 100 MB limit");
  }
  {
    std::vector<uint8_t> past = make_file("{}", 0);
    past[0] = 200;
    require_rejected(past, "runs past the end of the file");
  }
  require_rejected(make_file("{\"a\":", 0), "invalid JSON");
  require_rejected(make_file("[1, 2]", 0), "must be a JSON object");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{}}", 8),
                   "duplicate key");
  require_rejected(make_file("{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8),
                   "unsupported dtype \"Q7\"");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8),
                   "non-negative integers");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", 8),
                   "outside the data section");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8),
                   "data_offsets [8, 0) are reversed");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8), "need 12");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                             12),
                   "overlapping or missing");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16), "trailing bytes");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                             "\"data_offsets\":[0,8]}}",
                             8),
                   "overflows");
  // Found by review, missed by 300 s of fuzzing: numel x element size wrapped to 0 bytes, and the
  // reader returned a 2^62-element tensor over empty storage.
  require_rejected(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                             "\"data_offsets\":[0,0]}}",
                             0),
                   "shape overflows 2^62 bytes");
  require_rejected(make_file("{\"a\":{\"dtype\":\"F64\",\"shape\":[2147483648,2147483648],"
                             "\"data_offsets\":[0,0]}}",
                             0),
                   "shape overflows 2^62 bytes");
  {
    std::vector<uint8_t> bad_bool = make_file("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    bad_bool.back() = 7;
    require_rejected(bad_bool, "neither 0 nor 1");
  }
  std::string deep(200, '[');
  require_rejected(make_file("{\"a\":" + deep, 0), "nesting deeper than 64");
  require_rejected(make_file("{\"__metadata__\":{\"k\":3}}", 0), "is not a string");
}

TEST_CASE("random corruption never crashes the reader", "[safetensors]") {
  std::vector<uint8_t> good = serialize_safetensors({{"w", randn({4, 4})}, {"b", randn({4})}}, {{"k", "v"}});
  Generator g(7);
  Tensor positions = randint(0, static_cast<int64_t>(good.size()), {400}, TensorOptions(kInt64), &g);
  Tensor values = randint(0, 256, {400}, TensorOptions(kInt64), &g);
  int rejected = 0, accepted = 0;
  for (int64_t k = 0; k < 400; ++k) {
    std::vector<uint8_t> bad = good;
    bad[positions[k].item<int64_t>()] = static_cast<uint8_t>(values[k].item<int64_t>());
    try {
      SafetensorsFile file = parse_safetensors(bad.data(), bad.size(), "fuzzed");
      // Accepted: the bytes still describe tensors that fit inside the file.
      size_t total = 0;
      for (const auto& [name, t] : file.tensors) total += t.nbytes();
      REQUIRE(total <= bad.size());
      ++accepted;
    } catch (const Error& e) {
      REQUIRE(std::string(e.what()).find("fuzzed") != std::string::npos);
      ++rejected;
    }
  }
  // Most single-byte changes hit the header or the length and must be caught.
  REQUIRE(rejected > 0);
  REQUIRE(accepted + rejected == 400);
}

TEST_CASE("writes are atomic: a writer killed mid-write never leaves a torn file", "[safetensors][atomic]") {
  std::string dir = temp_dir();
  std::string path = dir + "/checkpoint.safetensors";
  Tensor small = full({16}, 1.0);
  save_safetensors(path, {{"w", small}});
  for (int attempt = 0; attempt < 4; ++attempt) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Rewrite a large file over and over until killed.
      Tensor big = full({8 << 20}, 2.0);
      for (;;) save_safetensors(path, {{"w", big}});
    }
    ::usleep(static_cast<useconds_t>(20000 + 30000 * attempt));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    SafetensorsFile file = load_safetensors(path);  // must parse: old or new, never partial
    const Tensor& w = file.at("w");
    double first = w[0].item<double>();
    REQUIRE((first == 1.0 || first == 2.0));
    REQUIRE(w.numel() == (first == 1.0 ? 16 : (8 << 20)));
  }
  // A write into a missing directory fails with the path in the message and creates nothing.
  REQUIRE_THROWS_WITH(save_safetensors(dir + "/missing/x.safetensors", {{"w", small}}),
                      Catch::Contains("missing/x.safetensors.tmp"));
  REQUIRE_THROWS_WITH(load_safetensors(dir + "/absent.safetensors"),
                      Catch::Contains("absent.safetensors") && Catch::Contains("No such file"));
  std::filesystem::remove_all(dir);
}

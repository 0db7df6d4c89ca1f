// The train tool's metrics log (tools/train/metrics_log.h): one JSON object per line in
// metrics.jsonl, appended across runs (a resumed run continues the file, minus the records past
// its checkpoint), the same scalars as
// "<kind>/<name>" TensorBoard events, null for non-finite values, nothing at all when disabled.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/io/json.h"
#include "tools/train/metrics_log.h"

using namespace ember;
using namespace ember::train;

namespace {

std::string temp_dir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<json::Value> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json::Value> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line, path));
  return lines;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path().string());
  }
  return files;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("metrics.jsonl holds one object per write, appended across runs", "[train][metrics]") {
  std::string dir = temp_dir("metrics") + "/nested/logs";  // created on demand
  {
    MetricsLog log(dir, true);
    log.write("step", 50, {{"loss", 2.25}, {"lr", 0.1}});
    log.write("epoch", 1, {{"test_accuracy", 0.5}, {"train_loss", 2.0}});
  }
  {
    MetricsLog resumed(dir, true);
    resumed.write("step", 100, {{"loss", std::numeric_limits<double>::quiet_NaN()}, {"lr", 0.05}});
  }
  std::vector<json::Value> lines = read_jsonl(dir + "/metrics.jsonl");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].find("kind")->as_string() == "step");
  CHECK(lines[0].find("step")->as_int() == 50);
  CHECK(lines[0].find("loss")->as_double() == 2.25);
  CHECK(lines[0].find("lr")->as_double() == 0.1);
  CHECK(lines[0].find("time")->as_double() > 1.5e9);
  CHECK(lines[1].find("kind")->as_string() == "epoch");
  CHECK(lines[1].find("step")->as_int() == 1);
  CHECK(lines[1].find("test_accuracy")->as_double() == 0.5);
  CHECK(lines[2].find("step")->as_int() == 100);
  CHECK(lines[2].find("loss")->kind() == json::Value::Kind::Null);  // NaN is not JSON
  CHECK(lines[2].find("lr")->as_double() == 0.05);

  // One event file per run, holding "<kind>/<name>" tags.
  std::vector<std::string> files = event_files(dir);
  REQUIRE(files.size() == 2);
  std::string events = read_all(files[0]) + read_all(files[1]);
  for (const char* tag : {"step/loss", "step/lr", "epoch/test_accuracy", "epoch/train_loss"}) {
    INFO(tag);
    CHECK(events.find(tag) != std::string::npos);
  }
}

TEST_CASE("A resumed log keeps one record per step: the dead run's records past the checkpoint go",
          "[train][metrics]") {
  std::string dir = temp_dir("metrics_resume");
  {
    MetricsLog crashed(dir, true);
    for (int64_t step = 1; step <= 7; ++step) crashed.write("step", step, {{"loss", 1.0 / step}});
    crashed.write("epoch", 4, {{"epoch", 1}, {"test_accuracy", 0.5}});
    crashed.write("stop", 7, {{"epoch", 2}, {"test_accuracy", 0.6}});
  }
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << R"({"kind":"step","st)";  // killed mid-write
  {
    MetricsLog resumed(dir, true, 4);
    resumed.write("step", 5, {{"loss", 0.25}});
  }
  std::vector<json::Value> lines = read_jsonl(dir + "/metrics.jsonl");
  std::vector<std::string> seen;
  for (const json::Value& line : lines)
    seen.push_back(line.find("kind")->as_string() + " " + std::to_string(line.find("step")->as_int()));
  CHECK(seen == std::vector<std::string>{"step 1", "step 2", "step 3", "step 4", "epoch 4", "resume 4", "step 5"});
  CHECK(lines.back().find("loss")->as_double() == 0.25);

  // The resumed run's event file opens with TensorBoard's restart marker at step 5: an Event with
  // step=5 (field 2) and session_log (field 7) = SessionLog{status: START}.
  std::vector<std::string> files = event_files(dir);
  REQUIRE(files.size() == 2);
  const std::string marker("\x10\x05\x3a\x02\x08\x01", 6);
  int markers = 0;
  for (const std::string& file : files) markers += read_all(file).find(marker) != std::string::npos;
  CHECK(markers == 1);
}

TEST_CASE("A resume with no earlier log starts a fresh one", "[train][metrics]") {
  std::string dir = temp_dir("metrics_resume_fresh");
  {
    MetricsLog resumed(dir, true, 40);
    resumed.write("step", 41, {{"loss", 0.5}});
  }
  std::vector<json::Value> lines = read_jsonl(dir + "/metrics.jsonl");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("step")->as_int() == 41);
}

TEST_CASE("A disabled log (another rank, or no --log-dir) writes nothing", "[train][metrics]") {
  std::string dir = temp_dir("metrics_off");
  MetricsLog off(dir, false);
  off.write("step", 1, {{"loss", 1.0}});
  CHECK_FALSE(std::filesystem::exists(dir));
  MetricsLog no_dir("", true);
  no_dir.write("step", 1, {{"loss", 1.0}});
}

TEST_CASE("An unusable --log-dir is named", "[train][metrics][errors]") {
  std::string file = temp_dir("metrics_file");
  std::ofstream(file) << "not a directory";
  CHECK_THROWS_WITH(MetricsLog(file + "/logs", true),
                    Catch::StartsWith("--log-dir: cannot create '" + file + "/logs'"));
}

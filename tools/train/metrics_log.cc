// JSONL lines are flushed as written, so a crashed run keeps everything logged before it. A
// resume rewrites the file atomically (a crash during it leaves the old file whole).
#include "tools/train/metrics_log.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/io/file_io.h"
#include "core/io/json.h"

namespace ember::train {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Keeps the records up to `step`, then appends a "resume" record at it. A line that does not
// parse (the last one of a run killed mid-write) is dropped too.
void truncate_after_step(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    try {
      const json::Value record = json::parse(line, path);
      const json::Value* at = record.find("step");
      if (at == nullptr || at->as_int() > step) continue;
    } catch (const Error&) {
      continue;
    }
    kept += line + "\n";
  }
  json::Value resume = json::Value::object();
  resume.set("kind", json::Value::string("resume"));
  resume.set("step", json::Value::integer(step));
  resume.set("time", json::Value::number(now_seconds()));
  kept += resume.dump() + "\n";
  write_file_atomic(path, std::vector<uint8_t>(kept.begin(), kept.end()));
}

}  // namespace

MetricsLog::MetricsLog(const std::string& directory, bool enabled, std::optional<int64_t> resumed_at_step) {
  if (!enabled || directory.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  EMBER_CHECK(!ec, "--log-dir: cannot create '", directory, "': ", ec.message());
  std::string path = directory + "/metrics.jsonl";
  if (resumed_at_step) truncate_after_step(path, *resumed_at_step);
  jsonl_ = std::fopen(path.c_str(), "a");
  EMBER_CHECK(jsonl_ != nullptr, "--log-dir: cannot open '", path, "': ", std::strerror(errno));
  events_ = std::make_unique<EventWriter>(directory);
  if (resumed_at_step) events_->add_session_start(*resumed_at_step + 1);
}

MetricsLog::~MetricsLog() {
  if (jsonl_) std::fclose(jsonl_);
}

void MetricsLog::write(const std::string& kind, int64_t step, const std::map<std::string, double>& values) {
  if (!jsonl_) return;
  json::Value line = json::Value::object();
  line.set("kind", json::Value::string(kind));
  line.set("step", json::Value::integer(step));
  line.set("time", json::Value::number(now_seconds()));
  for (const auto& [name, value] : values) {
    // JSON has no NaN or infinity (a diverged loss): those are written as null.
    line.set(name, std::isfinite(value) ? json::Value::number(value) : json::Value::null());
    events_->add_scalar(kind + "/" + name, static_cast<float>(value), step);
  }
  std::fprintf(jsonl_, "%s\n", line.dump().c_str());
  std::fflush(jsonl_);
  events_->flush();
}

}  // namespace ember::train

// JSONL lines are flushed as written, so a crashed run keeps everything logged before it.
#include "tools/train/metrics_log.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/json.h"

namespace ember::train {

MetricsLog::MetricsLog(const std::string& directory, bool enabled) {
  if (!enabled || directory.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  EMBER_CHECK(!ec, "--log-dir: cannot create '", directory, "': ", ec.message());
  std::string path = directory + "/metrics.jsonl";
  jsonl_ = std::fopen(path.c_str(), "a");
  EMBER_CHECK(jsonl_ != nullptr, "--log-dir: cannot open '", path, "': ", std::strerror(errno));
  events_ = std::make_unique<EventWriter>(directory);
}

MetricsLog::~MetricsLog() {
  if (jsonl_) std::fclose(jsonl_);
}

void MetricsLog::write(const std::string& kind, int64_t step, const std::map<std::string, double>& values) {
  if (!jsonl_) return;
  json::Value line = json::Value::object();
  line.set("kind", json::Value::string(kind));
  line.set("step", json::Value::integer(step));
  line.set("time", json::Value::number(std::chrono::duration<double>(
                                           std::chrono::system_clock::now().time_since_epoch()).count()));
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

#include "tools/launch/restart_log.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/io/json.h"
#include "tools/train/tfevents.h"

namespace ember::launch {

void log_restart(const std::string& log_dir, const RestartRecord& r) {
  if (log_dir.empty()) return;
  std::filesystem::create_directories(log_dir);
  json::Value line = json::Value::object();
  line.set("kind", json::Value::string("restart"));
  line.set("step", json::Value::integer(r.step));
  line.set("time", json::Value::number(
                       std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()));
  line.set("restart", json::Value::integer(r.restart));
  line.set("max_restarts", json::Value::integer(r.max_restarts));
  line.set("cause", json::Value::string(r.cause));
  line.set("world_size", json::Value::integer(r.world_size));
  line.set("hosts", json::Value::string(r.hosts));
  if (!r.dropped.empty()) line.set("dropped", json::Value::string(r.dropped));
  if (std::FILE* f = std::fopen((log_dir + "/metrics.jsonl").c_str(), "a")) {
    std::fprintf(f, "%s\n", line.dump().c_str());
    std::fclose(f);
  }
  train::EventWriter events(log_dir);
  events.add_text("launch/restart",
                  "restart " + std::to_string(r.restart) + " of " + std::to_string(r.max_restarts) + " at " +
                      r.time_text + ": the job ended with " + r.cause + "; resumed at step " + std::to_string(r.step) +
                      " with " + std::to_string(r.world_size) + " processes on " + r.hosts +
                      (r.dropped.empty() ? "" : " (" + r.dropped + " left out: no answer)"),
                  r.step);
}

}  // namespace ember::launch

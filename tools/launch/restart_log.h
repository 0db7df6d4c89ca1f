// Each restart of tools/launch in the job's --log-dir: a "restart" record in metrics.jsonl (at the
// step it resumes from, so the resumed run's own truncation of records past that step keeps it)
// and a text event for TensorBoard's Text tab.
#pragma once

#include <cstdint>
#include <string>

namespace ember::launch {

struct RestartRecord {
  int restart = 0, max_restarts = 0;
  std::string cause;      // how the job ended: "killed by signal 9 ..."
  int world_size = 0;     // of the restarted job
  std::string hosts;      // those it runs on
  std::string dropped;    // those left out, no longer answering
  int64_t step = 0;       // of the checkpoint it resumes from
  std::string time_text;  // local time, for the text event
};

// No-op without a log directory.
void log_restart(const std::string& log_dir, const RestartRecord& record);

}  // namespace ember::launch

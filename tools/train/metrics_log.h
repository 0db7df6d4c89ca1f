// Metrics on rank 0: one JSON object per line in <log-dir>/metrics.jsonl, and the same scalars in
// a TensorBoard event file. Inactive (every call a no-op) without a log directory.
//
// Every record's "step" is the global step it was taken at. A run resumed from a checkpoint at
// step S continues the logs of the run that saved it and keeps one record per step: records past
// S (written by that run after its checkpoint, before it crashed or was stopped) are dropped from
// metrics.jsonl, a "resume" record marks where the new run starts, and the new event file opens
// with TensorBoard's restart marker (SessionLog START at step S + 1), on which TensorBoard drops
// the older files' events from step S + 1 on.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tools/train/tfevents.h"

namespace ember::train {

class MetricsLog {
 public:
  // `resumed_at_step`: the step of the checkpoint this run resumed from, if it did.
  MetricsLog(const std::string& directory, bool enabled, std::optional<int64_t> resumed_at_step = std::nullopt);
  ~MetricsLog();
  // `kind` is "step", "epoch" (at the epoch's last step), or "stop" (an epoch cut short by
  // --max-steps); scalars are logged under "<kind>/<name>" in TensorBoard.
  void write(const std::string& kind, int64_t step, const std::map<std::string, double>& values);

 private:
  std::FILE* jsonl_ = nullptr;
  std::unique_ptr<EventWriter> events_;
};

}  // namespace ember::train

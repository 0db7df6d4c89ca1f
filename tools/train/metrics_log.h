// Metrics on rank 0: one JSON object per line in <log-dir>/metrics.jsonl, and the same scalars in
// a TensorBoard event file. Inactive (every call a no-op) without a log directory.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "tools/train/tfevents.h"

namespace ember::train {

class MetricsLog {
 public:
  MetricsLog(const std::string& directory, bool enabled);
  ~MetricsLog();
  // `kind` is "step", "epoch", or "stop" (an epoch cut short by --max-steps, at its global step);
  // scalars are logged under "<kind>/<name>" in TensorBoard.
  void write(const std::string& kind, int64_t step, const std::map<std::string, double>& values);

 private:
  std::FILE* jsonl_ = nullptr;
  std::unique_ptr<EventWriter> events_;
};

}  // namespace ember::train

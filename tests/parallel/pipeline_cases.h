// The schedules every pipeline test runs, one list for all: adding a schedule here runs it
// through the equivalence, concurrency and memory cases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline.h"

namespace ember::testing {

struct ScheduleCase {
  parallel::Schedule schedule;
  int64_t virtual_stages;
  std::string name() const {
    return std::string(parallel::schedule_name(schedule)) +
           (virtual_stages > 1 ? " v=" + std::to_string(virtual_stages) : std::string());
  }
  parallel::PipelineOptions options() const {
    parallel::PipelineOptions o;
    o.virtual_stages = virtual_stages;
    return o;
  }
};

inline const std::vector<ScheduleCase>& schedule_cases() {
  static const std::vector<ScheduleCase> cases = {
      {parallel::Schedule::kGPipe, 1}, {parallel::Schedule::k1F1B, 1}, {parallel::Schedule::kInterleaved1F1B, 2}};
  return cases;
}

}  // namespace ember::testing

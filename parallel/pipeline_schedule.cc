// The order in which each pipeline device runs its micro-batches' forwards and backwards.
//
// Why the lists cannot hang: a device only waits for a message that another device's list sends
// (a forward's input from the stage before, a backward's gradient from the stage after), and
// messages queue without bound, so a run hangs only if the lists' order dependencies form a cycle.
// GPipe and 1F1B have none for any m: every wait is on an action earlier in the sender's list than
// the waiter's is in its own. PyTorch's 1F1B hangs with fewer micro-batches than stages because
// its warm-up count ignores m; here it is min(p - 1 - i, m). Interleaved 1F1B switches chunk every
// group of p micro-batches, and Megatron-LM requires m % p == 0: a shorter group would make a
// device need a chunk's input before the last device can send it (with the warm-up unchanged,
// some lists then wait on each other). Here the lists are made for m rounded up to a multiple of p
// and the actions of the padding micro-batches dropped. Dropping whole micro-batches cannot make a
// cycle (each remaining wait was one in the full lists, whose order dependencies have none), so any
// m is as safe as a multiple of p. pipeline_schedule_test checks p <= 8, v <= 4, m <= 32, and the
// executor simulates each new (p, v, m) once and raises rather than run lists that would hang.
#include "parallel/pipeline_schedule.h"

#include <algorithm>

#include "core/error.h"

namespace ember::parallel {

const char* schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGPipe:
      return "gpipe";
    case Schedule::k1F1B:
      return "1f1b";
    case Schedule::kInterleaved1F1B:
      return "interleaved";
    case Schedule::kAuto:
      return "auto";
  }
  return "unknown";
}

namespace {

// Warm-up forwards, then one forward and the oldest pending backward in turn, then the rest of
// the backwards: at most warm-up + 1 (chunk, micro-batch) pairs are held.
std::vector<PipelineAction> one_forward_one_backward(const std::vector<PipelineAction>& forwards,
                                                     const std::vector<PipelineAction>& backwards, int64_t warmup) {
  std::vector<PipelineAction> actions;
  const size_t total = forwards.size();
  size_t next_forward = 0, next_backward = 0;
  for (; next_forward < std::min(total, static_cast<size_t>(warmup)); ++next_forward)
    actions.push_back(forwards[next_forward]);
  while (next_forward < total) {
    actions.push_back(forwards[next_forward++]);
    actions.push_back(backwards[next_backward++]);
  }
  while (next_backward < total) actions.push_back(backwards[next_backward++]);
  return actions;
}

}  // namespace

std::vector<PipelineAction> schedule_actions(Schedule schedule, int64_t device, int64_t devices, int64_t micro_batches,
                                             int64_t virtual_stages) {
  const char* name = schedule_name(schedule);
  EMBER_CHECK(devices >= 1 && device >= 0 && device < devices && micro_batches >= 1, "schedule_actions (", name,
              "): device ", device, " of ", devices, " with ", micro_batches, " micro-batches");
  EMBER_CHECK(virtual_stages >= 1, "schedule_actions (", name, "): virtual stages must be at least 1, got ",
              virtual_stages);
  const int64_t p = devices, m = micro_batches, v = virtual_stages;
  std::vector<PipelineAction> forwards, backwards;
  switch (schedule) {
    case Schedule::kGPipe: {
      for (int64_t c = 0; c < v; ++c)
        for (int64_t i = 0; i < m; ++i) forwards.push_back({i, false, c});
      // Last micro-batch of the last chunk first, as autograd would run GPipe's one graph.
      std::vector<PipelineAction> actions = forwards;
      for (auto it = forwards.rbegin(); it != forwards.rend(); ++it)
        actions.push_back({it->micro_batch, true, it->chunk});
      return actions;
    }
    case Schedule::k1F1B:
      EMBER_CHECK(v == 1, "schedule_actions (1f1b): one chunk per device (virtual stages 1), got ", v,
                  "; Schedule::kInterleaved1F1B runs several");
      for (int64_t i = 0; i < m; ++i) {
        forwards.push_back({i, false, 0});
        backwards.push_back({i, true, 0});
      }
      return one_forward_one_backward(forwards, backwards, std::min(p - 1 - device, m));
    case Schedule::kInterleaved1F1B:
      EMBER_CHECK(v >= 2, "schedule_actions (interleaved): at least 2 virtual stages (chunks per device), got ", v,
                  "; with 1 it is Schedule::k1F1B");
      for (int64_t begin = 0; begin < m; begin += p) {
        for (int64_t c = 0; c < v; ++c)
          for (int64_t i = begin; i < begin + p; ++i) forwards.push_back({i, false, c});
        for (int64_t c = v - 1; c >= 0; --c)
          for (int64_t i = begin; i < begin + p; ++i) backwards.push_back({i, true, c});
      }
      {
        // Enough forwards that the first backward's gradient (chunk v-1 of the first group, back
        // from the last device) is due when the warm-up ends.
        const std::vector<PipelineAction> padded =
            one_forward_one_backward(forwards, backwards, 2 * (p - 1 - device) + (v - 1) * p);
        std::vector<PipelineAction> actions;
        for (const PipelineAction& a : padded)
          if (a.micro_batch < m) actions.push_back(a);
        return actions;
      }
    case Schedule::kAuto:
      break;
  }
  EMBER_FAIL("schedule_actions: Schedule::kAuto has no lists of its own; the Pipeline picks a schedule first");
}

std::vector<std::vector<PipelineAction>> per_device_actions(Schedule schedule, int64_t devices, int64_t micro_batches,
                                                            int64_t virtual_stages) {
  std::vector<std::vector<PipelineAction>> lists;
  for (int64_t d = 0; d < devices; ++d)
    lists.push_back(schedule_actions(schedule, d, devices, micro_batches, virtual_stages));
  return lists;
}

}  // namespace ember::parallel

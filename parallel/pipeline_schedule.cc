// The order in which each pipeline stage runs its micro-batches' forwards and backwards.
//
// Why any number of micro-batches is safe: a stage's list only waits for messages that the
// neighbour's list sends earlier in its own order (a forward's input from the stage before, a
// backward's gradient from the stage after), and messages queue without bound, so no stage can
// wait on one that waits on it. PyTorch's 1F1B hangs with fewer micro-batches than stages because
// its warm-up count ignores m; here it is min(p - 1 - i, m).
#include "parallel/pipeline.h"

namespace ember::parallel {

const char* schedule_name(Schedule schedule) { return schedule == Schedule::kGPipe ? "gpipe" : "1f1b"; }

std::vector<PipelineAction> schedule_actions(Schedule schedule, int64_t stage, int64_t stages, int64_t micro_batches) {
  EMBER_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "schedule_actions: stage ", stage,
              " of ", stages, " with ", micro_batches, " micro-batches");
  std::vector<PipelineAction> actions;
  if (schedule == Schedule::kGPipe) {
    for (int64_t i = 0; i < micro_batches; ++i) actions.push_back({i, false});
    // Last micro-batch first, as autograd would run GPipe's one graph.
    for (int64_t i = micro_batches - 1; i >= 0; --i) actions.push_back({i, true});
    return actions;
  }
  // 1F1B: the warm-up forwards fill the pipeline below this stage; then each forward is followed
  // by the oldest pending backward, so at most warm-up + 1 = p - i micro-batches are held.
  const int64_t warmup = std::min(stages - 1 - stage, micro_batches);
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) actions.push_back({next_forward, false});
  while (next_forward < micro_batches) {
    actions.push_back({next_forward++, false});
    actions.push_back({next_backward++, true});
  }
  while (next_backward < micro_batches) actions.push_back({next_backward++, true});
  return actions;
}

}  // namespace ember::parallel

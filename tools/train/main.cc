// `train`: the main job. Parses flags (bad input: a message and exit status 2; a missing or
// unreadable dataset: 66), runs the training,
// and ends with one summary line. Under mpirun an error on any rank ends the whole job. Ctrl-C is
// taken by a thread of its own (tools/train/interrupt.h), started before any other.
#include <cstdio>
#include <exception>

#include "comm/init.h"
#include "tools/train/config.h"
#include "tools/train/interrupt.h"
#include "tools/train/trainer.h"

int main(int argc, char** argv) {
  using namespace ember::train;
  start_interrupt_watcher();  // first: every thread started later (loaders, devices, MPI) blocks SIGINT
  Flags flags = make_flags();
  TrainConfig config;
  try {
    if (!flags.parse(argc, argv)) {
      std::printf("%s", flags.help_text().c_str());
      return 0;
    }
    config = config_from(flags);
  } catch (const FlagError& e) {
    std::fprintf(stderr, "train: %s\n", e.what());
    return 2;
  }
  try {
    TrainResult r = run_training(config);
    if (r.rank == 0) {
      char test[64] = "test_accuracy=none test_loss=none";  // nothing evaluated: no --val-dir
      if (r.evaluated)
        std::snprintf(test, sizeof test, "test_accuracy=%.4f test_loss=%.4f", r.test_accuracy, r.test_loss);
      std::printf("train: %s train_seconds=%.1f epochs=%lld steps=%lld processes=%d%s\n", test, r.train_seconds,
                  static_cast<long long>(r.epochs), static_cast<long long>(r.steps), r.world_size,
                  r.interrupted ? " interrupted=1" : "");
    }
    return r.interrupted ? 130 : 0;
  } catch (const std::exception& e) {
    const int status = dynamic_cast<const DataError*>(&e) ? kExitDataError : 1;
    if (ember::comm::is_initialized()) ember::comm::abort_job(std::string("train: error: ") + e.what(), status);
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return status;
  }
}

// Training progress on rank 0: a live bar on a terminal (epoch, step, loss, the loss scale of
// float16 training, images/s, ETA), or one plain line every N steps when stdout is a file or pipe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ember::train {

class Progress {
 public:
  // `mode`: "bar", "lines", or "auto" (a bar when stdout is a terminal).
  Progress(bool enabled, int64_t log_every, const std::string& mode = "auto");
  void start_epoch(int64_t epoch, int64_t epochs, int64_t steps_in_epoch);
  // After each step: the step index inside the epoch (1-based), its loss and batch size.
  void step(int64_t step, double loss, int64_t batch_size);
  void end_epoch();
  // The training device's peak allocated memory, shown from then on (GPUs only).
  void set_device_peak(int64_t bytes) { device_peak_ = bytes; }
  // The gradient scaler's loss scale (--amp fp16), shown after the loss from then on.
  void set_loss_scale(double scale) { loss_scale_ = scale; }
  bool interactive() const { return interactive_; }

 private:
  void draw(int64_t step, double loss);
  bool enabled_, interactive_;
  int64_t log_every_;
  int64_t epoch_ = 0, epochs_ = 0, steps_ = 0;
  int64_t images_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  std::chrono::steady_clock::time_point epoch_start_, window_start_;
  int64_t window_images_ = 0;
  double rate_ = 0;
  int64_t device_peak_ = -1;
  double loss_scale_ = -1;
};

}  // namespace ember::train

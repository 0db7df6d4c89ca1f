// The progress bar: redraws one line with \r on a terminal; prints whole lines otherwise.
#include "tools/train/progress.h"

#include <unistd.h>

#include <cstdio>

namespace ember::train {

namespace {
std::string clock_text(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "--:--";
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%02d:%02d", s / 60, s % 60);
  return buf;
}
}  // namespace

Progress::Progress(bool enabled, int64_t log_every, const std::string& mode)
    : enabled_(enabled),
      interactive_(enabled && (mode == "bar" || (mode == "auto" && ::isatty(1)))),
      log_every_(log_every > 0 ? log_every : 50) {}

void Progress::start_epoch(int64_t epoch, int64_t epochs, int64_t steps_in_epoch) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps_in_epoch;
  images_ = 0;
  loss_sum_ = 0;
  loss_count_ = 0;
  epoch_start_ = window_start_ = std::chrono::steady_clock::now();
  window_images_ = 0;
  rate_ = 0;
}

void Progress::step(int64_t step, double loss, int64_t batch_size) {
  images_ += batch_size;
  window_images_ += batch_size;
  loss_sum_ += loss;
  ++loss_count_;
  auto now = std::chrono::steady_clock::now();
  double window = std::chrono::duration<double>(now - window_start_).count();
  if (window >= 1.0 || step == steps_) {
    // Images/s over the last second or so: responsive, but not jumpy per step.
    rate_ = window > 0 ? window_images_ / window : rate_;
    window_start_ = now;
    window_images_ = 0;
  } else if (rate_ == 0) {
    double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
    if (elapsed > 0) rate_ = images_ / elapsed;  // until the first full window
    window_start_ = now;
    window_images_ = 0;
  }
  if (!enabled_) return;
  if (interactive_ || step % log_every_ == 0 || step == steps_) draw(step, loss);
}

void Progress::draw(int64_t step, double loss) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  double per_step = step > 0 ? elapsed / step : 0;
  double eta = per_step * (steps_ - step);
  double mean_loss = loss_count_ ? loss_sum_ / loss_count_ : 0;
  char memory[48] = "";
  if (device_peak_ >= 0) std::snprintf(memory, sizeof(memory), " peak mem %.2f GiB", device_peak_ / 1073741824.0);
  char scale[40] = "";  // powers of two: whole numbers in full, fractions after backoffs below 1
  if (loss_scale_ >= 0) std::snprintf(scale, sizeof(scale), " scale %.9g", loss_scale_);
  if (interactive_) {
    const int width = 24;
    int filled = steps_ > 0 ? static_cast<int>(width * step / steps_) : 0;
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    std::printf("\repoch %lld/%lld [%s] %lld/%lld loss %.4f (avg %.4f)%s %.0f img/s%s ETA %s   ",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), loss, mean_loss, scale, rate_, memory,
                clock_text(eta).c_str());
  } else {
    std::printf("epoch %lld/%lld step %lld/%lld loss %.4f (avg %.4f)%s %.0f img/s%s ETA %s\n",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), static_cast<long long>(step),
                static_cast<long long>(steps_), loss, mean_loss, scale, rate_, memory, clock_text(eta).c_str());
  }
  std::fflush(stdout);
}

void Progress::end_epoch() {
  if (enabled_ && interactive_) std::printf("\n");
}

}  // namespace ember::train

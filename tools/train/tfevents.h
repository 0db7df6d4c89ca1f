// TensorBoard event files written by Ember itself: TFRecord framing (length + masked CRC32C,
// payload + masked CRC32C) around hand-encoded `Event` protobufs carrying scalar and text summaries.
// TensorBoard reads them from the --log-dir (see tools/train/check_tensorboard.py).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ember::train {

// CRC-32C (Castagnoli), and TFRecord's rotated-and-offset mask of it.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

class EventWriter {
 public:
  // Creates <directory>/events.out.tfevents.<seconds>.<host>.<pid>.<n> and writes the version record.
  explicit EventWriter(const std::string& directory);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void add_scalar(const std::string& tag, float value, int64_t step);
  // TensorBoard's restart marker (SessionLog START): on reading it, TensorBoard drops the events
  // of earlier files at `step` and later, the ones a crashed run logged past its checkpoint.
  void add_session_start(int64_t step);
  // A text summary (TensorBoard's Text tab): tools/launch's restarts.
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace ember::train

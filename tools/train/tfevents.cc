// Protobuf wire encoding by hand (varints, fixed64/fixed32, length-delimited) for the three
// messages TensorBoard needs: Event{wall_time=1, step=2, file_version=3, summary=5,
// session_log=7}, Summary{value=1}, Summary.Value{tag=1, simple_value=2, tensor=8, metadata=9},
// SessionLog{status=1}, and for text TensorProto{dtype=1, tensor_shape=2, string_val=8} with
// SummaryMetadata{plugin_data=1: PluginData{plugin_name=1}}.
#include "tools/train/tfevents.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace ember::train {

namespace {

const uint32_t* crc_table() {
  static uint32_t table[256];
  static bool ready = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
      table[i] = c;
    }
    return true;
  }();
  (void)ready;
  return table;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_fixed(std::string& out, const void* data, size_t size) {
  // Little-endian on every platform Ember builds for.
  out.append(static_cast<const char*>(data), size);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_varint(out, (field << 3) | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(int64_t step) {
  std::string event;
  double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  put_varint(event, (1 << 3) | 1);
  put_fixed(event, &wall, 8);
  put_varint(event, (2 << 3) | 0);
  put_varint(event, static_cast<uint64_t>(step));
  return event;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const uint32_t* table = crc_table();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

EventWriter::EventWriter(const std::string& directory) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  long seconds = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  // The pid and a per-process count keep a second writer in the same second (a resumed run, or a
  // test) from truncating the first one's file, as TensorFlow's own names do.
  static std::atomic<int> writers{0};
  path_ = directory + "/events.out.tfevents." + std::to_string(seconds) + "." + host + "." +
          std::to_string(::getpid()) + "." + std::to_string(writers++);
  file_ = std::fopen(path_.c_str(), "wb");
  EMBER_CHECK(file_ != nullptr, "EventWriter: cannot create '", path_, "': ", std::strerror(errno));
  std::string event = event_header(0);
  put_bytes(event, 3, "brain.Event:2");
  write_record(event);
  flush();
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_varint(summary_value, (2 << 3) | 5);
  put_fixed(summary_value, &value, 4);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(step);
  put_bytes(event, 5, summary);
  write_record(event);
}

void EventWriter::add_session_start(int64_t step) {
  constexpr uint64_t kStart = 1;  // SessionLog.SessionStatus.START
  std::string session_log;
  put_varint(session_log, (1 << 3) | 0);
  put_varint(session_log, kStart);
  std::string event = event_header(step);
  put_bytes(event, 7, session_log);
  write_record(event);
  flush();
}

void EventWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  constexpr uint64_t kString = 7;  // DataType.DT_STRING
  std::string tensor;
  put_varint(tensor, (1 << 3) | 0);
  put_varint(tensor, kString);
  put_bytes(tensor, 2, "");  // a scalar: a shape with no dimensions
  put_bytes(tensor, 8, text);
  std::string plugin_data;
  put_bytes(plugin_data, 1, "text");
  std::string metadata;
  put_bytes(metadata, 1, plugin_data);
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_bytes(summary_value, 8, tensor);
  put_bytes(summary_value, 9, metadata);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(step);
  put_bytes(event, 5, summary);
  write_record(event);
  flush();
}

void EventWriter::write_record(const std::string& payload) {
  uint64_t length = payload.size();
  uint32_t length_crc = masked_crc32c(&length, 8);
  uint32_t payload_crc = masked_crc32c(payload.data(), payload.size());
  bool ok = std::fwrite(&length, 8, 1, file_) == 1 && std::fwrite(&length_crc, 4, 1, file_) == 1 &&
            std::fwrite(payload.data(), 1, payload.size(), file_) == payload.size() &&
            std::fwrite(&payload_crc, 4, 1, file_) == 1;
  EMBER_CHECK(ok, "EventWriter: writing '", path_, "' failed: ", std::strerror(errno));
}

void EventWriter::flush() { std::fflush(file_); }

}  // namespace ember::train

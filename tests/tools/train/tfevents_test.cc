// TensorBoard event files written by Ember (tools/train/tfevents.h): CRC-32C against the standard
// check values and TensorBoard's own masked_crc32c (tensorboard.compat.tensorflow_stub), and a
// file read back record by record (length, masked CRCs, Event protobuf fields).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tools/train/tfevents.h"

using namespace ember::train;

namespace {

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }
uint32_t masked_of(const std::string& s) { return masked_crc32c(s.data(), s.size()); }

std::string temp_dir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// TFRecord framing: uint64 length, masked CRC of the length, payload, masked CRC of the payload.
std::vector<std::string> read_records(const std::string& bytes) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < bytes.size()) {
    REQUIRE(bytes.size() - pos >= 12);
    uint64_t length;
    uint32_t length_crc, payload_crc;
    std::memcpy(&length, bytes.data() + pos, 8);
    std::memcpy(&length_crc, bytes.data() + pos + 8, 4);
    CHECK(length_crc == masked_crc32c(bytes.data() + pos, 8));
    REQUIRE(bytes.size() - pos >= 16 + length);
    std::string payload = bytes.substr(pos + 12, length);
    std::memcpy(&payload_crc, bytes.data() + pos + 12 + length, 4);
    CHECK(payload_crc == masked_of(payload));
    records.push_back(payload);
    pos += 16 + length;
  }
  return records;
}

// A protobuf message as (field number, wire type, varint value or bytes) triples.
struct Field {
  uint32_t number, wire_type;
  uint64_t varint = 0;
  std::string bytes;  // length-delimited, fixed32 and fixed64 payloads
};

uint64_t read_varint(const std::string& m, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    REQUIRE(pos < m.size());
    uint8_t b = static_cast<uint8_t>(m[pos++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
}

std::vector<Field> decode(const std::string& m) {
  std::vector<Field> fields;
  size_t pos = 0;
  while (pos < m.size()) {
    uint64_t key = read_varint(m, pos);
    Field f{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
    size_t size = 0;
    switch (f.wire_type) {
      case 0:
        f.varint = read_varint(m, pos);
        break;
      case 1:
        size = 8;
        break;
      case 2:
        size = read_varint(m, pos);
        break;
      case 5:
        size = 4;
        break;
      default:
        FAIL("unexpected wire type " << f.wire_type);
    }
    if (f.wire_type != 0) {
      REQUIRE(m.size() - pos >= size);
      f.bytes = m.substr(pos, size);
      pos += size;
    }
    fields.push_back(f);
  }
  return fields;
}

const Field& field(const std::vector<Field>& fields, uint32_t number) {
  for (const Field& f : fields)
    if (f.number == number) return f;
  FAIL("no field " << number);
  return fields.front();
}

}  // namespace

TEST_CASE("CRC-32C check values and TFRecord's mask", "[train][tfevents]") {
  CHECK(crc_of("123456789") == 0xE3069283u);  // the CRC catalogue's check value for CRC-32C
  CHECK(crc_of("") == 0u);
  // RFC 3720 (iSCSI) B.4: 32 zero bytes, 32 0xFF bytes, 32 ascending bytes.
  CHECK(crc_of(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc_of(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(crc_of(ascending) == 0x46DD794Eu);
  // TensorBoard's masked_crc32c on the same inputs.
  CHECK(masked_of("123456789") == 0xC78AB0E5u);
  CHECK(masked_of("") == 0xA282EAD8u);
  CHECK(masked_of(std::string(32, '\0')) == 0x0FD7FFFAu);
  CHECK(masked_of(std::string(32, '\xff')) == 0xF909B029u);
  CHECK(masked_of(ascending) == 0x951F7892u);
  const uint64_t length = 26;  // a record header: the little-endian payload length
  CHECK(masked_crc32c(&length, 8) == 0x2DD89B12u);
}

TEST_CASE("An event file reads back: version record, then scalar events with step, tag and value",
          "[train][tfevents]") {
  std::string dir = temp_dir("tfevents");
  std::string path;
  {
    EventWriter writer(dir);
    path = writer.path();
    writer.add_scalar("step/loss", 2.5f, 7);
    writer.add_scalar("epoch/test_accuracy", 0.875f, 1);
    writer.flush();
  }
  CHECK_THAT(path, Catch::StartsWith(dir + "/events.out.tfevents."));
  std::vector<std::string> records = read_records(read_all(path));
  REQUIRE(records.size() == 3);

  std::vector<Field> version = decode(records[0]);
  CHECK(field(version, 1).wire_type == 1);  // wall_time: a double
  double wall_time;
  std::memcpy(&wall_time, field(version, 1).bytes.data(), 8);
  CHECK(wall_time > 1.5e9);
  CHECK(field(version, 3).bytes == "brain.Event:2");

  struct Expected {
    int64_t step;
    const char* tag;
    float value;
  };
  const Expected expected[] = {{7, "step/loss", 2.5f}, {1, "epoch/test_accuracy", 0.875f}};
  for (int i = 0; i < 2; ++i) {
    std::vector<Field> event = decode(records[i + 1]);
    CHECK(field(event, 2).varint == static_cast<uint64_t>(expected[i].step));
    std::vector<Field> summary = decode(field(event, 5).bytes);
    REQUIRE(summary.size() == 1);
    std::vector<Field> value = decode(field(summary, 1).bytes);
    CHECK(field(value, 1).bytes == expected[i].tag);
    REQUIRE(field(value, 2).wire_type == 5);  // simple_value: a float
    float v;
    std::memcpy(&v, field(value, 2).bytes.data(), 4);
    CHECK(v == expected[i].value);
  }
}

TEST_CASE("The restart marker is an event holding SessionLog{status: START} at its step", "[train][tfevents]") {
  std::string dir = temp_dir("tfevents_restart");
  std::string path;
  {
    EventWriter writer(dir);
    path = writer.path();
    writer.add_session_start(241);
  }
  std::vector<std::string> records = read_records(read_all(path));
  REQUIRE(records.size() == 2);
  std::vector<Field> event = decode(records[1]);
  CHECK(field(event, 2).varint == 241);
  std::vector<Field> session_log = decode(field(event, 7).bytes);
  REQUIRE(session_log.size() == 1);
  CHECK(field(session_log, 1).varint == 1);  // SessionLog.START
  // After the wall time (field 1, 9 bytes): the bytes TensorBoard's own protobuf classes give for
  // event_pb2.Event(step=241, session_log=SessionLog(status=START)).SerializeToString().
  REQUIRE(records[1].size() > 9);
  CHECK(records[1].substr(9) == std::string("\x10\xf1\x01\x3a\x02\x08\x01", 7));
}

TEST_CASE("A text event: a string tensor under the text plugin, at its step", "[train][tfevents]") {
  std::string dir = temp_dir("tfevents_text");
  std::string path;
  {
    EventWriter writer(dir);
    path = writer.path();
    writer.add_text("launch/restart", "restart 1 of 2: exit 137", 57);
  }
  std::vector<std::string> records = read_records(read_all(path));
  REQUIRE(records.size() == 2);
  std::vector<Field> event = decode(records[1]);
  CHECK(field(event, 2).varint == 57);
  std::vector<Field> value = decode(field(decode(field(event, 5).bytes), 1).bytes);
  CHECK(field(value, 1).bytes == "launch/restart");
  std::vector<Field> tensor = decode(field(value, 8).bytes);
  CHECK(field(tensor, 1).varint == 7);    // DT_STRING
  CHECK(field(tensor, 2).bytes.empty());  // a scalar
  CHECK(field(tensor, 8).bytes == "restart 1 of 2: exit 137");
  std::vector<Field> plugin = decode(field(decode(field(value, 9).bytes), 1).bytes);
  CHECK(field(plugin, 1).bytes == "text");
}

TEST_CASE("Two writers in one directory and second write to separate files", "[train][tfevents]") {
  std::string dir = temp_dir("tfevents_two");
  EventWriter first(dir), second(dir);
  CHECK(first.path() != second.path());
  first.add_scalar("a", 1.0f, 1);
  first.flush();
  second.flush();
  CHECK(read_records(read_all(first.path())).size() == 2);
  CHECK(read_records(read_all(second.path())).size() == 1);
}

TEST_CASE("EventWriter names the directory it cannot write", "[train][tfevents][errors]") {
  CHECK_THROWS_WITH(EventWriter("/nonexistent-dir/logs"),
                    Catch::StartsWith("EventWriter: cannot create '/nonexistent-dir/logs/events.out.tfevents."));
}

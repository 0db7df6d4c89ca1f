// safetensors encode/decode. Decoding treats the file as hostile: header length bounded by the
// file, JSON strictly parsed, every entry's dtype/shape/offsets checked (byte count = numel x
// element size, in bounds, no overlaps, no gaps), before any byte is copied.
#include "core/io/safetensors.h"

#include <algorithm>
#include <cstring>

#include "core/factory.h"
#include "core/io/file_io.h"
#include "core/io/json.h"

namespace ember {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

const char* safetensors_dtype(DType d) {
  switch (d) {
    case kFloat32:
      return "F32";
    case kFloat64:
      return "F64";
    case kBFloat16:
      return "BF16";
    case kFloat16:
      return "F16";
    case kInt64:
      return "I64";
    case kInt32:
      return "I32";
    case kUInt8:
      return "U8";
    case kBool:
      return "BOOL";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> table[] = {{"F32", kFloat32}, {"F64", kFloat64}, {"BF16", kBFloat16},
                                                        {"F16", kFloat16}, {"I64", kInt64},   {"I32", kInt32},
                                                        {"U8", kUInt8},    {"BOOL", kBool}};
  for (const auto& [name, dtype] : table)
    if (s == name) {
      *out = dtype;
      return true;
    }
  return false;
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [key, t] : tensors)
    if (key == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const Tensor* t = find(name);
  EMBER_CHECK(t != nullptr, "safetensors: no tensor named '", name, "' in the file");
  return *t;
}

std::vector<uint8_t> serialize_safetensors(const NamedTensors& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value meta = json::Value::object();
    for (const auto& [k, v] : metadata) meta.set(k, json::Value::string(v));
    header.set("__metadata__", std::move(meta));
  }
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK(!name.empty() && name != "__metadata__", "save_safetensors: invalid tensor name '", name, "'");
    EMBER_CHECK(header.find(name) == nullptr, "save_safetensors: duplicate tensor name '", name, "'");
    Tensor c = t.detach().to(Device(kCPU)).contiguous();
    json::Value shape = json::Value::array();
    for (int64_t s : c.sizes()) shape.items().push_back(json::Value::integer(s));
    json::Value entry = json::Value::object();
    entry.set("dtype", json::Value::string(safetensors_dtype(c.dtype())));
    entry.set("shape", std::move(shape));
    json::Value offsets = json::Value::array({json::Value::integer(static_cast<int64_t>(offset)),
                                              json::Value::integer(static_cast<int64_t>(offset + c.nbytes()))});
    entry.set("data_offsets", std::move(offsets));
    header.set(name, std::move(entry));
    offset += c.nbytes();
    host.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes, as the reference writer does
  std::vector<uint8_t> out(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* data = out.data() + 8 + text.size();
  for (const Tensor& c : host) {
    if (c.nbytes() > 0) std::memcpy(data, c.data_ptr(), c.nbytes());
    data += c.nbytes();
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

SafetensorsFile parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source) {
  EMBER_CHECK(size >= 8, "load_safetensors: '", source, "' is too short to be a safetensors file (", size,
              " bytes, need at least 8)");
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  EMBER_CHECK(header_size <= kMaxHeaderBytes, "load_safetensors: '", source, "': header length ", header_size,
              " exceeds the 100 MB limit");
  EMBER_CHECK(header_size <= size - 8, "load_safetensors: '", source, "': header length ", header_size,
              " runs past the end of the file (", size, " bytes): the file is truncated or not safetensors");
  std::string text(reinterpret_cast<const char*>(bytes + 8), header_size);
  json::Value header = json::parse(text, "load_safetensors: '" + source + "' header");
  EMBER_CHECK(header.is_object(), "load_safetensors: '", source, "': the header must be a JSON object");
  const uint8_t* data = bytes + 8 + header_size;
  const uint64_t data_size = size - 8 - header_size;

  SafetensorsFile file;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.members()) {
    if (name == "__metadata__") {
      EMBER_CHECK(value.is_object(), "load_safetensors: '", source, "': __metadata__ must be an object of strings");
      for (const auto& [k, v] : value.members()) {
        EMBER_CHECK(v.is_string(), "load_safetensors: '", source, "': metadata value for '", k, "' is not a string");
        file.metadata[k] = v.as_string();
      }
      continue;
    }
    auto where = "load_safetensors: '" + source + "', tensor '" + name + "': ";
    EMBER_CHECK(value.is_object(), where, "entry must be an object");
    const json::Value* dtype = value.find("dtype");
    const json::Value* shape = value.find("shape");
    const json::Value* offsets = value.find("data_offsets");
    EMBER_CHECK(dtype && dtype->is_string(), where, "missing or non-string \"dtype\"");
    EMBER_CHECK(shape && shape->is_array(), where, "missing or non-array \"shape\"");
    EMBER_CHECK(offsets && offsets->is_array() && offsets->items().size() == 2, where,
                "\"data_offsets\" must be an array of two integers");
    Entry e;
    e.name = name;
    EMBER_CHECK(parse_dtype(dtype->as_string(), &e.dtype), where, "unsupported dtype \"", dtype->as_string(),
                "\" (supported: F32 F64 BF16 F16 I64 I32 U8 BOOL)");
    // Bounded in bytes, not elements, so that numel x element size below cannot wrap around.
    const uint64_t max_numel = (uint64_t(1) << 62) / element_size(e.dtype);
    uint64_t numel = 1;
    for (const json::Value& d : shape->items()) {
      EMBER_CHECK(d.is_integer() && d.as_int() >= 0, where, "shape entries must be non-negative integers");
      uint64_t dim = static_cast<uint64_t>(d.as_int());
      EMBER_CHECK(dim == 0 || numel <= max_numel / dim, where, "shape overflows 2^62 bytes of ", dtype->as_string());
      numel *= dim;
      e.shape.push_back(d.as_int());
    }
    EMBER_CHECK(e.shape.size() <= 16, where, "more than 16 dimensions");
    for (const json::Value& o : offsets->items())
      EMBER_CHECK(o.is_integer() && o.as_int() >= 0, where, "data_offsets must be non-negative integers");
    e.begin = static_cast<uint64_t>(offsets->items()[0].as_int());
    e.end = static_cast<uint64_t>(offsets->items()[1].as_int());
    EMBER_CHECK(e.begin <= e.end, where, "data_offsets [", e.begin, ", ", e.end,
                ") are reversed: the begin offset must not exceed the end offset");
    EMBER_CHECK(e.end <= data_size, where, "data_offsets [", e.begin, ", ", e.end, ") lie outside the data section of ",
                data_size, " bytes (truncated file?)");
    uint64_t expected = numel * element_size(e.dtype);
    EMBER_CHECK(e.end - e.begin == expected, where, "data_offsets span ", e.end - e.begin, " bytes but dtype ",
                dtype->as_string(), " and shape ", shape_str(e.shape), " need ", expected);
    entries.push_back(std::move(e));
  }
  // The data section must be covered exactly once: no overlaps, no holes.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t cursor = 0;
  for (const Entry& e : entries) {
    EMBER_CHECK(e.begin == cursor, "load_safetensors: '", source, "', tensor '", e.name, "': data starts at byte ",
                e.begin, " but the previous tensor ends at ", cursor, " (overlapping or missing data)");
    cursor = e.end;
  }
  EMBER_CHECK(cursor == data_size, "load_safetensors: '", source, "': ", data_size - cursor,
              " trailing bytes after the last tensor");
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype));
    if (t.nbytes() > 0) std::memcpy(t.data_ptr(), data + e.begin, t.nbytes());
    if (e.dtype == kBool) {  // any byte other than 0/1 would be undefined behaviour as a C++ bool
      uint8_t* raw = static_cast<uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < t.nbytes(); ++i)
        EMBER_CHECK(raw[i] <= 1, "load_safetensors: '", source, "', tensor '", e.name, "': BOOL byte ", int(raw[i]),
                    " is neither 0 nor 1");
    }
    file.tensors.emplace_back(e.name, t);
  }
  return file;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

}  // namespace ember

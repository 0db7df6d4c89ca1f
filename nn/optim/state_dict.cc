// StateDict <-> safetensors bytes, and strict readers for its JSON.
#include "nn/optim/state_dict.h"

#include <map>

#include "core/error.h"

namespace ember::optim {

namespace {
const char* const kMetadataKey = "ember.state";
}

std::vector<uint8_t> serialize_state_dict(const StateDict& state) {
  return serialize_safetensors(state.tensors, {{kMetadataKey, state.json.dump()}});
}

StateDict parse_state_dict(const uint8_t* data, size_t size, const std::string& source) {
  SafetensorsFile file = parse_safetensors(data, size, source);
  auto it = file.metadata.find(kMetadataKey);
  EMBER_CHECK(it != file.metadata.end(), "parse_state_dict: '", source, "' has no \"", kMetadataKey,
              "\" metadata entry; it was not written by serialize_state_dict");
  StateDict state;
  state.tensors = std::move(file.tensors);
  state.json = json::parse(it->second, source + " (" + kMetadataKey + ")");
  return state;
}

const json::Value& json_member(const json::Value& object, const std::string& key, const std::string& where) {
  EMBER_CHECK(object.is_object(), where, ": expected a JSON object, got ", object.dump());
  const json::Value* value = object.find(key);
  EMBER_CHECK(value != nullptr, where, ": missing key \"", key, "\" in ", object.dump());
  return *value;
}

double json_number(const json::Value& object, const std::string& key, const std::string& where) {
  const json::Value& value = json_member(object, key, where);
  EMBER_CHECK(value.is_number(), where, ": expected \"", key, "\" to be a number, got ", value.dump());
  return value.as_double();
}

int64_t json_int(const json::Value& object, const std::string& key, const std::string& where) {
  const json::Value& value = json_member(object, key, where);
  EMBER_CHECK(value.is_integer(), where, ": expected \"", key, "\" to be an integer, got ", value.dump());
  return value.as_int();
}

bool json_bool(const json::Value& object, const std::string& key, const std::string& where) {
  const json::Value& value = json_member(object, key, where);
  EMBER_CHECK(value.kind() == json::Value::Kind::Bool, where, ": expected \"", key, "\" to be true or false, got ",
              value.dump());
  return value.as_bool();
}

std::vector<double> json_numbers(const json::Value& object, const std::string& key, const std::string& where) {
  const json::Value& value = json_member(object, key, where);
  EMBER_CHECK(value.is_array(), where, ": expected \"", key, "\" to be an array of numbers, got ", value.dump());
  std::vector<double> numbers;
  for (const json::Value& item : value.items()) {
    EMBER_CHECK(item.is_number(), where, ": expected \"", key, "\" to be an array of numbers, got ", value.dump());
    numbers.push_back(item.as_double());
  }
  return numbers;
}

json::Value json_array(const std::vector<double>& values) {
  json::Value array = json::Value::array();
  for (double v : values) array.items().push_back(json::Value::number(v));
  return array;
}

}  // namespace ember::optim

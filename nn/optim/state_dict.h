// StateDict: what optimizers and LR schedulers save, as named tensors plus one JSON value for the
// rest (hyper-parameters, step counts). It fits a safetensors file: the JSON travels in the header
// metadata under "ember.state".
//
//   ember::optim::StateDict saved = optimizer.state_dict();
//   std::vector<uint8_t> bytes = ember::optim::serialize_state_dict(saved);
//   optimizer.load_state_dict(ember::optim::parse_state_dict(bytes.data(), bytes.size(), "ckpt"));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/json.h"
#include "core/io/safetensors.h"

namespace ember::optim {

struct StateDict {
  NamedTensors tensors;
  json::Value json = json::Value::object();
};

std::vector<uint8_t> serialize_state_dict(const StateDict& state);
// `source` names the data in error messages.
StateDict parse_state_dict(const uint8_t* data, size_t size, const std::string& source);

// Readers for JSON objects that raise naming `where` and the key when it is missing or mistyped.
const json::Value& json_member(const json::Value& object, const std::string& key, const std::string& where);
double json_number(const json::Value& object, const std::string& key, const std::string& where);
int64_t json_int(const json::Value& object, const std::string& key, const std::string& where);
bool json_bool(const json::Value& object, const std::string& key, const std::string& where);
std::vector<double> json_numbers(const json::Value& object, const std::string& key, const std::string& where);
json::Value json_array(const std::vector<double>& values);

}  // namespace ember::optim

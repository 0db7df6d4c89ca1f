// A small, strict JSON reader and writer for file headers (safetensors, checkpoints). Input is
// untrusted: depth, sizes and number ranges are bounded, and every error names the position.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ember::json {

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  static Value null() { return Value(); }
  static Value boolean(bool b);
  static Value number(double d);
  static Value integer(int64_t i);
  static Value string(std::string s);
  static Value array(std::vector<Value> items = {});
  static Value object(std::vector<std::pair<std::string, Value>> members = {});

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_integer() const { return kind_ == Kind::Number && integral_; }

  bool as_bool() const { return bool_; }
  double as_double() const { return number_; }
  int64_t as_int() const { return integer_; }
  const std::string& as_string() const { return string_; }
  const std::vector<Value>& items() const { return items_; }
  std::vector<Value>& items() { return items_; }
  // Object members in file order (duplicate keys are rejected by the parser).
  const std::vector<std::pair<std::string, Value>>& members() const { return members_; }
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);

  std::string dump() const;  // compact, keys in insertion order

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool integral_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// Parses exactly one JSON value (trailing spaces allowed). `what` names the source in errors.
Value parse(const std::string& text, const std::string& what);

}  // namespace ember::json

// Recursive-descent JSON with a depth limit. Integers that fit int64 are kept exact, because
// safetensors offsets and shapes must not pass through a double.
#include "core/io/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace ember::json {

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.bool_ = b;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Number;
  v.number_ = d;
  v.integral_ = std::nearbyint(d) == d && std::fabs(d) < 9.2e18;
  v.integer_ = v.integral_ ? static_cast<int64_t>(d) : 0;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Number;
  v.number_ = static_cast<double>(i);
  v.integer_ = i;
  v.integral_ = true;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.string_ = std::move(s);
  return v;
}
Value Value::array(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Array;
  v.items_ = std::move(items);
  return v;
}
Value Value::object(std::vector<std::pair<std::string, Value>> members) {
  Value v;
  v.kind_ = Kind::Object;
  v.members_ = std::move(members);
  return v;
}

const Value* Value::find(const std::string& key) const {
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

void Value::set(const std::string& key, Value value) {
  for (auto& [k, v] : members_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  members_.emplace_back(key, std::move(value));
}

namespace {

void dump_string(std::ostringstream& out, const std::string& s) {
  out << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out << "\\\"";
        break;
      case '\\':
        out << "\\\\";
        break;
      case '\n':
        out << "\\n";
        break;
      case '\r':
        out << "\\r";
        break;
      case '\t':
        out << "\\t";
        break;
      case '\b':
        out << "\\b";
        break;
      case '\f':
        out << "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out << buf;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

void dump_value(std::ostringstream& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Null:
      out << "null";
      break;
    case Value::Kind::Bool:
      out << (v.as_bool() ? "true" : "false");
      break;
    case Value::Kind::Number:
      if (v.is_integer()) {
        out << v.as_int();
      } else {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.17g", v.as_double());
        out << buf;
      }
      break;
    case Value::Kind::String:
      dump_string(out, v.as_string());
      break;
    case Value::Kind::Array: {
      out << '[';
      bool first = true;
      for (const Value& item : v.items()) {
        if (!first) out << ',';
        first = false;
        dump_value(out, item);
      }
      out << ']';
      break;
    }
    case Value::Kind::Object: {
      out << '{';
      bool first = true;
      for (const auto& [k, item] : v.members()) {
        if (!first) out << ',';
        first = false;
        dump_string(out, k);
        out << ':';
        dump_value(out, item);
      }
      out << '}';
      break;
    }
  }
}

class Parser {
 public:
  Parser(const std::string& text, const std::string& what) : text_(text), what_(what) {}

  Value parse_document() {
    Value v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& message) {
    EMBER_FAIL(what_, ": invalid JSON at byte ", pos_, ": ", message);
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect_literal(const char* literal) {
    for (const char* p = literal; *p; ++p) {
      if (pos_ >= text_.size() || text_[pos_] != *p) fail(std::string("expected '") + literal + "'");
      ++pos_;
    }
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 64 levels");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of input");
    char c = text_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value::string(parse_string());
    if (c == 't') {
      expect_literal("true");
      return Value::boolean(true);
    }
    if (c == 'f') {
      expect_literal("false");
      return Value::boolean(false);
    }
    if (c == 'n') {
      expect_literal("null");
      return Value::null();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value parse_object(int depth) {
    ++pos_;
    std::vector<std::pair<std::string, Value>> members;
    if (consume('}')) return Value::object();
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      for (const auto& m : members)
        if (m.first == key) fail("duplicate key \"" + key + "\"");
      if (!consume(':')) fail("expected ':'");
      members.emplace_back(std::move(key), parse_value(depth + 1));
      if (consume(',')) continue;
      if (consume('}')) break;
      fail("expected ',' or '}'");
    }
    return Value::object(std::move(members));
  }

  Value parse_array(int depth) {
    ++pos_;
    std::vector<Value> items;
    if (consume(']')) return Value::array();
    while (true) {
      items.push_back(parse_value(depth + 1));
      if (consume(',')) continue;
      if (consume(']')) break;
      fail("expected ',' or ']'");
    }
    return Value::array(std::move(items));
  }

  void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_++];
      value <<= 4;
      if (h >= '0' && h <= '9')
        value |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        value |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        value |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("bad hex digit in \\u escape");
    }
    return value;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') break;
      if (c < 0x20) fail("control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') fail("unpaired surrogate");
            pos_ += 2;
            uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("invalid low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("invalid escape '\\") + e + "'");
      }
    }
    return out;
  }

  Value parse_number() {
    size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9')) fail("invalid number");
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
      fail("leading zeros are not allowed");
    bool integral = true;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9')) fail("invalid fraction");
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9')) fail("invalid exponent");
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    }
    std::string token = text_.substr(start, pos_ - start);
    if (integral) {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(token.c_str(), &end, 10);
      if (errno == ERANGE) fail("integer out of range: " + token);
      return Value::integer(v);
    }
    return Value::number(std::strtod(token.c_str(), nullptr));
  }

  const std::string& text_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace

std::string Value::dump() const {
  std::ostringstream out;
  dump_value(out, *this);
  return out.str();
}

Value parse(const std::string& text, const std::string& what) { return Parser(text, what).parse_document(); }

}  // namespace ember::json

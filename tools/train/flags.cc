// Flag parsing and validation: every error names the flag, what it accepts and what it got.
#include "tools/train/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace ember::train {

void Flags::add_string(const std::string& name, std::string default_value, std::string help,
                       std::vector<std::string> choices) {
  order_.push_back(name);
  flags_[name] = Flag{Kind::String, std::move(default_value), std::move(help), std::move(choices)};
}

void Flags::add_int(const std::string& name, long long default_value, std::string help, long long min) {
  order_.push_back(name);
  flags_[name] = Flag{Kind::Int, std::to_string(default_value), std::move(help), {}, static_cast<double>(min)};
}

void Flags::add_double(const std::string& name, double default_value, std::string help, double min) {
  order_.push_back(name);
  std::ostringstream v;
  v << default_value;
  flags_[name] = Flag{Kind::Double, v.str(), std::move(help), {}, min};
}

void Flags::add_bool(const std::string& name, std::string help) {
  order_.push_back(name);
  flags_[name] = Flag{Kind::Bool, "false", std::move(help)};
}

void Flags::assign(const std::string& name, Flag& flag, const std::string& value) {
  switch (flag.kind) {
    case Kind::String:
      if (!flag.choices.empty()) {
        bool ok = false;
        std::string list;
        for (const auto& c : flag.choices) {
          ok = ok || c == value;
          list += (list.empty() ? "" : ", ") + c;
        }
        if (!ok) throw FlagError("--" + name + ": expected one of {" + list + "}, got '" + value + "'");
      }
      break;
    case Kind::Int: {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') throw FlagError("--" + name + ": expected an integer, got '" + value + "'");
      if (errno == ERANGE) throw FlagError("--" + name + ": " + value + " is out of the 64-bit integer range");
      if (v < static_cast<long long>(flag.min))
        throw FlagError("--" + name + ": expected at least " + std::to_string(static_cast<long long>(flag.min)) +
                        ", got " + value);
      break;
    }
    case Kind::Double: {
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v))
        throw FlagError("--" + name + ": expected a finite number, got '" + value + "'");
      if (v < flag.min) {
        std::ostringstream m;
        m << "--" << name << ": expected at least " << flag.min << ", got " << value;
        throw FlagError(m.str());
      }
      break;
    }
    case Kind::Bool:
      if (value != "true" && value != "false")
        throw FlagError("--" + name + ": is a switch (give it alone, or =true/=false), got '" + value + "'");
      break;
  }
  flag.value = value;
  flag.set = true;
}

bool Flags::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return false;
    if (arg.rfind("--", 0) != 0) throw FlagError("unexpected argument '" + arg + "' (flags start with --; see --help)");
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) throw FlagError("unknown flag --" + name + " (see --help)");
    Flag& flag = it->second;
    if (flag.kind == Kind::Bool) {
      assign(name, flag, has_value ? value : "true");
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw FlagError("--" + name + ": missing value");
      value = argv[++i];
    }
    assign(name, flag, value);
  }
  return true;
}

std::string Flags::help_text() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]\n" << summary_ << "\n\nflags:\n";
  for (const std::string& name : order_) {
    const Flag& f = flags_.at(name);
    std::string head = "  --" + name;
    if (f.kind != Kind::Bool)
      head += f.choices.empty() ? " VALUE" : " {" + [&] {
        std::string list;
        for (const auto& c : f.choices) list += (list.empty() ? "" : ",") + c;
        return list;
      }() + "}";
    out << head << "\n      " << f.help;
    if (f.kind != Kind::Bool && !f.value.empty()) out << " (default: " << f.value << ")";
    out << "\n";
  }
  return out.str();
}

const Flags::Flag& Flags::find(const std::string& name, Kind kind) const {
  auto it = flags_.find(name);
  if (it == flags_.end() || it->second.kind != kind) throw std::logic_error("flag --" + name + " not registered");
  return it->second;
}

const std::string& Flags::get_string(const std::string& name) const { return find(name, Kind::String).value; }
long long Flags::get_int(const std::string& name) const { return std::atoll(find(name, Kind::Int).value.c_str()); }
double Flags::get_double(const std::string& name) const { return std::atof(find(name, Kind::Double).value.c_str()); }
bool Flags::get_bool(const std::string& name) const { return find(name, Kind::Bool).value == "true"; }
bool Flags::was_set(const std::string& name) const {
  auto it = flags_.find(name);
  return it != flags_.end() && it->second.set;
}

}  // namespace ember::train

// A small command-line parser for the train tool: typed flags with defaults, choices and help
// text; "--name value" and "--name=value"; --help prints them all. Bad input raises FlagError
// (the caller prints it and exits with status 2).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::train {

struct FlagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Flags {
 public:
  explicit Flags(std::string program, std::string summary)
      : program_(std::move(program)), summary_(std::move(summary)) {}

  void add_string(const std::string& name, std::string default_value, std::string help,
                  std::vector<std::string> choices = {});
  void add_int(const std::string& name, long long default_value, std::string help, long long min = 0);
  void add_double(const std::string& name, double default_value, std::string help, double min = 0.0);
  void add_bool(const std::string& name, std::string help);  // a switch: present means true

  // Returns false when --help was given (the help text is then in help_text()).
  bool parse(int argc, const char* const* argv);
  std::string help_text() const;

  const std::string& get_string(const std::string& name) const;
  long long get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  bool was_set(const std::string& name) const;

 private:
  enum class Kind { String, Int, Double, Bool };
  struct Flag {
    Kind kind;
    std::string value;
    std::string help;
    std::vector<std::string> choices;
    double min = 0;
    bool set = false;
  };
  const Flag& find(const std::string& name, Kind kind) const;
  void assign(const std::string& name, Flag& flag, const std::string& value);

  std::string program_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Flag> flags_;
};

}  // namespace ember::train

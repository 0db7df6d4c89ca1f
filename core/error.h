// ember::Error and the EMBER_CHECK macro. Every message names the operation,
// what was expected and what was found: "conv2d: input must be 4-D [N, C, H, W], got [3, 32, 32]".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}
[[noreturn]] void throw_error(const std::string& message);
}  // namespace detail

}  // namespace ember

// EMBER_CHECK(cond, "op: expected ", x, ", got ", y): the message parts are only
// formatted when the check fails.
#define EMBER_CHECK(cond, ...)                                            \
  do {                                                                    \
    if (__builtin_expect(!(cond), 0)) {                                   \
      ::ember::detail::throw_error(::ember::detail::concat(__VA_ARGS__)); \
    }                                                                     \
  } while (0)

#define EMBER_FAIL(...) ::ember::detail::throw_error(::ember::detail::concat(__VA_ARGS__))

// EMBER_ARG declares an option with a fluent setter and a getter, as TORCH_ARG does:
//   struct LinearOptions { EMBER_ARG(bool, bias) = true; };   LinearOptions().bias(false).bias()
// Used by nn's layer options and nn/optim's optimizer and schedule options alike.
#pragma once

#define EMBER_ARG(T, name)                  \
 public:                                    \
  auto& name(const T& new_value) {          \
    name##_ = new_value;                    \
    return *this;                           \
  }                                         \
  const T& name() const { return name##_; } \
                                            \
 private:                                   \
  T name##_

// OptimizerOptions: the hyper-parameters of one parameter group, the base of SGDOptions, AdamOptions
// and AdamWOptions. Schedulers reach the learning rate (and a momentum) through it without knowing
// the optimizer; state_dict() stores it as JSON.
#pragma once

#include <memory>

#include "core/error.h"
#include "core/io/json.h"
#include "nn/options.h"  // EMBER_ARG, for every options struct

namespace ember::optim {

class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual const char* type_name() const = 0;  // "SGDOptions", for error messages

  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The momentum a cyclic schedule moves (OneCycleLR): SGD's momentum, Adam's beta1.
  virtual bool has_momentum() const { return false; }
  virtual double get_momentum() const { EMBER_FAIL(type_name(), ": has no momentum"); }
  virtual void set_momentum(double) { EMBER_FAIL(type_name(), ": has no momentum"); }

  // Raises an ember::Error naming the first invalid option; `optimizer` prefixes the message.
  virtual void validate(const char* optimizer) const = 0;
  // Every hyper-parameter as one JSON object, and back; load_json requires every key.
  virtual json::Value to_json() const = 0;
  virtual void load_json(const json::Value& object) = 0;
};

}  // namespace ember::optim

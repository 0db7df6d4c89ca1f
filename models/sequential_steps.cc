// Residual's registration of its body's entries; Scale's description.
#include "models/sequential_steps.h"

#include <sstream>

namespace ember::models {

ResidualImpl::ResidualImpl(nn::Sequential body_in) : Cloneable("Residual"), body(std::move(body_in)) {
  EMBER_CHECK(!body.is_empty(), "Residual: the body is an empty holder");
  register_body();
}

void ResidualImpl::reset() {
  body = nn::Sequential(std::static_pointer_cast<nn::SequentialImpl>(body->clone()));
  register_body();
}

void ResidualImpl::register_body() {
  for (const auto& [name, child] : body->named_children()) register_module(name, child);
}

std::string ScaleImpl::extra_repr() const {
  std::ostringstream out;
  out << "factor=" << factor;
  return out.str();
}

}  // namespace ember::models

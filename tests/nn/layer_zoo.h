// The layer configurations of tools/golden/make_layer_reference.py, built in Ember under the same
// ids (layer_zoo.cc), and the statistical check of a default initialisation against its formula.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/io/json.h"
#include "nn/nn.h"

namespace ember::testing {

// The module of layer config `id` ("linear", "conv2d_options", ..., "nested"); null if unknown.
std::shared_ptr<nn::Module> make_reference_layer(const std::string& id);
// The module of init config `id` ("linear", "conv2d_groups", ...); null if unknown.
std::shared_ptr<nn::Module> make_reference_init_layer(const std::string& id);

// tests/nn/layer_reference.json, parsed once.
const json::Value& layer_reference();

// Checks `values` (one tensor's elements) against a distribution spec of the reference file:
// {"dist": "uniform", "low", "high"} | {"dist": "normal", "mean", "std"[, "zero_row"]} |
// {"dist": "constant", "value"}. Bounds are exact and must be nearly reached; mean and standard
// deviation (and a normal's kurtosis) must lie within 5 standard errors (under 1% for the weights, so a wrong fan or gain fails
// by far). Returns what is wrong, or "" when the draw fits.
std::string check_distribution(const Tensor& values, const json::Value& spec);

}  // namespace ember::testing

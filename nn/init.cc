// Initialisers, with the formulas of torch.nn.init.
#include "nn/init.h"

#include <cmath>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::nn::init {

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU:
      return std::sqrt(2.0 / (1.0 + param * param));
  }
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  EMBER_CHECK(tensor.dim() >= 2,
              "calculate_fan_in_and_fan_out: fan in and fan out can not be computed for a tensor "
              "with fewer than 2 dimensions, got shape ",
              shape_str(tensor.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

namespace {
// Fills through a fresh random tensor so the draw is the same whatever the tensor's layout.
Tensor& fill_from(Tensor& tensor, const Tensor& values) {
  NoGradGuard no_grad;
  copy_into(tensor, values);
  tensor.bump_version();
  return tensor;
}
}  // namespace

Tensor& uniform_(Tensor& tensor, double low, double high, Generator* generator) {
  EMBER_CHECK(low <= high, "uniform_: expects low <= high, got ", low, " and ", high);
  return fill_from(tensor, rand(tensor.sizes(), TensorOptions(kFloat64), generator) * (high - low) + low);
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* generator) {
  EMBER_CHECK(std >= 0, "normal_: expects std >= 0, got ", std);
  return fill_from(tensor, randn(tensor.sizes(), TensorOptions(kFloat64), generator) * std + mean);
}

Tensor& constant_(Tensor& tensor, double value) {
  NoGradGuard no_grad;
  return tensor.fill_(value);
}

Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* generator) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* generator) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return normal_(tensor, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), generator);
}

namespace {
double kaiming_std(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  EMBER_CHECK(fan > 0, "kaiming init: cannot initialise an empty tensor of shape ", shape_str(tensor.sizes()));
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity);
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  return normal_(tensor, 0.0, kaiming_std(tensor, a, mode, nonlinearity), generator);
}

}  // namespace ember::nn::init

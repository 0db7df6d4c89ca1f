// Parameter initialisation (torch.nn.init): in place, without recording gradients, drawing from
// `generator` (default: the global one, so manual_seed makes models reproducible).
//
//   nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace ember::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU };

// The recommended gain for a nonlinearity (LeakyReLU uses `param` as its slope, default 0.01).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight of at least 2 dims: [out, in, receptive field...].
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor& uniform_(Tensor& tensor, double low = 0.0, double high = 1.0, Generator* generator = nullptr);
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
// `a` is the negative slope for LeakyReLU.
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);

}  // namespace ember::nn::init

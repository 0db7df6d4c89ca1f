// The fused SGD and Adam/AdamW kernels against a naive reference written here from PyTorch's
// single-tensor updates (torch/optim/sgd.py, adam.py, adamw.py), op by op. In float64 (and in float32,
// each op rounded in float as PyTorch's op-by-op update rounds it) they must agree to the bit, over
// many steps with random grads and every option combination; sizes cover one thread and several.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/ember_core.h"
#include "core/fused_update.h"

// Same reason as the kernels: an FMA would skip a rounding the op-by-op reference makes.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

using namespace ember;

namespace {

const std::vector<int64_t> kSizes = {7, 67};  // shorter than a vector; vectors plus a tail
const int64_t kLarge = 70001;                 // more than one parallel chunk (core/cpu/loops.h)

template <typename T>
std::vector<T> random_values(std::mt19937_64& rng, int64_t n, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

template <typename T>
void require_bitwise(const Tensor& actual, const std::vector<T>& expected, const char* what) {
  std::vector<T> a = actual.to_vector<T>();
  REQUIRE(a.size() == expected.size());
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &expected[i], sizeof(T)) != 0 && mismatches++ == 0) first = i;
  }
  INFO(what << ": " << mismatches << " elements differ; first at " << first << ": " << a[first] << " vs "
            << expected[first]);
  REQUIRE(mismatches == 0);
}

// ---- SGD reference: torch.optim.sgd._single_tensor_sgd ----

template <typename T>
void reference_sgd(std::vector<T>& param, const std::vector<T>& grad, std::vector<T>& buf, bool first_step,
                   const SgdUpdateArgs& a) {
  for (size_t i = 0; i < param.size(); ++i) {
    T d = a.maximize ? -grad[i] : grad[i];
    if (a.weight_decay != 0) d = d + static_cast<T>(a.weight_decay) * param[i];  // d_p.add(param, alpha=wd)
    if (a.momentum != 0) {
      if (first_step) {
        buf[i] = d;  // torch.clone(d_p)
      } else {
        buf[i] = buf[i] * static_cast<T>(a.momentum);           // buf.mul_(momentum)
        buf[i] = buf[i] + static_cast<T>(1 - a.dampening) * d;  // .add_(d_p, alpha=1 - dampening)
      }
      d = a.nesterov ? d + static_cast<T>(a.momentum) * buf[i] : buf[i];
    }
    param[i] = param[i] + static_cast<T>(-a.lr) * d;  // param.add_(d_p, alpha=-lr)
  }
}

template <typename T>
void check_sgd(const SgdUpdateArgs& base, int64_t n, int steps) {
  std::mt19937_64 rng(1234 + n);
  std::vector<T> param = random_values<T>(rng, n, 1.0), buf(n);
  Tensor param_t = tensor(param), buf_t = empty({n}, dtype_of<T>());
  for (int s = 0; s < steps; ++s) {
    std::vector<T> grad = random_values<T>(rng, n, 0.5);
    SgdUpdateArgs args = base;
    args.first_step = s == 0;
    reference_sgd(param, grad, buf, args.first_step, args);
    fused_sgd_update_(param_t, tensor(grad), buf_t, args);
  }
  require_bitwise(param_t, param, "param");
  if (base.momentum != 0) require_bitwise(buf_t, buf, "momentum_buffer");
}

// ---- Adam / AdamW reference: torch.optim.adam._single_tensor_adam, adamw._single_tensor_adamw ----

template <typename T>
T torch_maximum(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}

template <typename T>
void reference_adam(std::vector<T>& param, const std::vector<T>& grad_in, std::vector<T>& exp_avg,
                    std::vector<T>& exp_avg_sq, std::vector<T>& max_exp_avg_sq, const AdamUpdateArgs& a) {
  // Python floats: computed in double, cast to T where they meet a tensor.
  const double step = static_cast<double>(a.step);
  const double bias_correction1 = 1 - std::pow(a.beta1, step);
  const double bias_correction2 = 1 - std::pow(a.beta2, step);
  const double step_size = a.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (size_t i = 0; i < param.size(); ++i) {
    T grad = a.maximize ? -grad_in[i] : grad_in[i];
    if (a.decoupled_weight_decay) {
      param[i] = param[i] * static_cast<T>(1 - a.lr * a.weight_decay);  // param.mul_(1 - lr * wd), even wd = 0
    } else if (a.weight_decay != 0) {
      grad = grad + static_cast<T>(a.weight_decay) * param[i];  // grad.add(param, alpha=wd)
    }
    exp_avg[i] = exp_avg[i] * static_cast<T>(a.beta1);
    exp_avg[i] = exp_avg[i] + static_cast<T>(1 - a.beta1) * grad;
    exp_avg_sq[i] = exp_avg_sq[i] * static_cast<T>(a.beta2);
    exp_avg_sq[i] = exp_avg_sq[i] + static_cast<T>(1 - a.beta2) * grad * grad;  // addcmul_: self + v * t1 * t2
    T denom;
    if (a.amsgrad) {
      max_exp_avg_sq[i] = torch_maximum(max_exp_avg_sq[i], exp_avg_sq[i]);
      denom = std::sqrt(max_exp_avg_sq[i]) / static_cast<T>(bias_correction2_sqrt);
    } else {
      denom = std::sqrt(exp_avg_sq[i]) / static_cast<T>(bias_correction2_sqrt);
    }
    denom = denom + static_cast<T>(a.eps);
    param[i] = param[i] + static_cast<T>(-step_size) * exp_avg[i] / denom;  // addcdiv_: self + v * t1 / t2
  }
}

template <typename T>
void check_adam(const AdamUpdateArgs& base, int64_t n, int steps) {
  std::mt19937_64 rng(99 + n);
  std::vector<T> param = random_values<T>(rng, n, 1.0), m(n, T(0)), v(n, T(0)), vmax(n, T(0));
  Tensor param_t = tensor(param), m_t = zeros({n}, dtype_of<T>()), v_t = zeros({n}, dtype_of<T>());
  Tensor vmax_t = zeros({n}, dtype_of<T>());
  for (int s = 1; s <= steps; ++s) {
    // Shrinking grads late in the run make the amsgrad maximum differ from exp_avg_sq.
    std::vector<T> grad = random_values<T>(rng, n, s > steps / 2 ? 0.05 : 1.0);
    AdamUpdateArgs args = base;
    args.step = s;
    reference_adam(param, grad, m, v, vmax, args);
    fused_adam_update_(param_t, tensor(grad), m_t, v_t, vmax_t, args);
  }
  require_bitwise(param_t, param, "param");
  require_bitwise(m_t, m, "exp_avg");
  require_bitwise(v_t, v, "exp_avg_sq");
  if (base.amsgrad) require_bitwise(vmax_t, vmax, "max_exp_avg_sq");
}

}  // namespace

TEMPLATE_TEST_CASE("fused SGD matches the op-by-op reference bit for bit", "[optim][fused]", double, float) {
  for (int64_t n : kSizes) {
    for (double momentum : {0.0, 0.9}) {
      for (double dampening : {0.0, 0.3}) {
        for (double weight_decay : {0.0, 1e-2}) {
          for (bool nesterov : {false, true}) {
            for (bool maximize : {false, true}) {
              SgdUpdateArgs args;
              args.lr = 0.05;
              args.momentum = momentum;
              args.dampening = dampening;
              args.weight_decay = weight_decay;
              args.nesterov = nesterov;
              args.maximize = maximize;
              INFO("n " << n << " momentum " << momentum << " dampening " << dampening << " weight_decay "
                        << weight_decay << " nesterov " << nesterov << " maximize " << maximize);
              check_sgd<TestType>(args, n, 12);
            }
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused Adam and AdamW match the op-by-op reference bit for bit", "[optim][fused]", double, float) {
  for (int64_t n : kSizes) {
    for (bool decoupled : {false, true}) {
      for (double weight_decay : {0.0, 0.1}) {
        for (bool amsgrad : {false, true}) {
          for (bool maximize : {false, true}) {
            for (auto [beta1, beta2] : {std::pair{0.9, 0.999}, std::pair{0.5, 0.9}}) {
              AdamUpdateArgs args;
              args.lr = 1e-2;
              args.beta1 = beta1;
              args.beta2 = beta2;
              args.eps = 1e-8;
              args.weight_decay = weight_decay;
              args.decoupled_weight_decay = decoupled;
              args.amsgrad = amsgrad;
              args.maximize = maximize;
              INFO("n " << n << (decoupled ? " AdamW" : " Adam") << " weight_decay " << weight_decay << " amsgrad "
                        << amsgrad << " maximize " << maximize << " betas " << beta1 << ", " << beta2);
              check_adam<TestType>(args, n, 16);
            }
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused updates split across threads match the reference bit for bit", "[optim][fused]", double,
                   float) {
  SgdUpdateArgs sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-2;
  sgd.maximize = true;
  for (bool nesterov : {false, true}) {
    sgd.nesterov = nesterov;
    check_sgd<TestType>(sgd, kLarge, 4);
  }
  AdamUpdateArgs adam;
  adam.lr = 1e-2;
  adam.weight_decay = 0.1;
  for (bool decoupled : {false, true}) {
    adam.decoupled_weight_decay = decoupled;
    adam.amsgrad = decoupled;
    check_adam<TestType>(adam, kLarge, 4);
  }
}

TEST_CASE("fused float32 updates track the float64 reference", "[optim][fused]") {
  const int64_t n = 1000;
  std::mt19937_64 rng(5);
  std::vector<double> param = random_values<double>(rng, n, 1.0), buf(n);
  std::vector<float> param32(param.begin(), param.end());
  Tensor p = tensor(param32), b = empty({n}, kFloat32);
  SgdUpdateArgs args;
  args.lr = 0.01;
  args.momentum = 0.9;
  args.nesterov = true;
  args.weight_decay = 5e-4;
  for (int s = 0; s < 30; ++s) {
    std::vector<double> grad = random_values<double>(rng, n, 1.0);
    std::vector<float> grad32(grad.begin(), grad.end());
    std::vector<double> grad_rounded(grad32.begin(), grad32.end());  // both see the same float32 grads
    args.first_step = s == 0;
    reference_sgd(param, grad_rounded, buf, args.first_step, args);
    fused_sgd_update_(p, tensor(grad32), b, args);
  }
  std::vector<float> got = p.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) REQUIRE(std::abs(got[i] - param[i]) <= 1e-5 * (1 + std::abs(param[i])));
}

TEST_CASE("fused updates reject operands they cannot walk as one dense block", "[optim][fused]") {
  Tensor p = zeros({4, 3}), g = ones({4, 3}), buf = zeros({4, 3});
  SgdUpdateArgs sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  REQUIRE_THROWS_WITH(fused_sgd_update_(p, ones({3, 4}).t(), buf, sgd), Catch::Contains("contiguous grad"));
  REQUIRE_THROWS_WITH(fused_sgd_update_(zeros({3, 4}).t(), ones({4, 3}), buf, sgd),
                      Catch::Contains("contiguous param"));
  REQUIRE_THROWS_WITH(fused_sgd_update_(p, ones({4, 3}, kFloat64), buf, sgd),
                      Catch::Contains("grad of dtype float32, got float64"));
  REQUIRE_THROWS_WITH(fused_sgd_update_(p, ones({12}), buf, sgd), Catch::Contains("grad of shape"));
  REQUIRE_THROWS_WITH(fused_sgd_update_(p, g, Tensor(), sgd), Catch::Contains("momentum_buffer is undefined"));
  REQUIRE_THROWS_WITH(fused_sgd_update_(zeros({4}, kInt64), zeros({4}, kInt64), Tensor(), SgdUpdateArgs{}),
                      Catch::Contains("float32 or float64 param, got int64"));
  REQUIRE_THROWS_WITH(fused_sgd_update_(zeros({4}, kFloat16), zeros({4}, kFloat16), Tensor(), SgdUpdateArgs{}),
                      Catch::Contains("got float16"));
  sgd.momentum = 0.0;
  REQUIRE_NOTHROW(fused_sgd_update_(p, g, Tensor(), sgd));  // no buffer needed without momentum
  REQUIRE(p.to_vector<float>() == std::vector<float>(12, -0.1f));

  AdamUpdateArgs adam;
  REQUIRE_THROWS_WITH(fused_adam_update_(p, g, zeros({4, 3}), zeros({4, 3}), Tensor(), AdamUpdateArgs{.step = 0}),
                      Catch::Contains("step >= 1"));
  REQUIRE_THROWS_WITH(fused_adam_update_(p, g, zeros({4, 3}), zeros({3, 4}), Tensor(), adam),
                      Catch::Contains("exp_avg_sq of shape"));
  adam.amsgrad = true;
  REQUIRE_THROWS_WITH(fused_adam_update_(p, g, zeros({4, 3}), zeros({4, 3}), Tensor(), adam),
                      Catch::Contains("max_exp_avg_sq is undefined"));
}

TEST_CASE("fused updates bump the version counters of what they write", "[optim][fused]") {
  Tensor p = zeros({5}), g = ones({5}), m = zeros({5}), v = zeros({5});
  const uint32_t before = p.version(), grad_before = g.version();
  fused_adam_update_(p, g, m, v, Tensor(), AdamUpdateArgs{.lr = 0.1});
  REQUIRE(p.version() > before);
  REQUIRE(m.version() > 0);
  REQUIRE(g.version() == grad_before);
}

// Factories. Data made on the host (arange, linspace, eye, tensor()) is built on the CPU and moved.
#include "core/factory.h"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "core/backend.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/random.h"

namespace ember {

Tensor empty(const Shape& shape, const TensorOptions& options) {
  for (int64_t s : shape) EMBER_CHECK(s >= 0, "empty: negative dimension ", s, " in shape ", shape_str(shape));
  const Device device = options.device();
  const DeviceRuntime& k = runtime_for(device, "empty");
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * element_size(options.dtype());
  auto storage = std::make_shared<StorageImpl>(nbytes, device, k.allocator(device.index));
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, options.dtype()));
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& shape, Scalar value, const TensorOptions& options) {
  Tensor t = empty(shape, options.requires_grad(false));
  {
    NoGradGuard no_grad;
    t.fill_(value);
  }
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

Tensor zeros(const Shape& shape, const TensorOptions& options) { return full(shape, 0, options); }
Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1, options); }
Tensor empty_strided(const Shape& shape, const Shape& strides, const TensorOptions& options) {
  EMBER_CHECK(shape.size() == strides.size(), "empty_strided: ", shape.size(), " sizes but ", strides.size(),
              " strides");
  // The storage must reach the element at the last index of every dim.
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    EMBER_CHECK(shape[d] >= 0 && strides[d] >= 0, "empty_strided: negative size or stride in ", shape_str(shape), " / ",
                shape_str(strides));
    if (shape[d] == 0) {
      extent = 0;
      break;
    }
    extent += (shape[d] - 1) * strides[d];
  }
  Tensor flat = empty({extent}, options.requires_grad(false));
  auto impl = std::make_shared<TensorImpl>(flat.storage(), shape, strides, 0, options.dtype());
  Tensor t(std::move(impl));
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

bool is_dense(const Tensor& t) {
  // Sort dims by stride; dense when each stride equals the product of the sizes inside it.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) order.push_back(d);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) < t.stride(b); });
  int64_t expected = 1;
  for (int64_t d : order) {
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

Tensor empty_like(const Tensor& t) {
  if (t.is_contiguous() || !is_dense(t)) return empty(t.sizes(), t.options());
  return empty_strided(t.sizes(), t.strides(), t.options());
}
bool channels_last_order(const Tensor& t) {
  if (t.dim() != 4 || t.stride(1) == 0) return false;
  // Walk C, W, H, N: each stride must reach past the block of the dims inside it.
  int64_t reach = 0;
  for (int64_t d : {1, 3, 2, 0}) {
    if (t.size(d) == 0 || t.stride(d) < reach) return false;
    // [N, 1, 1, 1] with equal strides, and other size-1 ties with C's stride: NCHW, as PyTorch.
    if (d == 0 && reach == t.stride(1)) return false;
    reach = t.stride(d) * (t.size(d) > 1 ? t.size(d) : 1);
  }
  return true;
}

Shape channels_last_strides(const Shape& sizes) {
  const int64_t c = sizes[1], h = sizes[2], w = sizes[3];
  return {h * w * c, 1, w * c, c};
}

Tensor empty_channels_last(const Shape& sizes, const TensorOptions& options) {
  return empty_strided(sizes, channels_last_strides(sizes), options);
}

Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.options()); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, t.options()); }

Tensor arange(Scalar end, const std::optional<TensorOptions>& options) { return arange(0, end, 1, options); }

Tensor arange(Scalar start, Scalar end, Scalar step, const std::optional<TensorOptions>& options) {
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  TensorOptions opts = options ? *options : TensorOptions(integral ? kInt64 : kFloat32);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  EMBER_CHECK(st != 0, "arange: step must be nonzero");
  EMBER_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
              "arange: upper bound and larger bound inconsistent with "
              "step sign (start=",
              s, ", end=", e, ", step=", st, ")");
  // Integer bounds count in integers: beyond 2^53, end - start in double can round to nothing.
  int64_t n = integral ? (end.to_int() - start.to_int() + step.to_int() + (step.to_int() > 0 ? -1 : 1)) / step.to_int()
                       : static_cast<int64_t>(std::ceil((e - s) / st));
  Tensor host = empty({n}, TensorOptions(kFloat64));
  double* data = host.data_ptr<double>();
  if (integral) {
    int64_t si = start.to_int(), sti = step.to_int();
    for (int64_t i = 0; i < n; ++i) data[i] = static_cast<double>(si + i * sti);
    if (opts.dtype() == kInt64) {  // exact beyond 2^53
      Tensor exact = empty({n}, TensorOptions(kInt64));
      int64_t* out = exact.data_ptr<int64_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = si + i * sti;
      return exact.to(opts.device()).requires_grad_(opts.requires_grad());
    }
  } else {
    for (int64_t i = 0; i < n; ++i) data[i] = s + static_cast<double>(i) * st;
  }
  Tensor out = host.to(opts.dtype()).to(opts.device());
  if (opts.requires_grad()) out.requires_grad_(true);
  return out;
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options) {
  EMBER_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor host = empty({steps}, TensorOptions(kFloat64));
  double* data = host.data_ptr<double>();
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Fill symmetric from both ends, as PyTorch does, so the last value is exactly `end`.
  int64_t half = steps == 1 ? 1 : steps / 2;  // a single step is the start, as in torch.linspace
  for (int64_t i = 0; i < steps; ++i)
    data[i] = i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  Tensor out = host.to(options.dtype()).to(options.device());
  if (options.requires_grad()) out.requires_grad_(true);
  return out;
}

Tensor eye(int64_t n, int64_t m, const TensorOptions& options) {
  if (m < 0) m = n;
  EMBER_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  Tensor host = zeros({n, m}, TensorOptions(kFloat64));
  double* data = host.data_ptr<double>();
  for (int64_t i = 0; i < std::min(n, m); ++i) data[i * m + i] = 1.0;
  Tensor out = host.to(options.dtype()).to(options.device());
  if (options.requires_grad()) out.requires_grad_(true);
  return out;
}

Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor host = empty(shape, TensorOptions(dtype));
  if (host.nbytes() > 0) std::memcpy(host.data_ptr(), data, host.nbytes());
  return host.to(device);
}

Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> deleter) {
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * element_size(dtype);
  auto storage = std::make_shared<StorageImpl>(data, nbytes, Device(kCPU), std::move(deleter));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, Device device) {
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  EMBER_CHECK(shape_numel(s) == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
              " values cannot fill shape ", shape_str(s));
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no contiguous data()
    Tensor host = empty(s, TensorOptions(kBool));
    bool* out = host.data_ptr<bool>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    return host.to(device);
  } else {
    return from_buffer(values.data(), s, dtype_of<T>(), device);
  }
}
template Tensor tensor<float>(const std::vector<float>&, const Shape&, Device);
template Tensor tensor<double>(const std::vector<double>&, const Shape&, Device);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, const Shape&, Device);
template Tensor tensor<Half>(const std::vector<Half>&, const Shape&, Device);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, const Shape&, Device);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&, Device);

// ---- random ----

namespace {
Tensor random_tensor(RandomKind kind, const Shape& shape, const TensorOptions& options, Generator* generator, double a,
                     double b, const char* op) {
  Tensor out = empty(shape, options.requires_grad(false));
  Generator& gen = generator ? *generator : current_generator();
  PhiloxState state = gen.reserve(static_cast<uint64_t>(out.numel()));
  kernels_for(out.device(), op).random(kind, out.device(), out.data_ptr(), out.dtype(), out.numel(), state, a, b);
  if (options.requires_grad()) out.requires_grad_(true);
  return out;
}
}  // namespace

Tensor rand(const Shape& shape, const TensorOptions& options, Generator* generator) {
  EMBER_CHECK(is_floating(options.dtype()), "rand: expected a floating dtype, got ", dtype_name(options.dtype()));
  return random_tensor(RandomKind::Uniform, shape, options, generator, 0.0, 1.0, "rand");
}

Tensor randn(const Shape& shape, const TensorOptions& options, Generator* generator) {
  EMBER_CHECK(is_floating(options.dtype()), "randn: expected a floating dtype, got ", dtype_name(options.dtype()));
  return random_tensor(RandomKind::Normal, shape, options, generator, 0.0, 1.0, "randn");
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options, Generator* generator) {
  EMBER_CHECK(high > low, "randint: expected low < high, got low=", low, ", high=", high);
  return random_tensor(RandomKind::RandInt, shape, options, generator, static_cast<double>(low),
                       static_cast<double>(high), "randint");
}

Tensor bernoulli(const Shape& shape, double p, const TensorOptions& options, Generator* generator) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: expected 0 <= p <= 1, got ", p);
  return random_tensor(RandomKind::Bernoulli, shape, options, generator, p, 0.0, "bernoulli");
}

Tensor bernoulli(const Tensor& p, Generator* generator) {
  EMBER_CHECK(is_floating(p.dtype()), "bernoulli: expected floating probabilities, got ", dtype_name(p.dtype()));
  NoGradGuard no_grad;
  Tensor u = rand(p.sizes(), TensorOptions(kFloat64).device(p.device()), generator);
  return compare(CompareOp::Lt, u, p.to(kFloat64)).to(p.dtype());
}

Tensor rand_like(const Tensor& t, Generator* generator) { return rand(t.sizes(), t.options(), generator); }
Tensor randn_like(const Tensor& t, Generator* generator) { return randn(t.sizes(), t.options(), generator); }

}  // namespace ember

namespace ember {

namespace {
Tensor& random_fill_(Tensor& self, RandomKind kind, double a, double b, const char* op) {
  EMBER_CHECK(!(self.requires_grad() && self.is_leaf() && GradMode::is_enabled()), op,
              ": a leaf tensor that requires grad is being used in an in-place operation (wrap it in NoGradGuard)");
  if (self.numel() == 0) return self;
  PhiloxState state = current_generator().reserve(static_cast<uint64_t>(self.numel()));
  const KernelTable& k = kernels_for(self.device(), op);
  if (self.is_contiguous()) {
    k.random(kind, self.device(), self.data_ptr(), self.dtype(), self.numel(), state, a, b);
  } else {
    Tensor tmp = empty(self.sizes(), self.options());
    k.random(kind, tmp.device(), tmp.data_ptr(), tmp.dtype(), tmp.numel(), state, a, b);
    copy_into(self, tmp);
  }
  self.bump_version();
  return self;
}
}  // namespace

Tensor& Tensor::uniform_(double low, double high) {
  EMBER_CHECK(is_floating(dtype()), "uniform_: expected a floating tensor, got ", dtype_name(dtype()));
  EMBER_CHECK(low <= high, "uniform_: expects low <= high, got low=", low, ", high=", high);
  return random_fill_(*this, RandomKind::Uniform, low, high, "uniform_");
}

Tensor& Tensor::normal_(double mean, double std) {
  EMBER_CHECK(is_floating(dtype()), "normal_: expected a floating tensor, got ", dtype_name(dtype()));
  EMBER_CHECK(std >= 0, "normal_: expects std >= 0.0, got ", std);
  return random_fill_(*this, RandomKind::Normal, mean, std, "normal_");
}

Tensor& Tensor::bernoulli_(double p) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_: expected 0 <= p <= 1, got ", p);
  return random_fill_(*this, RandomKind::Bernoulli, p, 0.0, "bernoulli_");
}

}  // namespace ember

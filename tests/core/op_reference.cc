// The harness's host-side arithmetic: random numbers, N-D index loops, broadcasting and
// reductions done by hand over std::vector<double>, and rounding a double to each dtype.
#include <algorithm>
#include <cmath>

#include "tests/core/op_harness.h"

namespace ember::test {

// ---- random numbers ----

int64_t Rng::integer(int64_t low, int64_t high) { return std::uniform_int_distribution<int64_t>(low, high)(engine_); }
double Rng::uniform(double low, double high) { return std::uniform_real_distribution<double>(low, high)(engine_); }
bool Rng::chance(double p) { return uniform(0.0, 1.0) < p; }

namespace {

// Rounds to `bits` significant bits, with gradual underflow below 2^(min_exponent - 1).
double round_significand(double v, int bits, int min_exponent, double max_finite) {
  if (!std::isfinite(v) || v == 0.0) return v;
  int exponent;
  std::frexp(v, &exponent);
  exponent = std::max(exponent, min_exponent);
  double quantum = std::ldexp(1.0, exponent - bits);
  double r = std::nearbyint(v / quantum) * quantum;
  if (std::fabs(r) > max_finite) return std::copysign(INFINITY, v);
  return r;
}

}  // namespace

// ---- reference building blocks ----

double RefTensor::at(const std::vector<int64_t>& index) const {
  return values[static_cast<size_t>(flat_index(shape, index))];
}

int64_t count_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t flat_index(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (count_elements(shape) == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  for (;;) {
    fn(index);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

std::optional<Shape> broadcast_all(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      int64_t v = s[i];
      if (v == o || v == 1) continue;
      if (o != 1) return std::nullopt;
      o = v;
    }
  }
  return out;
}

double broadcast_at(const RefTensor& t, const std::vector<int64_t>& out_index) {
  const size_t lead = out_index.size() - t.shape.size();
  std::vector<int64_t> index(t.shape.size());
  for (size_t d = 0; d < t.shape.size(); ++d) index[d] = t.shape[d] == 1 ? 0 : out_index[lead + d];
  return t.at(index);
}

int64_t wrap(int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  return dim < 0 ? dim + n : dim;
}

RefTensor ref_filled(const Shape& shape, DType dtype, double value) {
  return RefTensor{shape, dtype, std::vector<double>(static_cast<size_t>(count_elements(shape)), value)};
}

RefTensor ref_elementwise(const std::vector<RefTensor>& inputs, DType dtype,
                          const std::function<double(const std::vector<double>&)>& fn) {
  std::vector<Shape> shapes;
  for (const RefTensor& t : inputs) shapes.push_back(t.shape);
  RefTensor out{*broadcast_all(shapes), dtype, {}};
  std::vector<double> operands(inputs.size());
  for_each_index(out.shape, [&](const std::vector<int64_t>& index) {
    for (size_t i = 0; i < inputs.size(); ++i) operands[i] = broadcast_at(inputs[i], index);
    out.values.push_back(fn(operands));
  });
  return out;
}

RefTensor ref_reduce(const RefTensor& x, const std::vector<int64_t>& dims, bool keepdim, DType dtype,
                     const std::function<double(const std::vector<double>&)>& fn) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims)
    if (rank > 0) reduced[static_cast<size_t>(wrap(d, rank))] = true;
  Shape kept;  // keepdim layout, where reduced dims have size 1
  for (int64_t d = 0; d < rank; ++d) kept.push_back(reduced[d] ? 1 : x.shape[d]);
  std::vector<std::vector<double>> buckets(static_cast<size_t>(count_elements(kept)));
  for_each_index(x.shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> k = index;
    for (int64_t d = 0; d < rank; ++d)
      if (reduced[d]) k[d] = 0;
    buckets[static_cast<size_t>(flat_index(kept, k))].push_back(x.at(index));
  });
  RefTensor out{{}, dtype, {}};
  for (int64_t d = 0; d < rank; ++d)
    if (keepdim || !reduced[d]) out.shape.push_back(kept[d]);
  for (const auto& bucket : buckets) out.values.push_back(fn(bucket));
  return out;
}

double round_to_dtype(double v, DType dtype) {
  switch (dtype) {
    case kFloat64:
      return v;
    case kFloat32:
      return static_cast<double>(static_cast<float>(v));
    case kBFloat16:
      return round_significand(v, 8, -125, 3.3895313892515355e38);
    case kFloat16:
      return round_significand(v, 11, -13, 65504.0);
    case kBool:
      return v != 0.0 ? 1.0 : 0.0;
    case kUInt8: {
      double t = std::trunc(v);
      return t - 256.0 * std::floor(t / 256.0);
    }
    case kInt32:
    case kInt64:
      return std::trunc(v);
  }
  return v;
}

}  // namespace ember::test

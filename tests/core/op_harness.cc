// The harness's engine: builds each input as a view (transposed, step-sliced, expanded, selected)
// of a random base buffer, runs the op, reads the outputs back through their own strides, and
// compares them with the case's float64 reference.
#include "tests/core/op_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace ember::test {

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool};
const std::vector<DType> kNumericDTypes = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8};
const std::vector<DType> kFloatingDTypes = {kFloat32, kFloat64, kBFloat16, kFloat16};
const std::vector<DType> kIntegerDTypes = {kInt64, kInt32, kUInt8};

namespace {

// ---- storing and loading elements by hand, so reading results never goes through Ember's copies ----

void store(DType dtype, char* at, double v) {
  switch (dtype) {
    case kFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(at, &x, 4);
      break;
    }
    case kFloat64:
      std::memcpy(at, &v, 8);
      break;
    case kBFloat16: {
      BFloat16 x(static_cast<float>(v));
      std::memcpy(at, &x.bits, 2);
      break;
    }
    case kFloat16: {
      Half x(static_cast<float>(v));
      std::memcpy(at, &x.bits, 2);
      break;
    }
    case kInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(at, &x, 8);
      break;
    }
    case kInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(at, &x, 4);
      break;
    }
    case kUInt8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(at, &x, 1);
      break;
    }
    case kBool: {
      uint8_t x = v != 0.0 ? 1 : 0;
      std::memcpy(at, &x, 1);
      break;
    }
  }
}

double load(DType dtype, const char* at) {
  switch (dtype) {
    case kFloat32: {
      float x;
      std::memcpy(&x, at, 4);
      return x;
    }
    case kFloat64: {
      double x;
      std::memcpy(&x, at, 8);
      return x;
    }
    case kBFloat16: {
      BFloat16 x;
      std::memcpy(&x.bits, at, 2);
      return static_cast<float>(x);
    }
    case kFloat16: {
      Half x;
      std::memcpy(&x.bits, at, 2);
      return static_cast<float>(x);
    }
    case kInt64: {
      int64_t x;
      std::memcpy(&x, at, 8);
      return static_cast<double>(x);
    }
    case kInt32: {
      int32_t x;
      std::memcpy(&x, at, 4);
      return x;
    }
    case kUInt8: {
      uint8_t x;
      std::memcpy(&x, at, 1);
      return x;
    }
    case kBool: {
      uint8_t x;
      std::memcpy(&x, at, 1);
      return x != 0 ? 1.0 : 0.0;
    }
  }
  return 0.0;
}

// ---- layouts: a chain of view steps from a contiguous base buffer to the logical input ----

struct LayoutStep {
  enum class Kind { Transpose, Slice, Select, Expand, ExpandNewDim } kind;
  int64_t dim = 0, other = 0;   // Transpose swaps dim/other; the rest act on dim
  int64_t start = 0, step = 1;  // Slice
  int64_t index = 0, size = 0;  // Select: index `index` of a new dim of `size`
};

Shape step_input_shape(const LayoutStep& s, const Shape& out) {
  Shape in = out;
  switch (s.kind) {
    case LayoutStep::Kind::Transpose:
      std::swap(in[s.dim], in[s.other]);
      break;
    // One spare element past the end, so reading beyond the slice shows up as a wrong value.
    case LayoutStep::Kind::Slice:
      in[s.dim] = s.start + (out[s.dim] > 0 ? (out[s.dim] - 1) * s.step + 1 : 0) + 1;
      break;
    case LayoutStep::Kind::Select:
      in.insert(in.begin() + s.dim, s.size);
      break;
    case LayoutStep::Kind::Expand:
      in[s.dim] = 1;
      break;
    case LayoutStep::Kind::ExpandNewDim:
      in.erase(in.begin());
      break;
  }
  return in;
}

std::vector<int64_t> step_input_index(const LayoutStep& s, std::vector<int64_t> index) {
  switch (s.kind) {
    case LayoutStep::Kind::Transpose:
      std::swap(index[s.dim], index[s.other]);
      break;
    case LayoutStep::Kind::Slice:
      index[s.dim] = s.start + index[s.dim] * s.step;
      break;
    case LayoutStep::Kind::Select:
      index.insert(index.begin() + s.dim, s.index);
      break;
    case LayoutStep::Kind::Expand:
      index[s.dim] = 0;
      break;
    case LayoutStep::Kind::ExpandNewDim:
      index.erase(index.begin());
      break;
  }
  return index;
}

// Applies a step with the negative-index spellings where the API has them.
Tensor step_apply(const LayoutStep& s, const Tensor& in, const Shape& out_shape) {
  switch (s.kind) {
    case LayoutStep::Kind::Transpose:
      return in.transpose(s.dim - in.dim(), s.other);
    case LayoutStep::Kind::Slice: {
      int64_t n = out_shape[s.dim];
      int64_t end = n > 0 ? s.start + (n - 1) * s.step + 1 : s.start;
      return in.slice(s.dim, s.start - in.size(s.dim), end, s.step);
    }
    case LayoutStep::Kind::Select:
      return in.select(s.dim, s.index - s.size);
    case LayoutStep::Kind::Expand:
    case LayoutStep::Kind::ExpandNewDim:
      return in.expand(out_shape);
  }
  return in;
}

std::string describe(const std::vector<LayoutStep>& steps) {
  if (steps.empty()) return "contiguous";
  std::ostringstream out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const LayoutStep& s = steps[i];
    if (i) out << "+";
    switch (s.kind) {
      case LayoutStep::Kind::Transpose:
        out << "transpose(" << s.dim << "," << s.other << ")";
        break;
      case LayoutStep::Kind::Slice:
        out << "slice(dim " << s.dim << ", start " << s.start << ", step " << s.step << ")";
        break;
      case LayoutStep::Kind::Select:
        out << "select(" << s.index << " of a new dim " << s.dim << ")";
        break;
      case LayoutStep::Kind::Expand:
        out << "expand(dim " << s.dim << ")";
        break;
      case LayoutStep::Kind::ExpandNewDim:
        out << "expand(new leading dim)";
        break;
    }
  }
  return out.str();
}

// Layout `variant` for a logical shape, or a select (always possible) when it does not apply.
// Writable inputs never get expanded layouts: their elements would alias.
std::vector<LayoutStep> choose_layout(Rng& rng, int variant, const Shape& shape, bool writable) {
  using Kind = LayoutStep::Kind;
  const int64_t rank = static_cast<int64_t>(shape.size());
  auto transpose = [&] {
    int64_t a = rng.integer(0, rank - 1), b = rng.integer(0, rank - 2);
    if (b >= a) ++b;
    return LayoutStep{Kind::Transpose, a, b};
  };
  auto slice = [&] {
    LayoutStep s{Kind::Slice, rng.integer(0, rank - 1)};
    s.start = rng.integer(0, 1);
    s.step = rng.integer(2, 3);
    return s;
  };
  auto select = [&] {
    LayoutStep s{Kind::Select, rng.integer(0, rank)};
    s.size = 3;
    s.index = rng.integer(1, 2);
    return s;
  };
  switch (variant) {
    case 1:
      if (rank >= 2) return {transpose()};
      break;
    case 2:
      if (rank >= 1) return {slice()};
      break;
    case 3: {
      if (writable) break;
      std::vector<int64_t> candidates;
      for (int64_t d = 0; d < rank; ++d)
        if (shape[d] != 1) candidates.push_back(d);
      if (candidates.empty()) break;
      int64_t d = rng.pick(candidates);
      if (d == 0 && rng.chance(0.5)) return {LayoutStep{Kind::ExpandNewDim}};
      return {LayoutStep{Kind::Expand, d}};
    }
    case 5:
      if (rank >= 2) return {select(), transpose(), slice()};
      break;
    default:
      if (variant == 0) return {};
  }
  return {select()};
}

constexpr int kLayoutVariants = 6;

// One input of a trial: the Ember view, the base it views, and what the reference sees.
struct BuiltInput {
  Tensor view, base;
  std::vector<char> base_bytes;  // the base as created, to detect stray writes
  std::vector<bool> covered;     // base elements the view reaches
  std::vector<LayoutStep> layout;
  RefTensor ref;
};

double draw_value(Rng& rng, const ValueRange& range, DType dtype) {
  if (dtype == kBool) return range.nonzero ? 1.0 : (rng.chance(0.5) ? 1.0 : 0.0);
  if (!range.specials.empty() && is_floating(dtype) && rng.chance(0.25))
    return round_to_dtype(rng.pick(range.specials), dtype);
  double low = range.low, high = range.high;
  if (dtype == kUInt8) low = std::max(low, 0.0);
  for (;;) {
    double v = (range.integers || !is_floating(dtype))
                   ? static_cast<double>(
                         rng.integer(static_cast<int64_t>(std::ceil(low)), static_cast<int64_t>(std::floor(high))))
                   : rng.uniform(low, high);
    if (range.nonzero && std::fabs(v) < 0.25) continue;
    return round_to_dtype(v, dtype);
  }
}

BuiltInput build_input(Rng& rng, const Shape& shape, DType dtype, const ValueRange& range, int variant, bool writable,
                       Device device) {
  BuiltInput in;
  in.layout = choose_layout(rng, variant, shape, writable);
  const size_t nsteps = in.layout.size();
  std::vector<Shape> shapes(nsteps + 1);
  shapes[nsteps] = shape;
  for (size_t i = nsteps; i-- > 0;) shapes[i] = step_input_shape(in.layout[i], shapes[i + 1]);
  const Shape& base_shape = shapes[0];
  const int64_t base_numel = count_elements(base_shape);
  const size_t esize = element_size(dtype);

  std::vector<double> base_values(static_cast<size_t>(base_numel));
  for (double& v : base_values) v = draw_value(rng, range, dtype);
  in.base_bytes.assign(static_cast<size_t>(base_numel) * esize, 0);
  for (int64_t i = 0; i < base_numel; ++i) store(dtype, in.base_bytes.data() + i * esize, base_values[i]);
  in.base = from_buffer(in.base_bytes.data(), base_shape, dtype, device);

  in.view = in.base;
  for (size_t i = 0; i < nsteps; ++i) in.view = step_apply(in.layout[i], in.view, shapes[i + 1]);

  in.ref.shape = shape;
  in.ref.dtype = dtype;
  in.ref.values.reserve(static_cast<size_t>(count_elements(shape)));
  in.covered.assign(static_cast<size_t>(base_numel), false);
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> at = index;
    for (size_t i = nsteps; i-- > 0;) at = step_input_index(in.layout[i], at);
    int64_t flat = flat_index(base_shape, at);
    in.covered[static_cast<size_t>(flat)] = true;
    in.ref.values.push_back(base_values[static_cast<size_t>(flat)]);
  });
  return in;
}

// Element `index` of a host tensor, addressed through its own sizes, strides and offset.
double read_element(const Tensor& host, const std::vector<int64_t>& index) {
  int64_t offset = host.storage_offset();
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * host.strides()[d];
  return load(host.dtype(), static_cast<const char*>(host.storage()->data()) + offset * host.element_size());
}

// What an output element is compared with: the reference rounded to the output's dtype, and the
// scale of the sums behind it (OpCase::sum_terms).
struct Expected {
  double value;
  double magnitude;  // sum |term|; |value| when the case gives none
  int64_t terms;     // the longest sum's length
};

// OpCase::tolerance_scale's bounds.
double allowed_error(const Expected& e, DType dtype, double roundings) {
  switch (dtype) {
    case kFloat64:
      return 1e-12 * roundings + 1e-10 * roundings * std::fabs(e.value);
    case kFloat32:
      return 1e-5 * roundings + 1e-5 * roundings * std::fabs(e.value);
    case kBFloat16:
    case kFloat16: {
      const double u = std::ldexp(1.0, dtype == kBFloat16 ? -8 : -11);
      const double smallest_normal = std::ldexp(1.0, dtype == kBFloat16 ? -126 : -14);
      const double float32_sums = static_cast<double>(e.terms) * std::ldexp(1.0, -24);
      return (roundings + 1) * u * (std::fabs(e.value) + smallest_normal) +
             ((roundings - 1) * u + float32_sums) * e.magnitude;
    }
    default:
      return 0.0;
  }
}

bool close_enough(double got, const Expected& e, DType dtype, double roundings, bool exact) {
  if (std::isnan(e.value)) return std::isnan(got);
  // Exact: floating zeros keep their sign too.
  if (exact) return got == e.value && (!is_floating(dtype) || std::signbit(got) == std::signbit(e.value));
  if (std::isinf(e.value) || !is_floating(dtype)) return got == e.value;
  return std::fabs(got - e.value) <= allowed_error(e, dtype, roundings);
}

std::string shape_text(const Shape& s) { return shape_str(s); }

std::string args_text(const OpArgs& args) {
  std::ostringstream out;
  out << "dims=" << shape_str(args.dims) << " keepdim=" << (args.keepdim ? "true" : "false") << " count=" << args.count;
  if (!args.params.empty()) out << " params=" << shape_str(args.params);
  return out.str();
}

std::string index_text(const std::vector<int64_t>& index) { return shape_str(index); }

// Compares one output with its reference (and, for sums of products, the reference of the
// inputs' absolute values); returns an empty string when they agree.
std::string compare_output(const Tensor& got, const RefTensor& want, const RefTensor* magnitude, int64_t terms,
                           Device device, const OpCase& c) {
  std::ostringstream out;
  if (!got.defined()) return "output is undefined";
  if (got.device() != device) {
    out << "output on " << got.device().str() << ", expected " << device.str();
    return out.str();
  }
  if (got.sizes() != want.shape) {
    out << "shape " << shape_text(got.sizes()) << ", expected " << shape_text(want.shape);
    return out.str();
  }
  if (got.dtype() != want.dtype) {
    out << "dtype " << dtype_name(got.dtype()) << ", expected " << dtype_name(want.dtype);
    return out.str();
  }
  Tensor host = got.to(Device(kCPU));
  std::string mismatch;
  int64_t flat = 0;
  for_each_index(want.shape, [&](const std::vector<int64_t>& index) {
    const size_t i = static_cast<size_t>(flat++);
    const double exact_value = want.values[i];
    double scale = std::fabs(exact_value);
    if (magnitude)
      scale = magnitude->values[i];
    else if (!want.magnitude.empty())
      scale = want.magnitude[i];
    Expected expected{round_to_dtype(exact_value, want.dtype), scale, terms};
    double value = read_element(host, index);
    if (mismatch.empty() && !close_enough(value, expected, want.dtype, c.tolerance_scale, c.exact)) {
      std::ostringstream m;
      m.precision(10);
      m << "at " << index_text(index) << ": got " << value << ", expected " << expected.value;
      if (c.exact)
        m << " exactly";
      else if (is_floating(want.dtype))
        m << " within " << allowed_error(expected, want.dtype, c.tolerance_scale);
      if (magnitude) m << " (sum of " << terms << " terms of total magnitude " << expected.magnitude << ")";
      mismatch = m.str();
    }
  });
  return mismatch;
}

// Empty when running `c` raises the ember::Error it expects; otherwise what happened instead.
std::string missing_error(const OpCase& c, const std::vector<Tensor>& inputs, const OpArgs& args) {
  const std::string wanted = "an Error containing \"" + c.expect_error + "\"";
  try {
    c.run(inputs, args);
  } catch (const Error& e) {
    if (std::string(e.what()).find(c.expect_error) != std::string::npos) return "";
    return std::string(" raised \"") + e.what() + "\", expected " + wanted;
  } catch (const std::exception& e) {
    return std::string(" threw a non-Error exception \"") + e.what() + "\", expected " + wanted;
  }
  return " returned, expected " + wanted;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::vector<std::string> check_op_case(const OpCase& c, Device device, const HarnessOptions& options) {
  std::vector<std::string> failures;
  Rng rng(fnv1a(c.name) + (options.large ? 1 : 0));
  detail::set_large_shapes(options.large);
  for (DType dtype : c.dtypes) {
    if (!options.only_dtypes.empty() &&
        std::find(options.only_dtypes.begin(), options.only_dtypes.end(), dtype) == options.only_dtypes.end())
      continue;
    for (int trial = 0; trial < options.trials && failures.size() < 4; ++trial) {
      OpArgs args;
      std::vector<Shape> shapes = c.shapes(rng, args, c.allow_empty);
      std::vector<BuiltInput> built;
      std::vector<Tensor> tensors;
      std::vector<RefTensor> refs;
      try {
        for (size_t i = 0; i < shapes.size(); ++i) {
          const InputSpec& spec = c.inputs[std::min(i, c.inputs.size() - 1)];
          int variant = (trial + static_cast<int>(i)) % kLayoutVariants;
          bool writable = static_cast<int>(i) == c.inplace_dest;
          built.push_back(
              build_input(rng, shapes[i], spec.dtype.value_or(dtype), spec.range, variant, writable, device));
          tensors.push_back(built.back().view);
          refs.push_back(built.back().ref);
        }
      } catch (const std::exception& e) {
        failures.push_back(c.name + " [" + dtype_name(dtype) + "]: building a view input threw: " + e.what());
        continue;
      }
      auto context = [&] {
        std::ostringstream out;
        out << c.name << " [" << dtype_name(dtype) << ", trial " << trial << ", " << args_text(args) << "] inputs:";
        for (const BuiltInput& in : built)
          out << " " << shape_text(in.view.sizes()) << " " << dtype_name(in.view.dtype()) << " strides "
              << shape_text(in.view.strides()) << " (" << describe(in.layout) << ");";
        return out.str();
      };
      if (!c.expect_error.empty()) {
        std::string problem = missing_error(c, tensors, args);
        if (!problem.empty()) failures.push_back(context() + problem);
        continue;
      }
      std::vector<RefTensor> want = c.reference(refs, args);
      std::vector<RefTensor> magnitudes;
      int64_t terms = 1;
      if (c.sum_terms) {
        std::vector<RefTensor> absolute = refs;
        for (RefTensor& r : absolute)
          for (double& v : r.values) v = std::fabs(v);
        magnitudes = c.reference(absolute, args);
        terms = c.sum_terms(shapes, args);
      }
      std::vector<Tensor> got;
      try {
        got = c.run(tensors, args);
      } catch (const std::exception& e) {
        failures.push_back(context() + " threw: " + e.what());
        continue;
      }
      if (got.size() != want.size()) {
        failures.push_back(context() + " returned " + std::to_string(got.size()) + " outputs, expected " +
                           std::to_string(want.size()));
        continue;
      }
      for (size_t k = 0; k < got.size(); ++k) {
        const RefTensor* magnitude = k < magnitudes.size() ? &magnitudes[k] : nullptr;
        std::string problem = compare_output(got[k], want[k], magnitude, terms, device, c);
        if (!problem.empty()) failures.push_back(context() + " output " + std::to_string(k) + ": " + problem);
      }
      if (c.inplace_dest >= 0 && (got.empty() || got[0].storage() != tensors[c.inplace_dest].storage() ||
                                  got[0].storage_offset() != tensors[c.inplace_dest].storage_offset()))
        failures.push_back(context() + " in-place result is not the destination view");
      // Inputs stay untouched, and an in-place op writes nothing outside its destination view.
      for (size_t i = 0; i < built.size(); ++i) {
        Tensor host = built[i].base.to(Device(kCPU));
        const char* now = static_cast<const char*>(host.storage()->data());
        const size_t esize = host.element_size();
        for (int64_t e = 0; e < host.numel(); ++e) {
          bool may_change = static_cast<int>(i) == c.inplace_dest && built[i].covered[static_cast<size_t>(e)];
          if (!may_change && std::memcmp(now + e * esize, built[i].base_bytes.data() + e * esize, esize) != 0) {
            failures.push_back(context() + " input " + std::to_string(i) + " was modified at base element " +
                               std::to_string(e));
            break;
          }
        }
      }
    }
  }
  detail::set_large_shapes(false);
  return failures;
}

TrialInputs make_trial_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed) {
  Rng rng(seed);
  TrialInputs trial;
  std::vector<Shape> shapes = c.shapes(rng, trial.args, false);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const InputSpec& spec = c.inputs[std::min(i, c.inputs.size() - 1)];
    trial.tensors.push_back(build_input(rng, shapes[i], spec.dtype.value_or(dtype), spec.range, 0, false, device).view);
  }
  return trial;
}

}  // namespace ember::test

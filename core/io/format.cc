// Printing in PyTorch's style: tensor([[1., 2.],\n        [3., 4.]], dtype=float64), with
// fixed/scientific/integer modes chosen from the values, rows wrapped at 80 columns and "..."
// summaries above 1000 elements.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/autograd_hooks.h"
#include "core/ops.h"

namespace ember {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  enum class Mode { Integer, IntegerFloat, Fixed, Scientific, Bool } mode = Mode::Fixed;
  int width = 1;

  std::string format(double v) const {
    char buffer[64];
    switch (mode) {
      case Mode::Bool:
        return v != 0 ? "True" : "False";
      case Mode::Integer:
        std::snprintf(buffer, sizeof(buffer), "%lld", static_cast<long long>(v));
        break;
      case Mode::IntegerFloat:
        if (std::isfinite(v))
          std::snprintf(buffer, sizeof(buffer), "%.0f.", v);
        else
          std::snprintf(buffer, sizeof(buffer), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
      case Mode::Fixed:
        if (std::isfinite(v))
          std::snprintf(buffer, sizeof(buffer), "%.4f", v);
        else
          std::snprintf(buffer, sizeof(buffer), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
      case Mode::Scientific:
        if (std::isfinite(v))
          std::snprintf(buffer, sizeof(buffer), "%.4e", v);
        else
          std::snprintf(buffer, sizeof(buffer), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
    }
    return buffer;
  }
  std::string padded(double v) const {
    std::string s = format(v);
    return std::string(width > static_cast<int>(s.size()) ? width - s.size() : 0, ' ') + s;
  }
};

// Values that will be shown (all, or the summarised edges).
void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item<double>());
    return;
  }
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t.select(0, i), summarize, out);
  }
}

// PyTorch's _Formatter: for floats, the style and the column width come from the nonzero finite
// values only (nan, inf and zeros are padded to fit, never widen the columns).
Formatter choose_formatter(const Tensor& t, const std::vector<double>& values) {
  Formatter f;
  if (t.dtype() == kBool || !is_floating(t.dtype())) {
    f.mode = t.dtype() == kBool ? Formatter::Mode::Bool : Formatter::Mode::Integer;
    for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
    return f;
  }
  std::vector<double> shown;
  for (double v : values)
    if (std::isfinite(v) && v != 0) shown.push_back(v);
  f.mode = Formatter::Mode::IntegerFloat;
  if (shown.empty()) return f;
  bool all_integer = true;
  double max_abs = 0, min_abs = INFINITY;
  for (double v : shown) {
    if (v != std::floor(v)) all_integer = false;
    max_abs = std::max(max_abs, std::fabs(v));
    min_abs = std::min(min_abs, std::fabs(v));
  }
  const bool wide_range = max_abs / min_abs > 1000.0 || max_abs > 1e8;
  if (all_integer)
    f.mode = wide_range ? Formatter::Mode::Scientific : Formatter::Mode::IntegerFloat;
  else
    f.mode = wide_range || min_abs < 1e-4 ? Formatter::Mode::Scientific : Formatter::Mode::Fixed;
  for (double v : shown) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

constexpr int kLineWidth = 80;

void print_rec(std::ostream& out, const Tensor& t, const Formatter& f, bool summarize, int indent) {
  if (t.dim() == 0) {
    out << f.padded(t.item<double>());
    return;
  }
  int64_t n = t.size(0);
  std::vector<int64_t> shown;  // -1 marks the "..." between the edges
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      shown.push_back(-1);
      i = n - kEdgeItems;
    }
    shown.push_back(i);
  }
  out << "[";
  if (t.dim() == 1) {
    // A vector wraps to as many elements per line as fit in kLineWidth after the indent; the
    // ellipsis counts as one element and is spelled " ..." like PyTorch's.
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / (f.width + 2));
    for (size_t k = 0; k < shown.size(); ++k) {
      if (k > 0) out << (k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : std::string(", "));
      if (shown[k] < 0)
        out << " ...";
      else
        out << f.padded(t.select(0, shown[k]).item<double>());
    }
  } else {
    // Rows of a matrix go on new lines; each further dim adds a blank line between blocks.
    std::string separator = "," + std::string(t.dim() - 1, '\n') + std::string(indent + 1, ' ');
    for (size_t k = 0; k < shown.size(); ++k) {
      if (k > 0) out << separator;
      if (shown[k] < 0)
        out << "...";
      else
        print_rec(out, t.select(0, shown[k]), f, summarize, indent + 1);
    }
  }
  out << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "[ undefined Tensor ]";
  std::ostringstream out;
  Tensor host = detach().to(Device(kCPU));
  bool summarize = numel() > kSummarizeThreshold;
  out << "tensor(";
  if (numel() == 0 && dim() >= 1) {
    out << "[]";
    if (dim() > 1) {  // PyTorch spells the size as a tuple: size=(0, 3)
      std::string size = shape_str(sizes());
      out << ", size=(" << size.substr(1, size.size() - 2) << ")";
    }
  } else {
    std::vector<double> values;
    collect(host, summarize, values);
    Formatter f = choose_formatter(host, values);
    print_rec(out, host, f, summarize, 7);
  }
  if (!device().is_cpu()) out << ", device='" << device().str() << "'";
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool) out << ", dtype=" << dtype_name(dtype());
  if (grad_fn() != nullptr && autograd_hooks() != nullptr) {
    out << ", grad_fn=<" << autograd_hooks()->node_name(*grad_fn()) << ">";
  } else if (requires_grad()) {
    out << ", requires_grad=True";
  }
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << tensor.str(); }

}  // namespace ember

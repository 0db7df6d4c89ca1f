// Printing in PyTorch's style: tensor([[1., 2.],\n        [3., 4.]], dtype=float64), with
// fixed/scientific/integer modes chosen from the values and "..." summaries above 1000 elements.
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
      case Mode::Bool: return v != 0 ? "True" : "False";
      case Mode::Integer: std::snprintf(buffer, sizeof(buffer), "%lld", static_cast<long long>(v)); break;
      case Mode::IntegerFloat:
        if (std::isfinite(v)) std::snprintf(buffer, sizeof(buffer), "%.0f.", v);
        else std::snprintf(buffer, sizeof(buffer), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
      case Mode::Fixed:
        if (std::isfinite(v)) std::snprintf(buffer, sizeof(buffer), "%.4f", v);
        else std::snprintf(buffer, sizeof(buffer), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
      case Mode::Scientific:
        if (std::isfinite(v)) std::snprintf(buffer, sizeof(buffer), "%.4e", v);
        else std::snprintf(buffer, sizeof(buffer), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
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

Formatter choose_formatter(const Tensor& t, const std::vector<double>& values) {
  Formatter f;
  if (t.dtype() == kBool) {
    f.mode = Formatter::Mode::Bool;
  } else if (!is_floating(t.dtype())) {
    f.mode = Formatter::Mode::Integer;
  } else {
    bool all_integer = true;
    double max_abs = 0, min_abs = INFINITY;
    bool any_finite_nonzero = false;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      if (v != std::floor(v)) all_integer = false;
      double a = std::fabs(v);
      if (a == 0) continue;
      any_finite_nonzero = true;
      max_abs = std::max(max_abs, a);
      min_abs = std::min(min_abs, a);
    }
    if (all_integer) {
      f.mode = any_finite_nonzero && max_abs > 1e8 ? Formatter::Mode::Scientific : Formatter::Mode::IntegerFloat;
    } else if (any_finite_nonzero && (max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4)) {
      f.mode = Formatter::Mode::Scientific;
    } else {
      f.mode = Formatter::Mode::Fixed;
    }
  }
  for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

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
  // Rows of a matrix go on new lines; each further dim adds a blank line between blocks.
  std::string separator = t.dim() == 1 ? ", " : "," + std::string(t.dim() - 1, '\n') + std::string(indent + 1, ' ');
  out << "[";
  for (size_t k = 0; k < shown.size(); ++k) {
    if (k > 0) out << separator;
    if (shown[k] < 0) out << "...";
    else print_rec(out, t.select(0, shown[k]), f, summarize, indent + 1);
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
    if (dim() > 1) out << ", size=" << shape_str(sizes());
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

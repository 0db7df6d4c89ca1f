// Every public op of the op table (tests/core/op_cases.h) handed one bad tensor argument at a time,
// on one small trial per case: the argument on another device (the CPU, cuda:0, cuda:1), of a
// wrong dtype, or a non-contiguous view. Another device must raise an ember::Error that names the
// op the user called and both devices (a 0-dim CPU tensor may instead join an elementwise op, and
// copy_'s source may live anywhere: then the answer must be right); a wrong dtype must raise such
// an Error or give the answer that the same values in the right dtype give; a view must give the
// contiguous answer. Nothing may crash, hang or return garbage.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "cuda/api.h"
#include "tests/core/op_cases.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr uint64_t kSeed = 31;

std::vector<Device> all_devices() {
  std::vector<Device> devices = {Device(kCPU)};
  for (int i = 0; i < std::min(cuda::device_count(), 2); ++i) devices.push_back(Device::cuda(i));
  return devices;
}

// The cases whose run calls public ops (not the kernel table) on arguments it accepts (an error
// case's arguments are refused whatever their devices: the op table checks its message).
std::vector<OpCase> public_cases() {
  std::vector<OpCase> cases;
  for (OpCase& c : all_op_cases())
    if (!c.kernel_table && c.expect_error.empty()) cases.push_back(std::move(c));
  return cases;
}

DType trial_dtype(const OpCase& c) {
  return std::find(c.dtypes.begin(), c.dtypes.end(), kFloat32) != c.dtypes.end() ? kFloat32 : c.dtypes[0];
}

// What one call of a case did, its outputs copied to the CPU.
struct Outcome {
  enum Kind { Returned, Raised, RaisedOther } kind = Returned;
  std::string message;
  std::vector<Tensor> outputs;
};

// Copies of a trial's inputs for one call: in-place cases write into their first.
std::vector<Tensor> fresh(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> copies;
  for (const Tensor& t : inputs) copies.push_back(t.clone());
  return copies;
}

// Runs `c`, then waits for every device, so that a kernel's deferred error belongs to this call.
Outcome call(const OpCase& c, const std::vector<Tensor>& inputs, const OpArgs& args) {
  Outcome out;
  try {
    for (const Tensor& t : c.run(inputs, args)) out.outputs.push_back(t.defined() ? t.to(Device(kCPU)) : t);
    for (int i = 0; i < cuda::device_count(); ++i) cuda::synchronize(i);
  } catch (const Error& e) {
    out.kind = Outcome::Raised;
    out.message = e.what();
  } catch (const std::exception& e) {
    out.kind = Outcome::RaisedOther;
    out.message = e.what();
  }
  return out;
}

std::string describe(const Outcome& o) {
  switch (o.kind) {
    case Outcome::Returned:
      return "returned";
    case Outcome::Raised:
      return "raised \"" + o.message + "\"";
    case Outcome::RaisedOther:
      return "raised a non-ember exception \"" + o.message + "\"";
  }
  return "?";
}

// Whether the message opens with one of the ops the case calls: "conv2d: ...".
bool names_op(const OpCase& c, const std::string& message) {
  const std::vector<std::string> ops = c.ops.empty() ? std::vector<std::string>{c.name} : c.ops;
  for (const std::string& op : ops)
    if (message.rfind(op + ": ", 0) == 0) return true;
  return false;
}

// Relative tolerance between outputs of dtypes a and b: the coarser one's. A case of a 16-bit
// dtype handed float32 activations (batch norm with float32 weights) answers in float32, more
// precisely than the 16-bit answer it is compared with.
double tolerance(DType a, DType b) {
  if (a == kBFloat16 || b == kBFloat16) return 1.6e-2;
  if (a == kFloat16 || b == kFloat16) return 2e-3;
  return 1e-3;
}

// Outputs agree in number, shapes and values (as doubles, `got`'s dtype deciding how `want` is
// rounded), NaN matching NaN. Empty when they do, else what differs.
std::string compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return "a different number of outputs";
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].defined() != want[k].defined()) return "output " + std::to_string(k) + " defined only once";
    if (!got[k].defined()) continue;
    if (got[k].sizes() != want[k].sizes())
      return "output " + std::to_string(k) + " of shape " + shape_str(got[k].sizes()) + ", expected " +
             shape_str(want[k].sizes());
    std::vector<double> g = got[k].to(kFloat64).contiguous().to_vector<double>();
    std::vector<double> w = want[k].to(got[k].dtype()).to(kFloat64).contiguous().to_vector<double>();
    const double rtol = tolerance(got[k].dtype(), want[k].dtype());
    for (size_t i = 0; i < g.size(); ++i) {
      const bool same = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                        std::fabs(g[i] - w[i]) <= rtol * (1 + std::fabs(w[i]));
      if (!same) {
        std::ostringstream out;
        out << "output " << k << " element " << i << " is " << g[i] << ", expected " << w[i];
        return out.str();
      }
    }
  }
  return "";
}

std::string argument_text(const OpCase& c, size_t i, const Tensor& t) {
  std::ostringstream out;
  out << c.name << ": argument " << i << " " << shape_str(t.sizes()) << " " << dtype_name(t.dtype()) << " on "
      << t.device().str();
  return out.str();
}

// Whether `inputs` may meet in one op: besides arguments that may live anywhere, all on one device
// or 0-dim CPU tensors, which join elementwise ops on any device (the op may still refuse).
bool may_meet(const OpCase& c, const std::vector<Tensor>& inputs) {
  std::optional<Device> device;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (c.inputs[std::min(i, c.inputs.size() - 1)].any_device || (t.dim() == 0 && t.device().is_cpu())) continue;
    if (device && *device != t.device()) return false;
    device = t.device();
  }
  return true;
}

// A copy of `t` whose last dim has stride 2: a view into a buffer twice its size.
Tensor strided_copy(const Tensor& t) {
  Shape wide = t.sizes();
  wide.back() *= 2;
  Tensor view = zeros(wide, t.options()).slice(-1, 0, wide.back(), 2);
  view.copy_(t);
  return view;
}

// Runs fn(case, base, trial) for every public case, a Catch section each (`-c NAME` runs one), with
// one trial built on each base device.
template <class Fn>
void walk(const std::vector<Device>& bases, Fn fn) {
  for (const OpCase& c : public_cases()) {
    DYNAMIC_SECTION(c.name) {
      for (Device base : bases) fn(c, base, make_trial_inputs(c, trial_dtype(c), base, kSeed));
    }
  }
}

// Passes when `got` raised an Error naming the op (and `also`, when given), or returned what
// `want()` returns; fails with `what` otherwise.
void expect_error_or(const OpCase& c, const Outcome& got, const std::string& what, const std::function<Outcome()>& want,
                     const std::vector<std::string>& also = {}) {
  if (got.kind == Outcome::Raised && names_op(c, got.message) &&
      std::all_of(also.begin(), also.end(),
                  [&](const std::string& s) { return got.message.find(s) != std::string::npos; }))
    return;
  if (got.kind != Outcome::Returned || !want) {
    FAIL_CHECK(what);
    return;
  }
  const Outcome expected = want();
  if (expected.kind != Outcome::Returned) {
    FAIL_CHECK(what << ", while the call it should equal " << describe(expected));
    return;
  }
  const std::string diff = compare(got.outputs, expected.outputs);
  if (!diff.empty()) FAIL_CHECK(what << ", but " << diff);
}

// The contiguous inputs' result, which must succeed.
Outcome baseline_of(const OpCase& c, Device base, const TrialInputs& trial) {
  Outcome baseline = call(c, fresh(trial.tensors), trial.args);
  INFO(c.name << " on " << base.str() << ": " << describe(baseline));
  REQUIRE(baseline.kind == Outcome::Returned);
  return baseline;
}

}  // namespace

TEST_CASE("a tensor argument on another device raises an Error naming the op and both devices") {
  const std::vector<Device> devices = all_devices();
  REQUIRE(devices.size() >= 2);
  walk({devices[1], devices[0]}, [&](const OpCase& c, Device base, const TrialInputs& trial) {
    if (trial.tensors.size() < 2) return;  // nothing to disagree with
    const Outcome baseline = baseline_of(c, base, trial);
    for (size_t i = 0; i < trial.tensors.size(); ++i) {
      for (Device other : devices) {
        if (other == base) continue;
        std::vector<Tensor> inputs = fresh(trial.tensors);
        inputs[i] = trial.tensors[i].to(other);
        const Outcome got = call(c, inputs, trial.args);
        // Tensors that may meet (copy_'s source, a 0-dim CPU scalar) must give the right answer.
        std::function<Outcome()> want;
        if (may_meet(c, inputs)) want = [&] { return baseline; };
        expect_error_or(c, got, argument_text(c, i, inputs[i]) + ", the rest on " + base.str() + ": " + describe(got),
                        want, {base.str(), other.str()});
      }
    }
  });
}

TEST_CASE("a tensor argument of a wrong dtype raises an Error naming the op or gives the answer of its values") {
  const std::vector<Device> devices = all_devices();
  REQUIRE(devices.size() >= 2);
  walk({devices[0], devices[1]}, [&](const OpCase& c, Device, const TrialInputs& trial) {
    for (size_t i = 0; i < trial.tensors.size(); ++i) {
      const DType right = trial.tensors[i].dtype();
      std::vector<DType> wrong = {kInt64, kFloat32, kBool};
      if (right == kFloat32) wrong.push_back(kFloat64);
      for (DType dtype : wrong) {
        if (dtype == right) continue;
        std::vector<Tensor> inputs = fresh(trial.tensors);
        inputs[i] = trial.tensors[i].to(dtype);
        const Outcome got = call(c, inputs, trial.args);
        // What the same values give in the dtype the case expects.
        const auto same_values = [&] {
          std::vector<Tensor> expected_inputs = fresh(trial.tensors);
          expected_inputs[i] = trial.tensors[i].to(dtype).to(right);
          return call(c, expected_inputs, trial.args);
        };
        expect_error_or(c, got, argument_text(c, i, inputs[i]) + ": " + describe(got), same_values);
      }
    }
  });
}

TEST_CASE("a non-contiguous tensor argument gives the contiguous answer") {
  const std::vector<Device> devices = all_devices();
  REQUIRE(devices.size() >= 2);
  walk({devices[0], devices[1]}, [&](const OpCase& c, Device base, const TrialInputs& trial) {
    const Outcome baseline = baseline_of(c, base, trial);
    for (size_t i = 0; i < trial.tensors.size(); ++i) {
      if (trial.tensors[i].numel() < 2) continue;
      std::vector<Tensor> inputs = fresh(trial.tensors);
      inputs[i] = strided_copy(trial.tensors[i]);
      REQUIRE_FALSE(inputs[i].is_contiguous());
      const Outcome got = call(c, inputs, trial.args);
      expect_error_or(
          c, got, argument_text(c, i, inputs[i]) + " strides " + shape_str(inputs[i].strides()) + ": " + describe(got),
          [&] { return baseline; });
    }
  });
}

// PyTorch's exception to the rule: a 0-dim CPU tensor joins an elementwise op on a GPU, and gives
// what the same 0-dim tensor on the GPU gives.
TEST_CASE("a 0-dim CPU tensor joins elementwise ops on a GPU") {
  REQUIRE(cuda::device_count() >= 1);
  const Device gpu = Device::cuda(0);
  std::vector<OpCase> cases = binary_cases();
  for (OpCase& c : copy_cases())
    if (c.inplace_dest == 0 && c.inputs.size() >= 2) cases.push_back(std::move(c));
  int calls = 0;
  for (const OpCase& c : cases) {
    const TrialInputs trial = make_trial_inputs(c, trial_dtype(c), gpu, kSeed);
    for (size_t i = 0; i < trial.tensors.size(); ++i) {
      if (static_cast<int>(i) == c.inplace_dest) continue;  // the destination keeps its shape
      std::vector<Tensor> inputs = fresh(trial.tensors);
      inputs[i] = trial.tensors[i].reshape({-1})[0].clone();
      const Outcome want = call(c, inputs, trial.args);
      INFO(c.name << " with argument " << i << " a 0-dim tensor on " << gpu.str() << ": " << describe(want));
      REQUIRE(want.kind == Outcome::Returned);
      inputs = fresh(trial.tensors);
      inputs[i] = trial.tensors[i].reshape({-1})[0].to(Device(kCPU));
      const Outcome got = call(c, inputs, trial.args);
      INFO("on the CPU: " << describe(got));
      CHECK(got.kind == Outcome::Returned);
      if (got.kind == Outcome::Returned) CHECK(compare(got.outputs, want.outputs) == "");
      ++calls;
    }
  }
  CHECK(calls > 40);
}

// The walks above skip nothing they should cover: a case renamed or dropped from the table would
// silently take its op out of them.
TEST_CASE("the walks cover the public ops the issue found unchecked") {
  std::set<std::string> names;
  for (const OpCase& c : public_cases()) names.insert(c.name);
  for (const char* name : {"add",
                           "where",
                           "matmul",
                           "mm",
                           "bmm",
                           "cat_2",
                           "stack",
                           "copy_",
                           "add_",
                           "gather",
                           "scatter_add",
                           "embedding",
                           "embedding_int32",
                           "embedding_backward",
                           "batch_norm_train",
                           "batch_norm_eval",
                           "batch_norm_relu_eval",
                           "conv2d_bias",
                           "conv2d_backward",
                           "max_pool2d_backward",
                           "linear_bias",
                           "layer_norm_affine",
                           "mse_loss",
                           "cross_entropy",
                           "cross_entropy_weight_smoothing",
                           "nll_loss_weight_sum",
                           "binary_cross_entropy_with_logits",
                           "dropout",
                           "set_grad"}) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
}

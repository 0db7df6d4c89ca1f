// Gradient-check cases for the layers of autograd/functional.h: linear, conv2d, pooling,
// batch_norm, layer_norm, dropout, the activation functions and softmax, on odd sizes and on
// transposed, strided, expanded and channels-last inputs. Losses and index ops: cases_loss.cc.
#include <string>

#include "autograd/functional.h"
#include "tests/autograd/cases.h"

namespace ember::testing {

namespace {

// The op sees an [N, C, H, W] tensor laid out channels-last: its leaf is [N, H, W, C].
Tensor channels_last(const Tensor& nhwc) { return nhwc.permute({0, 3, 1, 2}); }

// [N, H, W, C] from an [N, C, H, W] shape, for the leaf of a channels-last input.
Shape nhwc(const Shape& nchw) { return {nchw[0], nchw[2], nchw[3], nchw[1]}; }

// A constant operand: values evenly spread over [-1, 1], on the device and dtype of `like`.
Tensor ramp(const Shape& shape, const Tensor& like) {
  return linspace(-1.0, 1.0, shape_numel(shape), like.options()).view(shape);
}

void add_linear(std::vector<GradCase>& cases) {
  auto with_bias = [](const Inputs& x) { return linear(x[0], x[1], x[2]); };
  cases.push_back(
      {.name = "linear.matrix", .fn = with_bias, .inputs = {{.shape = {3, 4}}, {.shape = {5, 4}}, {.shape = {5}}}});
  cases.push_back({.name = "linear.no_bias",
                   .fn = [](const Inputs& x) { return linear(x[0], x[1]); },
                   .inputs = {{.shape = {2, 3}}, {.shape = {1, 3}}}});
  cases.push_back(
      {.name = "linear.vector", .fn = with_bias, .inputs = {{.shape = {4}}, {.shape = {3, 4}}, {.shape = {3}}}});
  cases.push_back({.name = "linear.batched.noncontiguous",
                   .fn = with_bias,
                   .inputs = {{.shape = {2, 3, 5}, .layout = Layout::Transposed},
                              {.shape = {3, 5}, .layout = Layout::Strided},
                              {.shape = {3}, .layout = Layout::Strided}}});
  cases.push_back({.name = "linear.expanded_input",
                   .fn = with_bias,
                   .inputs = {{.shape = {3, 2, 4}, .layout = Layout::Expanded},
                              {.shape = {5, 4}, .layout = Layout::Transposed},
                              {.shape = {5}}}});
}

// float64 convolutions run on the im2col reference path (core/cpu/conv/conv_reference.cc): oneDNN's
// primitives are float32/bf16 only, so these cases check the reference formulas, and the fast
// path is checked against the reference elsewhere (tests/core).
struct ConvCase {
  std::string name;
  Shape input, weight;
  bool bias = true;
  Size2 stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  Layout layout = Layout::Contiguous;  // of input and weight
  bool input_channels_last = false;
};

void add_conv(std::vector<GradCase>& cases) {
  const std::vector<ConvCase> convs = {
      {.name = "basic", .input = {2, 3, 5, 4}, .weight = {2, 3, 3, 3}},
      {.name = "padding", .input = {1, 2, 5, 5}, .weight = {3, 2, 3, 3}, .padding = 1},
      {.name = "stride2_padding1", .input = {2, 2, 7, 6}, .weight = {2, 2, 3, 3}, .stride = 2, .padding = 1},
      {.name = "asymmetric",
       .input = {1, 3, 6, 7},
       .weight = {2, 3, 2, 3},
       .stride = {2, 1},
       .padding = {0, 2},
       .dilation = {1, 2}},
      {.name = "dilation2.no_bias",
       .input = {1, 2, 7, 7},
       .weight = {2, 2, 3, 3},
       .bias = false,
       .padding = 2,
       .dilation = 2},
      {.name = "groups2", .input = {2, 4, 5, 5}, .weight = {6, 2, 3, 3}, .padding = 1, .groups = 2},
      {.name = "depthwise.no_bias",
       .input = {1, 3, 5, 4},
       .weight = {3, 1, 3, 3},
       .bias = false,
       .stride = 2,
       .padding = 1,
       .groups = 3},
      {.name = "pointwise", .input = {2, 5, 3, 3}, .weight = {3, 5, 1, 1}},
      {.name = "kernel_covers_input", .input = {1, 1, 2, 3}, .weight = {1, 1, 3, 3}, .padding = 1},
      {.name = "stride_exceeds_kernel", .input = {1, 2, 7, 8}, .weight = {2, 2, 2, 2}, .stride = 3},
      {.name = "channels_last",
       .input = {2, 3, 5, 5},
       .weight = {4, 3, 3, 3},
       .padding = 1,
       .input_channels_last = true},
      {.name = "transposed", .input = {1, 3, 4, 5}, .weight = {2, 3, 3, 2}, .layout = Layout::Transposed},
      {.name = "strided.groups3",
       .input = {2, 3, 4, 5},
       .weight = {3, 1, 2, 2},
       .stride = {1, 2},
       .groups = 3,
       .layout = Layout::Strided},
      {.name = "expanded_batch",
       .input = {3, 2, 4, 4},
       .weight = {2, 2, 3, 3},
       .padding = 1,
       .layout = Layout::Expanded},
  };
  for (const ConvCase& c : convs) {
    auto fn = [c](const Inputs& x) {
      Tensor input = c.input_channels_last ? channels_last(x[0]) : x[0];
      return conv2d(input, x[1], c.bias ? x[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
    };
    // An Expanded case expands the input's batch only; a Strided one strides the bias too.
    const Layout weight_layout = c.layout == Layout::Expanded ? Layout::Contiguous : c.layout;
    const Layout bias_layout = c.layout == Layout::Strided ? Layout::Strided : Layout::Contiguous;
    std::vector<InputSpec> inputs = {{.shape = c.input_channels_last ? nhwc(c.input) : c.input, .layout = c.layout},
                                     {.shape = c.weight, .layout = weight_layout}};
    if (c.bias) inputs.push_back({.shape = {c.weight[0]}, .layout = bias_layout});
    cases.push_back({.name = "conv." + c.name, .fn = fn, .inputs = inputs});
  }
  // Constant operands: only the other gradients are asked for.
  cases.push_back({.name = "conv.constant_weight",
                   .fn =
                       [](const Inputs& x) {
                         return conv2d(x[0], ramp({2, 3, 3, 3}, x[0]), x[1], 1, 1);
                       },
                   .inputs = {{.shape = {1, 3, 4, 5}}, {.shape = {2}}}});
  cases.push_back({.name = "conv.bias_only",
                   .fn =
                       [](const Inputs& x) {
                         return conv2d(ramp({2, 2, 4, 4}, x[0]), ramp({3, 2, 2, 2}, x[0]), x[0], 2);
                       },
                   .inputs = {{.shape = {3}}}});
}

// Pooling inputs are a shuffled grid (InputSpec::distinct), so no window has a near-tie that the
// finite difference could flip.
void add_pool(std::vector<GradCase>& cases) {
  auto pooled = [&cases](const std::string& name, Shape shape, Layout layout, bool cl, auto pool) {
    auto fn = [cl, pool](const Inputs& x) { return pool(cl ? channels_last(x[0]) : x[0]); };
    cases.push_back({.name = "pool." + name,
                     .fn = fn,
                     .inputs = {{.shape = cl ? nhwc(shape) : shape, .layout = layout, .distinct = true}}});
  };
  const Layout plain = Layout::Contiguous;
  pooled("max.k2", {2, 3, 4, 6}, plain, false, [](const Tensor& x) { return max_pool2d(x, 2); });
  pooled("max.k3_s2_p1", {1, 2, 7, 5}, plain, false, [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); });
  pooled("max.dilation2", {1, 2, 7, 7}, plain, false, [](const Tensor& x) { return max_pool2d(x, 3, 1, 1, 2); });
  pooled("max.ceil_mode", {2, 1, 5, 7}, plain, false,
         [](const Tensor& x) { return max_pool2d(x, 2, 2, 0, 1, /*ceil_mode=*/true); });
  pooled("max.rectangular", {1, 3, 5, 6}, plain, false, [](const Tensor& x) {
    return max_pool2d(x, {2, 3}, Size2{1, 2}, {1, 0});
  });
  pooled("max.channels_last", {2, 3, 5, 5}, plain, true, [](const Tensor& x) { return max_pool2d(x, 3, 2); });
  pooled("max.stride_exceeds_kernel", {1, 2, 7, 8}, plain, false, [](const Tensor& x) { return max_pool2d(x, 2, 3); });
  pooled("max.transposed", {1, 2, 5, 4}, Layout::Transposed, false,
         [](const Tensor& x) { return max_pool2d(x, 2, 1); });
  pooled("max.with_indices.strided", {2, 2, 4, 5}, Layout::Strided, false, [](const Tensor& x) {
    return max_pool2d_with_indices(x, {3, 2}, Size2{1, 1}, {1, 1}).first;
  });
  pooled("avg.k2", {2, 3, 4, 6}, plain, false, [](const Tensor& x) { return avg_pool2d(x, 2); });
  pooled("avg.k3_s2_p1.include_pad", {1, 2, 7, 5}, plain, false,
         [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1); });
  pooled("avg.k3_s2_p1.exclude_pad", {1, 2, 7, 5}, plain, false,
         [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1, false, /*count_include_pad=*/false); });
  pooled("avg.ceil_mode.include_pad", {1, 2, 6, 7}, plain, false,
         [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1, /*ceil_mode=*/true); });
  pooled("avg.ceil_mode.exclude_pad", {2, 1, 5, 6}, plain, false, [](const Tensor& x) {
    return avg_pool2d(x, {2, 3}, Size2{2, 2}, {1, 1}, true, false);
  });
  pooled("avg.channels_last", {2, 3, 5, 4}, plain, true, [](const Tensor& x) { return avg_pool2d(x, 2, 1); });
  pooled("avg.stride_exceeds_kernel", {2, 1, 7, 8}, plain, false, [](const Tensor& x) { return avg_pool2d(x, 2, 3); });
  pooled("avg.strided", {1, 2, 5, 5}, Layout::Strided, false, [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1); });
  pooled("adaptive.overlapping", {2, 2, 5, 7}, plain, false, [](const Tensor& x) {
    return adaptive_avg_pool2d(x, {3, 2});
  });
  pooled("adaptive.global", {2, 3, 4, 5}, plain, false, [](const Tensor& x) { return adaptive_avg_pool2d(x, 1); });
  pooled("adaptive.upsampling", {1, 2, 3, 2}, plain, false, [](const Tensor& x) {
    return adaptive_avg_pool2d(x, {4, 5});
  });
  pooled("adaptive.channels_last", {2, 3, 6, 5}, plain, true, [](const Tensor& x) {
    return adaptive_avg_pool2d(x, {4, 3});
  });
  pooled("adaptive.transposed", {3, 2, 5, 3}, Layout::Transposed, false,
         [](const Tensor& x) { return adaptive_avg_pool2d(x, 2); });
}

// Running statistics, fresh per call (training updates them in place): means in [-0.5, 0.5],
// variances in [0.5, 2].
std::pair<Tensor, Tensor> running_stats(int64_t channels, const Tensor& like) {
  return {linspace(-0.5, 0.5, channels, like.options()), linspace(0.5, 2.0, channels, like.options())};
}

struct BatchNormCase {
  std::string name;
  Shape input;  // as the op sees it, [N, C, ...]
  bool training = true, weight = true, bias = true, track_running = true;
  Layout layout = Layout::Contiguous;
  // The leaf's dims in memory order, outermost first; the op sees leaf.permute(from_leaf).
  std::vector<int64_t> leaf_order = {}, from_leaf = {};
};

void add_batch_norm(std::vector<GradCase>& cases) {
  const std::vector<BatchNormCase> norms = {
      {.name = "affine", .input = {3, 4, 2, 3}},
      {.name = "no_affine", .input = {2, 3, 3, 2}, .weight = false, .bias = false, .track_running = false},
      {.name = "weight_only.2d", .input = {5, 3}, .bias = false},
      {.name = "bias_only.1d", .input = {2, 3, 5}, .weight = false},
      {.name = "channels_last", .input = {2, 3, 3, 4}, .leaf_order = {0, 2, 3, 1}, .from_leaf = {0, 3, 1, 2}},
      {.name = "transposed", .input = {2, 3, 2, 3}, .layout = Layout::Transposed},
      {.name = "transposed.single_sample", .input = {1, 3, 3, 2}, .layout = Layout::Transposed},
      // [L, N, C] sequence-first activations seen as [N, C, L]: dense, channel stride 1, but
      // not channels-last.
      {.name = "sequence_first", .input = {2, 3, 5}, .leaf_order = {2, 0, 1}, .from_leaf = {1, 2, 0}},
      {.name = "strided", .input = {3, 2, 4}, .layout = Layout::Strided},
      {.name = "expanded", .input = {3, 2, 2, 2}, .layout = Layout::Expanded},
      {.name = "eval.affine", .input = {2, 3, 2, 2}, .training = false},
      {.name = "eval.no_affine", .input = {3, 4}, .training = false, .weight = false, .bias = false},
      {.name = "eval.channels_last",
       .input = {2, 3, 2, 3},
       .training = false,
       .leaf_order = {0, 2, 3, 1},
       .from_leaf = {0, 3, 1, 2}},
      {.name = "eval.sequence_first",
       .input = {2, 3, 4},
       .training = false,
       .leaf_order = {2, 0, 1},
       .from_leaf = {1, 2, 0}},
      {.name = "eval.transposed.single_sample", .input = {1, 2, 3, 3}, .training = false, .layout = Layout::Transposed},
  };
  // A constant input: only the affine parameters' gradients are asked for.
  cases.push_back({.name = "norm.batch_norm.train.constant_input",
                   .fn =
                       [](const Inputs& x) {
                         return batch_norm(ramp({3, 2, 5}, x[0]), {}, {}, x[0], x[1], /*training=*/true);
                       },
                   .inputs = {{.shape = {2}}, {.shape = {2}}}});
  // Each case also as batch_norm_relu, the fused BN -> ReLU (its mask comes from the saved output).
  for (bool relu : {false, true}) {
    for (const BatchNormCase& c : norms) {
      Shape leaf = c.input;
      for (size_t d = 0; d < c.leaf_order.size(); ++d) leaf[d] = c.input[c.leaf_order[d]];
      const int64_t channels = c.input[1];
      auto fn = [c, channels, relu](const Inputs& x) {
        Tensor input = c.from_leaf.empty() ? x[0] : x[0].permute(c.from_leaf);
        Tensor weight = c.weight ? x[1] : Tensor(), bias = c.bias ? x[c.weight ? 2 : 1] : Tensor();
        auto [mean, var] =
            c.track_running || !c.training ? running_stats(channels, input) : std::pair<Tensor, Tensor>();
        auto normalize = relu ? batch_norm_relu : batch_norm;
        return normalize(input, mean, var, weight, bias, c.training, 0.1, 1e-5, nullptr);
      };
      std::vector<InputSpec> inputs = {{.shape = leaf, .layout = c.layout}};
      if (c.weight) inputs.push_back({.shape = {channels}, .low = 0.5, .high = 1.5});
      if (c.bias) inputs.push_back({.shape = {channels}});
      const std::string name =
          std::string(relu ? "norm.batch_norm_relu." : "norm.batch_norm.") + (c.training ? "train." : "") + c.name;
      cases.push_back({.name = name, .fn = fn, .inputs = inputs});
    }
  }
}

void add_layer_norm(std::vector<GradCase>& cases) {
  auto norm = [](Shape normalized, bool weight, bool bias) {
    return [=](const Inputs& x) {
      return layer_norm(x[0], normalized, weight ? x[1] : Tensor(), bias ? x[weight ? 2 : 1] : Tensor());
    };
  };
  cases.push_back({.name = "norm.layer_norm.last_dim",
                   .fn = norm({5}, true, true),
                   .inputs = {{.shape = {3, 5}}, {.shape = {5}}, {.shape = {5}}}});
  cases.push_back(
      {.name = "norm.layer_norm.last_two_dims",
       .fn = norm({3, 4}, true, true),
       .inputs = {{.shape = {2, 3, 4}}, {.shape = {3, 4}, .layout = Layout::Transposed}, {.shape = {3, 4}}}});
  cases.push_back({.name = "norm.layer_norm.no_affine.transposed",
                   .fn = norm({3}, false, false),
                   .inputs = {{.shape = {2, 5, 3}, .layout = Layout::Transposed}}});
  cases.push_back(
      {.name = "norm.layer_norm.weight_only.strided",
       .fn = norm({5}, true, false),
       .inputs = {{.shape = {3, 5}, .layout = Layout::Strided}, {.shape = {5}, .layout = Layout::Strided}}});
  cases.push_back({.name = "norm.layer_norm.bias_only.all_dims",
                   .fn = norm({2, 3}, false, true),
                   .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}}}});
  cases.push_back({.name = "norm.layer_norm.expanded",
                   .fn = norm({4}, true, true),
                   .inputs = {{.shape = {3, 4}, .layout = Layout::Expanded}, {.shape = {4}}, {.shape = {4}}}});
}

// The mask comes from a generator seeded afresh on every call, so every finite-difference
// evaluation sees the mask the analytic gradient used (dropout is then linear: mask * scale).
void add_dropout(std::vector<GradCase>& cases) {
  auto drop = [](double p, bool training) {
    return [=](const Inputs& x) {
      Generator generator(1234);
      return dropout(x[0], p, training, &generator);
    };
  };
  cases.push_back({.name = "dropout.train", .fn = drop(0.3, true), .inputs = {{.shape = {4, 5}}}});
  cases.push_back({.name = "dropout.train.transposed",
                   .fn = drop(0.5, true),
                   .inputs = {{.shape = {3, 2, 5}, .layout = Layout::Transposed}}});
  cases.push_back({.name = "dropout.train.expanded",
                   .fn = drop(0.4, true),
                   .inputs = {{.shape = {3, 4}, .layout = Layout::Expanded}}});
  cases.push_back({.name = "dropout.eval", .fn = drop(0.5, false), .inputs = {{.shape = {2, 3}}}});
  cases.push_back({.name = "dropout.p0", .fn = drop(0.0, true), .inputs = {{.shape = {3}}}});
  cases.push_back({.name = "dropout.p1", .fn = drop(1.0, true), .inputs = {{.shape = {2, 2}}}});
}

// The free functions of functional.h on 4-D channels-last and expanded inputs; each op's formula
// is also checked as a Tensor method in cases_elementwise.cc.
void add_activations(std::vector<GradCase>& cases) {
  struct Activation {
    std::string name;
    std::function<Tensor(const Tensor&)> fn;
    std::vector<double> avoid = {};
  };
  const std::vector<Activation> activations = {
      {"relu", [](const Tensor& x) { return relu(x); }, {0}},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, {0}},
      {"leaky_relu.slope0.2", [](const Tensor& x) { return leaky_relu(x, 0.2); }, {0}},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu.tanh", [](const Tensor& x) { return gelu(x, true); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return ember::tanh(x); }},
  };
  for (const Activation& a : activations) {
    cases.push_back({.name = "activation." + a.name + ".channels_last",
                     .fn = [f = a.fn](const Inputs& x) { return f(channels_last(x[0])); },
                     .inputs = {{.shape = {2, 3, 2, 3}, .low = -3, .high = 3, .avoid = a.avoid}}});
    cases.push_back(
        {.name = "activation." + a.name + ".expanded",
         .fn = [f = a.fn](const Inputs& x) { return f(x[0]); },
         .inputs = {{.shape = {3, 2, 5}, .low = -3, .high = 3, .layout = Layout::Expanded, .avoid = a.avoid}}});
  }
}

void add_softmax(std::vector<GradCase>& cases) {
  struct Form {
    std::string name;
    int64_t dim;
    InputSpec input;
    bool channels_last = false;
  };
  const std::vector<Form> forms = {
      {"last_dim", 1, {.shape = {3, 5}}},
      {"dim0", 0, {.shape = {4, 3}}},
      {"middle_dim.transposed", 1, {.shape = {2, 5, 3}, .layout = Layout::Transposed}},
      {"negative_dim.strided", -1, {.shape = {2, 3, 4}, .layout = Layout::Strided}},
      {"size_one_dim", 1, {.shape = {3, 1}}},
      {"expanded", 1, {.shape = {3, 4}, .layout = Layout::Expanded}},
      {"large_values", 1, {.shape = {2, 7}, .low = 50, .high = 60}},
      {"channels_last", 1, {.shape = {2, 3, 2, 4}}, true},
      {"zero_dim", 0, {.shape = {}}},
  };
  for (bool log : {false, true}) {
    for (const Form& f : forms) {
      auto fn = [f, log](const Inputs& x) {
        Tensor input = f.channels_last ? channels_last(x[0]) : x[0];
        return log ? log_softmax(input, f.dim) : softmax(input, f.dim);
      };
      cases.push_back({.name = std::string(log ? "softmax.log." : "softmax.") + f.name, .fn = fn, .inputs = {f.input}});
    }
  }
}

}  // namespace

void add_nn_cases(std::vector<GradCase>& cases) {
  add_linear(cases);
  add_conv(cases);
  add_pool(cases);
  add_batch_norm(cases);
  add_layer_norm(cases);
  add_dropout(cases);
  add_activations(cases);
  add_softmax(cases);
}

}  // namespace ember::testing

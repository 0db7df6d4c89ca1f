// Gradient-check cases for the losses of autograd/functional.h (cross_entropy, nll_loss, mse_loss,
// binary_cross_entropy_with_logits) in every reduction, and for the index ops (embedding, gather,
// scatter_add). Integer targets and indices are constants of each case.
#include <string>

#include "autograd/functional.h"
#include "tests/autograd/cases.h"

namespace ember::testing {

namespace {

// int64 class indices of `shape` (0-d included) on the device of `like`.
Tensor labels(const std::vector<int64_t>& values, const Shape& shape, const Tensor& like) {
  return tensor(values, {static_cast<int64_t>(values.size())}, like.device()).reshape(shape);
}

const char* reduction_name(Reduction r) { return r == Reduction::Mean ? "mean" : r == Reduction::Sum ? "sum" : "none"; }

constexpr Reduction kReductions[] = {Reduction::Mean, Reduction::Sum, Reduction::None};

// Class weights, when a case has them, are the last input: positive, and differentiable too
// (the losses are compositions of differentiable ops).
const InputSpec kClassWeight5{.shape = {5}, .low = 0.2, .high = 2.0};

struct ClassificationCase {
  std::string name;
  InputSpec logits;  // [N, C, ...]
  std::vector<int64_t> targets;
  bool weight = false;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  bool channels_last = false;  // logits leaf [N, H, W, C], seen as [N, C, H, W]
};

// Over [4, 5] logits unless a case says otherwise; -100 is the default ignore_index.
std::vector<ClassificationCase> classification_cases() {
  const InputSpec logits{.shape = {4, 5}, .low = -2, .high = 2};
  InputSpec transposed = logits;
  transposed.layout = Layout::Transposed;
  return {
      {"plain", logits, {1, 0, 4, 2}},
      {"weight", logits, {3, 3, 0, 1}, true},
      {"ignore_index", transposed, {1, -100, 4, -100}},
      {"ignore_index.custom", logits, {2, 0, 2, 3}, false, 2},
      {"smoothing", logits, {1, 0, 4, 2}, false, -100, 0.1},
      {"smoothing.weight.ignore_index", transposed, {4, -100, 0, 4}, true, -100, 0.25},
      {"spatial", {.shape = {2, 5, 2, 3}, .low = -2, .high = 2}, {0, 4, 4, 1, 2, 3, 1, 1, 0, 2, 3, 4}, true, 3},
      {"spatial.channels_last.smoothing",
       {.shape = {2, 2, 3, 5}, .low = -2, .high = 2},
       {0, 4, -100, 1, 2, 3, 1, 1, 0, 2, 3, 4},
       false,
       -100,
       0.2,
       true},
      {"large_logits", {.shape = {3, 5}, .low = 20, .high = 40, .layout = Layout::Strided}, {4, 0, 2}},
  };
}

Shape target_shape(const ClassificationCase& c) {
  Shape shape = c.logits.shape;
  if (c.channels_last)
    shape.pop_back();
  else
    shape.erase(shape.begin() + 1);
  return shape;
}

void add_classification(std::vector<GradCase>& cases) {
  for (const ClassificationCase& c : classification_cases()) {
    for (Reduction r : kReductions) {
      const Shape targets = target_shape(c);
      auto logits = [c](const Inputs& x) { return c.channels_last ? x[0].permute({0, 3, 1, 2}) : x[0]; };
      auto ce = [c, r, targets, logits](const Inputs& x) {
        return cross_entropy(logits(x), labels(c.targets, targets, x[0]), c.weight ? x[1] : Tensor(), r, c.ignore_index,
                             c.label_smoothing);
      };
      std::vector<InputSpec> inputs = {c.logits};
      if (c.weight) inputs.push_back(kClassWeight5);
      const std::string suffix = c.name + "." + reduction_name(r);
      cases.push_back({.name = "loss.cross_entropy." + suffix, .fn = ce, .inputs = inputs});
      if (c.label_smoothing != 0.0) continue;
      // nll_loss on raw scores (any real input), and on log_softmax as a classifier uses it.
      auto nll = [c, r, targets, logits](const Inputs& x) {
        return nll_loss(logits(x), labels(c.targets, targets, x[0]), c.weight ? x[1] : Tensor(), r, c.ignore_index);
      };
      cases.push_back({.name = "loss.nll_loss." + suffix, .fn = nll, .inputs = inputs});
      auto nll_of_log_softmax = [c, r, targets, logits](const Inputs& x) {
        return nll_loss(log_softmax(logits(x), 1), labels(c.targets, targets, x[0]), c.weight ? x[1] : Tensor(), r,
                        c.ignore_index);
      };
      cases.push_back({.name = "loss.nll_loss.log_softmax." + suffix, .fn = nll_of_log_softmax, .inputs = inputs});
    }
  }
}

void add_regression(std::vector<GradCase>& cases) {
  for (Reduction r : kReductions) {
    const std::string name = reduction_name(r);
    auto mse = [r](const Inputs& x) { return mse_loss(x[0], x[1], r); };
    cases.push_back({.name = "loss.mse_loss." + name, .fn = mse, .inputs = {{.shape = {3, 4}}, {.shape = {3, 4}}}});
    cases.push_back({.name = "loss.mse_loss.noncontiguous." + name,
                     .fn = mse,
                     .inputs = {{.shape = {2, 3, 2}, .layout = Layout::Transposed},
                                {.shape = {2, 3, 2}, .layout = Layout::Expanded}}});
    // Input, target, weight and pos_weight all carry gradients. The loss is smooth; its pieces
    // (|x|, max(-x, 0)) kink at 0, so samples keep away from it.
    const InputSpec logits{.shape = {3, 4}, .low = -3, .high = 3, .avoid = {0}};
    const InputSpec probabilities{.shape = {3, 4}, .low = 0, .high = 1};
    auto bce = [r](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1], {}, {}, r); };
    cases.push_back({.name = "loss.bce_with_logits." + name, .fn = bce, .inputs = {logits, probabilities}});
    auto weighted = [r](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1], x[2], {}, r); };
    cases.push_back({.name = "loss.bce_with_logits.weight." + name,
                     .fn = weighted,
                     .inputs = {logits, probabilities, {.shape = {3, 1}, .low = 0.2, .high = 2}}});
    auto positive = [r](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1], {}, x[2], r); };
    cases.push_back({.name = "loss.bce_with_logits.pos_weight." + name,
                     .fn = positive,
                     .inputs = {logits, probabilities, {.shape = {4}, .low = 0.5, .high = 3}}});
    auto both = [r](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1], x[2], x[3], r); };
    InputSpec transposed = logits, strided = probabilities;
    transposed.layout = Layout::Transposed;
    strided.layout = Layout::Strided;
    cases.push_back({.name = "loss.bce_with_logits.weight.pos_weight." + name,
                     .fn = both,
                     .inputs = {transposed,
                                strided,
                                {.shape = {4}, .low = 0.2, .high = 2},
                                {.shape = {3, 4}, .low = 0.5, .high = 3, .layout = Layout::Expanded}}});
  }
  cases.push_back(
      {.name = "loss.bce_with_logits.large_logits",
       .fn = [](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1]); },
       .inputs = {{.shape = {2, 3}, .low = -30, .high = 30, .avoid = {0}}, {.shape = {2, 3}, .low = 0, .high = 1}}});
}

// Index lists repeat rows, so the backward must add (not assign) their gradients.
void add_embedding(std::vector<GradCase>& cases) {
  auto embed = [](std::vector<int64_t> indices, Shape shape, DType dtype = kInt64) {
    return [=](const Inputs& x) { return embedding(x[0], labels(indices, shape, x[0]).to(dtype)); };
  };
  const InputSpec table{.shape = {7, 3}};
  cases.push_back({.name = "embedding.matrix", .fn = embed({1, 3, 3, 0, 6, 1, 1, 5}, {2, 4}), .inputs = {table}});
  cases.push_back({.name = "embedding.vector", .fn = embed({2, 2, 2, 4, 0}, {5}), .inputs = {table}});
  cases.push_back({.name = "embedding.zero_dim_index", .fn = embed({5}, {}), .inputs = {table}});
  cases.push_back({.name = "embedding.int32", .fn = embed({6, 0, 6}, {3, 1}, kInt32), .inputs = {table}});
  cases.push_back({.name = "embedding.transposed_weight",
                   .fn = embed({4, 1, 4, 2}, {4}),
                   .inputs = {{.shape = {5, 4}, .layout = Layout::Transposed}}});
  // The padding row's own gradient is zero by definition, which finite differences cannot see;
  // multiplying its lookups by 0 makes the function agree (functional_test checks the row).
  // This checks that padding_idx leaves every other row's gradient as it was.
  cases.push_back({.name = "embedding.padding_idx",
                   .fn =
                       [](const Inputs& x) {
                         Tensor indices = labels({2, 0, 2, 5, 2, 1}, {3, 2}, x[0]);
                         Tensor keep = (indices != full_like(indices, 2)).to(kFloat64);
                         return embedding(x[0], indices, 2) * keep.unsqueeze(-1);
                       },
                   .inputs = {{.shape = {6, 2}, .layout = Layout::Strided}}});
}

void add_gather_scatter(std::vector<GradCase>& cases) {
  cases.push_back({.name = "index.gather.dim1",
                   .fn =
                       [](const Inputs& x) {
                         return gather(x[0], 1, labels({0, 2, 2, 1, 1, 1}, {3, 2}, x[0]));
                       },
                   .inputs = {{.shape = {3, 4}, .layout = Layout::Transposed}}});
  cases.push_back({.name = "index.gather.dim0.smaller_index",
                   .fn =
                       [](const Inputs& x) {
                         return gather(x[0], 0, labels({3, 0, 3, 3}, {2, 2}, x[0]));
                       },
                   .inputs = {{.shape = {4, 3}, .layout = Layout::Strided}}});
  cases.push_back({.name = "index.scatter_add",
                   .fn =
                       [](const Inputs& x) {
                         return scatter_add(x[0], 0, labels({1, 0, 1, 1, 2, 1}, {2, 3}, x[0]), x[1]);
                       },
                   .inputs = {{.shape = {3, 3}}, {.shape = {2, 4}, .layout = Layout::Transposed}}});
}

}  // namespace

void add_loss_cases(std::vector<GradCase>& cases) {
  add_classification(cases);
  add_regression(cases);
  add_embedding(cases);
  add_gather_scatter(cases);
}

}  // namespace ember::testing

// Ember's side of each layer/init config in tests/nn/layer_reference.json, and the distribution check.
#include "tests/nn/layer_zoo.h"

#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "core/io/file_io.h"
#include "tests/nn/test_nets.h"

namespace ember::testing {

namespace {

using Factory = std::function<std::shared_ptr<nn::Module>()>;

template <typename Holder>
Factory of(std::function<Holder()> make) {
  return [make] { return std::static_pointer_cast<nn::Module>(make().ptr()); };
}

const std::map<std::string, Factory>& layer_factories() {
  using namespace nn;
  static const std::map<std::string, Factory> table = {
      {"linear", of<Linear>([] { return Linear(20, 30); })},
      {"linear_nobias", of<Linear>([] { return Linear(LinearOptions(20, 30).bias(false)); })},
      {"conv2d", of<Conv2d>([] { return Conv2d(3, 16, 3); })},
      {"conv2d_options", of<Conv2d>([] {
         return Conv2d(Conv2dOptions(4, 8, {3, 5}).stride(2).padding({1, 2}).dilation({2, 1}).groups(2).bias(false));
       })},
      {"batchnorm1d", of<BatchNorm1d>([] { return BatchNorm1d(10); })},
      {"batchnorm1d_3d", of<BatchNorm1d>([] { return BatchNorm1d(BatchNormOptions(6).eps(0.001).momentum(0.01)); })},
      {"batchnorm2d", of<BatchNorm2d>([] { return BatchNorm2d(8); })},
      {"batchnorm2d_plain", of<BatchNorm2d>([] {
         return BatchNorm2d(BatchNormOptions(4).momentum(std::nullopt).affine(false).track_running_stats(false));
       })},
      {"layernorm", of<LayerNorm>([] {
         return LayerNorm(Shape{4, 5});
       })},
      {"layernorm_plain", of<LayerNorm>([] { return LayerNorm(LayerNormOptions({6}).elementwise_affine(false)); })},
      {"dropout", of<Dropout>([] { return Dropout(0.25); })},
      {"relu", of<ReLU>([] { return ReLU(); })},
      {"leaky_relu", of<LeakyReLU>([] { return LeakyReLU(0.2); })},
      {"gelu", of<GELU>([] { return GELU(); })},
      {"gelu_tanh", of<GELU>([] { return GELU("tanh"); })},
      {"silu", of<SiLU>([] { return SiLU(); })},
      {"sigmoid", of<Sigmoid>([] { return Sigmoid(); })},
      {"tanh", of<Tanh>([] { return Tanh(); })},
      {"softmax", of<Softmax>([] { return Softmax(1); })},
      {"maxpool2d", of<MaxPool2d>([] { return MaxPool2d(MaxPool2dOptions(2)); })},
      {"maxpool2d_options", of<MaxPool2d>([] {
         return MaxPool2d(MaxPool2dOptions({3, 2}).stride(Size2(2, 1)).padding(1).dilation(1).ceil_mode(true));
       })},
      {"avgpool2d", of<AvgPool2d>([] { return AvgPool2d(AvgPool2dOptions(3).stride(2).padding(1)); })},
      {"adaptive_avgpool2d", of<AdaptiveAvgPool2d>([] { return AdaptiveAvgPool2d(1); })},
      {"adaptive_avgpool2d_rect", of<AdaptiveAvgPool2d>([] { return AdaptiveAvgPool2d(Size2(2, 3)); })},
      {"flatten", of<Flatten>([] { return Flatten(); })},
      {"flatten_range", of<Flatten>([] { return Flatten(FlattenOptions().start_dim(0).end_dim(2)); })},
      {"identity", of<Identity>([] { return Identity(); })},
      {"embedding", of<Embedding>([] { return Embedding(10, 4); })},
      {"embedding_padding", of<Embedding>([] { return Embedding(EmbeddingOptions(10, 4).padding_idx(-1)); })},
      {"sequential", of<Sequential>([] { return Sequential(Linear(4, 8), ReLU(), Dropout(0.5), Linear(8, 2)); })},
      {"module_list", of<ModuleList>([] {
         ModuleList inner;
         inner->push_back(Tanh());
         ModuleList list;
         list->push_back(Linear(3, 3));
         list->push_back(BatchNorm1d(3));
         list->push_back(inner);
         return list;
       })},
      {"module_dict", of<ModuleDict>([] {
         ModuleDict dict;
         dict->insert("conv", Conv2d(2, 2, 1));
         dict->insert("act", ReLU());
         dict->insert("head", Sequential(Flatten(), Linear(8, 2)));
         return dict;
       })},
      {"cross_entropy_loss", of<CrossEntropyLoss>([] {
         return CrossEntropyLoss(CrossEntropyLossOptions().weight(ones({5})).label_smoothing(0.1));
       })},
      {"bce_with_logits_loss",
       of<BCEWithLogitsLoss>([] { return BCEWithLogitsLoss(BCEWithLogitsLossOptions().pos_weight(ones({3}))); })},
      {"nested", [] { return std::static_pointer_cast<nn::Module>(std::make_shared<Net>()); }},
  };
  return table;
}

const std::map<std::string, Factory>& init_factories() {
  using namespace nn;
  static const std::map<std::string, Factory> table = {
      {"linear", of<Linear>([] { return Linear(256, 512); })},
      {"conv2d", of<Conv2d>([] { return Conv2d(16, 64, Size2(3, 5)); })},
      {"conv2d_groups", of<Conv2d>([] { return Conv2d(Conv2dOptions(64, 256, 3).groups(16)); })},
      {"batchnorm2d", of<BatchNorm2d>([] { return BatchNorm2d(64); })},
      {"layernorm", of<LayerNorm>([] {
         return LayerNorm(Shape{8, 16});
       })},
      {"embedding", of<Embedding>([] { return Embedding(1000, 64); })},
      {"embedding_padding", of<Embedding>([] { return Embedding(EmbeddingOptions(1000, 64).padding_idx(3)); })},
  };
  return table;
}

std::shared_ptr<nn::Module> make_from(const std::map<std::string, Factory>& table, const std::string& id) {
  auto it = table.find(id);
  return it == table.end() ? nullptr : it->second();
}

double number(const json::Value& spec, const char* key) {
  const json::Value* v = spec.find(key);
  EMBER_CHECK(v != nullptr && v->is_number(), "layer_reference.json: distribution lacks '", key, "'");
  return v->as_double();
}

}  // namespace

std::shared_ptr<nn::Module> make_reference_layer(const std::string& id) { return make_from(layer_factories(), id); }
std::shared_ptr<nn::Module> make_reference_init_layer(const std::string& id) { return make_from(init_factories(), id); }

const json::Value& layer_reference() {
  static const json::Value reference = [] {
    std::vector<uint8_t> bytes = read_file("tests/nn/layer_reference.json");
    return json::parse(std::string(bytes.begin(), bytes.end()), "tests/nn/layer_reference.json");
  }();
  return reference;
}

std::string check_distribution(const Tensor& values, const json::Value& spec) {
  std::ostringstream problems;
  Tensor t = values.detach().to(kFloat64);
  if (const json::Value* row = spec.find("zero_row")) {
    Tensor r = t.select(0, row->as_int());
    if (r.abs().max().item<double>() != 0.0) problems << "row " << row->as_int() << " is not zero; ";
    t = cat({t.narrow(0, 0, row->as_int()), t.narrow(0, row->as_int() + 1, t.size(0) - row->as_int() - 1)}, 0);
  }
  std::vector<double> x = t.flatten().to_vector<double>();
  const double n = static_cast<double>(x.size());
  const std::string dist = spec.find("dist")->as_string();
  if (dist == "constant") {
    const double value = number(spec, "value");
    for (double v : x)
      if (v != value) return problems.str() + "element " + std::to_string(v) + " != " + std::to_string(value);
    return problems.str();
  }
  double lo = x[0], hi = x[0], sum = 0;
  for (double v : x) lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
  const double mean = sum / n;
  double squares = 0;
  for (double v : x) squares += (v - mean) * (v - mean);
  const double std = std::sqrt(squares / (n - 1));
  double expected_mean, expected_std, std_rel_err;
  if (dist == "uniform") {
    const double low = number(spec, "low"), high = number(spec, "high");
    if (lo < low || hi > high)
      problems << "range [" << lo << ", " << hi << "] leaves [" << low << ", " << high << "]; ";
    // n draws: the extremes lie within 10/n of the range's ends except with probability ~e^-10.
    const double slack = (high - low) * 10 / n;
    if (hi < high - slack || lo > low + slack)
      problems << "range [" << lo << ", " << hi << "] does not reach [" << low << ", " << high << "]; ";
    expected_mean = (low + high) / 2;
    expected_std = (high - low) / std::sqrt(12.0);
    std_rel_err = std::sqrt(0.8 / (4 * n));  // (kurtosis - 1) / 4n, kurtosis 1.8
  } else {
    EMBER_CHECK(dist == "normal", "layer_reference.json: unknown distribution '", dist, "'");
    expected_mean = number(spec, "mean");
    expected_std = number(spec, "std");
    std_rel_err = std::sqrt(2.0 / (4 * n));  // kurtosis 3
    // The family too: a uniform draw of the same std has kurtosis 1.8 (standard error sqrt(24 / n)).
    double fourth = 0;
    for (double v : x) fourth += std::pow((v - mean) / std, 4);
    if (std::abs(fourth / n - 3) > 5 * std::sqrt(24 / n)) problems << "kurtosis " << fourth / n << " vs 3; ";
  }
  if (std::abs(mean - expected_mean) > 5 * expected_std / std::sqrt(n))
    problems << "mean " << mean << " vs " << expected_mean << "; ";
  if (std::abs(std / expected_std - 1) > 5 * std_rel_err) problems << "std " << std << " vs " << expected_std << "; ";
  return problems.str();
}

}  // namespace ember::testing

// The kernel table holds plain function pointers, so the recording conv2d reaches its census and
// the original table through file-level pointers; one census runs at a time.
#include "tools/bench/census.h"

#include <sstream>

#include "core/backend.h"
#include "core/ember_core.h"
#include "nn/nn.h"

namespace ember::bench {

std::string ConvShape::spec() const {
  std::ostringstream s;
  s << c << ':' << o << ':' << k << ':' << stride << ':' << pad << ':' << h << ':' << w << ':' << input_grad;
  return s.str();
}

std::string ConvShape::label() const {
  std::ostringstream s;
  s << c << "->" << o << ' ' << k << 'x' << k << (stride > 1 ? " s" + std::to_string(stride) : "") << ' ' << h << 'x'
    << w;
  return s.str();
}

namespace {

const KernelTable* cpu_table = nullptr;
Census* recording = nullptr;

Tensor recording_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  EMBER_CHECK(p.groups == 1 && p.dilation_h == 1 && p.dilation_w == 1 && p.stride_h == p.stride_w &&
                  p.pad_h == p.pad_w && weight.size(2) == weight.size(3),
              "gpu bench census: only square, ungrouped, undilated convolutions, got weight ",
              shape_str(weight.sizes()), " stride ", p.stride_h, "x", p.stride_w, " groups ", p.groups);
  Tensor out = cpu_table->conv2d(input, weight, bias, p);
  recording->forward_flops_per_image += 2.0 * out.numel() * weight.size(1) * weight.size(2) * weight.size(3);
  // The first convolution reads the images, which need no gradient.
  const ConvShape shape{input.size(1),
                        weight.size(0),
                        weight.size(2),
                        p.stride_h,
                        p.pad_h,
                        input.size(2),
                        input.size(3),
                        !recording->convs.empty(),
                        1};
  for (ConvShape& seen : recording->convs) {
    if (seen.spec() == shape.spec()) {
      ++seen.count;
      return out;
    }
  }
  recording->convs.push_back(shape);
  return out;
}

}  // namespace

Census take_census(nn::Module& model, const Shape& image) {
  Census census;
  cpu_table = &kernels_for(Device(kCPU), "gpu bench census");
  KernelTable table = *cpu_table;
  table.conv2d = recording_conv2d;
  recording = &census;
  const bool training = model.is_training();
  model.eval();
  register_kernels(kCPU, &table);
  try {
    NoGradGuard no_grad;
    Shape batch{1};
    batch.insert(batch.end(), image.begin(), image.end());
    model.forward(randn(batch));
  } catch (...) {
    register_kernels(kCPU, cpu_table);
    model.train(training);
    throw;
  }
  register_kernels(kCPU, cpu_table);
  model.train(training);
  model.apply([&](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::LinearImpl*>(&m))
      census.forward_flops_per_image += 2.0 * linear->weight.numel();
  });
  return census;
}

}  // namespace ember::bench

// GPU benchmark, for a real GPU (it builds and runs against cuda/emu too, slowly, so it cannot rot):
// Ember next to cuBLAS and PyTorch eager on the same device, in the same run.
//   1. GEMM TFLOP/s of Ember's own kernel and cuBLAS: float32 with TF32 off and on, bfloat16; on
//      squares and on the per-image GEMMs cuda/conv.cc runs for ResNet-50's convolutions.
//   2. ResNet-50's convolutions (each distinct shape once, with its count in the network): forward
//      and backward (data + weight) through Ember's kernel table, next to cuDNN through PyTorch;
//      each first with the algorithm cuDNN's heuristic ranks first, then with the one measured
//      fastest (core/kernel_select.h), summed over the network as conv_measured_vs_heuristic.
//   3. Training images/s and MFU of ResNet-50 (ImageNet stem, 224x224) and ResNet-18 (CIFAR stem,
//      32x32), next to PyTorch eager (tools/bench/pytorch_gpu.py) with the same TF32 setting.
//   4. ResNet-50 in mixed precision: the forward and the loss under autocast to float16 with a
//      GradScaler, and to bfloat16 without one, next to PyTorch AMP written the same way.
//
//   tools/bench/gpu_pack              builds it for --config=cuda and packs it for the GPU host
//   gpu [--quick] [--tf32] [--steps=N] ...       (--help lists the flags)
//
// FLOPs: a convolution's forward is 2*N*O*OH*OW*(C/groups)*KH*KW, a linear layer's 2*N*in*out,
// counted per image by routing one forward through a recording copy of the CPU kernel table. A
// training step is 3x the forward (backward-data and backward-weight each cost one; the stem's
// backward-data, never run, is counted as MFU conventionally does). MFU = FLOPs per image x
// images/s / the datasheet peak of the precision in use (float32 without TF32, TF32 with it; the
// 16-bit tensor-core peak for mixed precision, float16's being bfloat16's on the parts listed).
// Times come from CUDA events around many calls or steps, after warm-up.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functional.h"
#include "core/autocast.h"
#include "core/backend.h"
#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/blas.h"
#include "core/kernel_select.h"
#include "cuda/conv.h"
#include "cuda/device_properties.h"
#include "models/zoo.h"
#include "nn/amp/grad_scaler.h"
#include "nn/nn.h"
#include "nn/optim/sgd.h"
#include "tools/bench/census.h"
#include "tools/bench/gpu_peak.h"
#include "tools/bench/gpu_yardstick.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember;
using bench::Census;
using bench::ConvShape;
using bench::PassTimes;
using bench::TorchResults;

const double kNaN = std::nan("");

struct Flags {
  std::vector<int64_t> squares{2048, 4096, 8192};
  bool resnet_gemms = true;
  int64_t conv_batch = 64;
  int64_t batch50 = 128, batch18 = 128;
  int64_t image_size = 224, cifar_size = 32;
  int steps = 20, warmup = 5;
  double min_seconds = 0.25;  // per GEMM or convolution measurement, over all its timed runs
  bool tf32 = false;
  bool gemm = true, conv = true, models = true, amp = true, torch = true;
  std::string python = "python3";
  std::string torch_script = "tools/bench/pytorch_gpu.py";
};

const char* kUsage = R"(usage: gpu [flags]
  --quick               a run of a few minutes: --squares=4096 --conv-batch=32 --batch50=64
                        --steps=8 --warmup=3 --min-seconds=0.1 (later flags still override)
  --squares=A,B,...     square GEMM sizes (default 2048,4096,8192)
  --resnet-gemms=0|1    also ResNet-50's per-image convolution GEMMs (default 1)
  --conv-batch=N        batch of the convolution table and of the ResNet GEMMs (default 64)
  --batch50=N --batch18=N   training batch of ResNet-50 and ResNet-18 (default 128)
  --image-size=N        ResNet-50's images (default 224); --cifar-size=N ResNet-18's (default 32)
  --steps=N --warmup=N  timed and untimed training steps (default 20, 5)
  --min-seconds=S       time per GEMM or convolution measurement (default 0.25)
  --tf32[=0|1]          TF32 for the convolution and model sections (default 0; GEMM runs both)
  --no-gemm --no-conv --no-models --no-amp --no-torch
                        skip a section (--no-amp: ResNet-50's fp16 and bf16 autocast runs) or
                        the PyTorch yardstick
  --python=COMMAND      how to start the yardstick's interpreter, a shell command prefix
                        (default python3; run_gpu.sh passes "env LD_LIBRARY_PATH=... python3")
  --torch-script=PATH   the yardstick (default tools/bench/pytorch_gpu.py, from the runfiles)
)";

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::stoll(item));
  return values;
}

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a != "--quick") continue;
    f.squares = {4096};
    f.conv_batch = 32;
    f.batch50 = 64;
    f.steps = 8;
    f.warmup = 3;
    f.min_seconds = 0.1;
  }
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (key == "--quick")
      continue;
    else if (key == "--squares")
      f.squares = parse_list(value);
    else if (key == "--resnet-gemms")
      f.resnet_gemms = value != "0";
    else if (key == "--conv-batch")
      f.conv_batch = std::stoll(value);
    else if (key == "--batch50")
      f.batch50 = std::stoll(value);
    else if (key == "--batch18")
      f.batch18 = std::stoll(value);
    else if (key == "--image-size")
      f.image_size = std::stoll(value);
    else if (key == "--cifar-size")
      f.cifar_size = std::stoll(value);
    else if (key == "--steps")
      f.steps = std::stoi(value);
    else if (key == "--warmup")
      f.warmup = std::stoi(value);
    else if (key == "--min-seconds")
      f.min_seconds = std::stod(value);
    else if (key == "--tf32")
      f.tf32 = value != "0";
    else if (key == "--no-gemm")
      f.gemm = false;
    else if (key == "--no-conv")
      f.conv = false;
    else if (key == "--no-models")
      f.models = false;
    else if (key == "--no-amp")
      f.amp = false;
    else if (key == "--no-torch")
      f.torch = false;
    else if (key == "--python")
      f.python = value;
    else if (key == "--torch-script")
      f.torch_script = value;
    else {
      std::fprintf(stderr, "gpu: unknown flag '%s'\n%s", a.c_str(), kUsage);
      return std::nullopt;
    }
  }
  if (f.steps < 1 || f.warmup < 0 || f.conv_batch < 1 || f.batch50 < 1 || f.batch18 < 1) {
    std::fprintf(stderr, "gpu: --steps, --conv-batch and the batches must be positive\n");
    return std::nullopt;
  }
  return f;
}

// Milliseconds per call of `fn`, queued on the current stream: 2 warm-up calls, then 5 timed runs
// of enough calls to fill min_seconds in all, the median run. Events, not host clocks, so that the
// host's launch overhead counts only where it starves the GPU.
double ms_per_call(const std::function<void()>& fn, double min_seconds) {
  constexpr int kRuns = 5;
  fn();
  fn();
  cuda::Event start(true), end(true);
  start.record();
  fn();
  end.record();
  end.synchronize();
  const double one = std::max<double>(start.elapsed_ms(end), 1e-3);
  const int reps = static_cast<int>(std::clamp(min_seconds * 1e3 / one / kRuns, 1.0, 1000.0));
  std::vector<double> samples;
  for (int run = 0; run < kRuns; ++run) {
    start.record();
    for (int i = 0; i < reps; ++i) fn();
    end.record();
    end.synchronize();
    samples.push_back(start.elapsed_ms(end) / reps);
  }
  return bench::median(samples);
}

double percent(double rate, double peak) { return peak > 0 ? 100.0 * rate / peak : kNaN; }

// ---- 1. GEMM ----

struct GemmCase {
  std::string label;
  bool trans_b;
  int64_t m, n, k, batch;
};

std::vector<GemmCase> gemm_cases(const Flags& f) {
  std::vector<GemmCase> cases;
  for (int64_t s : f.squares) cases.push_back({"square " + std::to_string(s), false, s, s, s, 1});
  if (!f.resnet_gemms) return cases;
  // cuda/conv.cc at 224x224, one GEMM per image: weight [O, C*K*K] x columns [C*K*K, OH*OW], and
  // for the weight gradient dy [O, OH*OW] x columns^T.
  const int64_t b = f.conv_batch;
  cases.push_back({"rn50 3x3 64 56x56 fwd", false, 64, 56 * 56, 64 * 9, b});
  cases.push_back({"rn50 3x3 256 14x14 fwd", false, 256, 14 * 14, 256 * 9, b});
  cases.push_back({"rn50 1x1 512->2048 7x7 fwd", false, 2048, 7 * 7, 512, b});
  cases.push_back({"rn50 1x1 64->256 56x56 wgrad", true, 256, 64, 56 * 56, b});
  return cases;
}

struct GemmMode {
  const char* name;
  DType dtype;
  bool tf32;
};
constexpr GemmMode kGemmModes[] = {{"f32", kFloat32, false}, {"tf32", kFloat32, true}, {"bf16", kBFloat16, false}};

double mode_peak(const std::optional<bench::PeakTflops>& peak, const GemmMode& mode) {
  if (!peak) return kNaN;
  return mode.dtype == kBFloat16 ? peak->bf16 : mode.tf32 ? peak->tf32 : peak->fp32;
}

double gemm_tflops(const GemmCase& g, const Tensor& a, const Tensor& b, const Tensor& c, double min_seconds) {
  GemmArgs args;
  args.device = c.device();
  args.dtype = c.dtype();
  args.trans_b = g.trans_b;
  args.m = g.m;
  args.n = g.n;
  args.k = g.k;
  args.a = a.data_ptr();
  args.lda = g.k;
  args.b = b.data_ptr();
  args.ldb = g.trans_b ? g.k : g.n;
  args.c = c.data_ptr();
  args.ldc = g.n;
  args.batch = g.batch;
  args.stride_a = g.m * g.k;
  args.stride_b = g.k * g.n;
  args.stride_c = g.m * g.n;
  const double ms = ms_per_call([&] { cuda::gemm_kernel(args); }, min_seconds);
  return 2.0 * g.m * g.n * g.k * g.batch / (ms * 1e-3) * 1e-12;
}

// Returns Ember / cuBLAS on the largest float32 square (TF32 off).
double run_gemm_section(const Flags& f, const std::optional<bench::PeakTflops>& peak, bool emulated) {
  const Device gpu = Device::cuda(0);
  std::printf("\nGEMM, TFLOP/s (median of 5 timed runs)%s\n",
              emulated ? "  [emulated device: no cuBLAS, both columns run Ember's kernel]" : "");
  std::printf("%-30s %-5s %9s %9s %7s %11s %11s\n", "shape (m x n x k, batch)", "type", "Ember", "cuBLAS", "ratio",
              "Ember %pk", "cuBLAS %pk");
  double largest_ratio = kNaN;
  int64_t largest = 0;
  for (const GemmCase& g : gemm_cases(f)) {
    const Tensor a32 = randn({g.batch, g.m, g.k}, TensorOptions(gpu));
    const Tensor b32 = randn(g.trans_b ? Shape{g.batch, g.n, g.k} : Shape{g.batch, g.k, g.n}, TensorOptions(gpu));
    const Tensor c32 = empty({g.batch, g.m, g.n}, TensorOptions(gpu));
    for (const GemmMode& mode : kGemmModes) {
      const bool bf16 = mode.dtype == kBFloat16;
      const Tensor a = bf16 ? a32.to(kBFloat16) : a32, b = bf16 ? b32.to(kBFloat16) : b32;
      const Tensor c = bf16 ? c32.to(kBFloat16) : c32;
      cuda::set_matmul_allow_tf32(mode.tf32);
      cuda::set_gemm_kernel(cuda::GemmKernel::Ember);
      const double ember = gemm_tflops(g, a, b, c, f.min_seconds);
      cuda::set_gemm_kernel(cuda::GemmKernel::Auto);
      const double cublas = gemm_tflops(g, a, b, c, f.min_seconds);
      const double p = mode_peak(peak, mode);
      std::printf("%-30s %-5s %9.3f %9.3f %7.3f %10.1f%% %10.1f%%\n",
                  (g.label + " (" + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
                   (g.batch > 1 ? ", " + std::to_string(g.batch) : "") + ")")
                      .c_str(),
                  mode.name, ember, cublas, ember / cublas, percent(ember, p), percent(cublas, p));
      std::fflush(stdout);
      if (g.batch == 1 && g.m == g.n && g.n == g.k && mode.dtype == kFloat32 && !mode.tf32 && g.m > largest) {
        largest = g.m;
        largest_ratio = ember / cublas;
      }
    }
  }
  cuda::set_matmul_allow_tf32(false);
  cuda::set_gemm_kernel(cuda::GemmKernel::Auto);
  return largest_ratio;
}

// ---- 2. convolutions ----

PassTimes time_conv(const ConvShape& s, int64_t batch, double min_seconds) {
  const Device gpu = Device::cuda(0);
  const KernelTable& table = kernels_for(gpu, "conv2d");
  const Tensor x = randn({batch, s.c, s.h, s.w}, TensorOptions(gpu));
  const Tensor weight = randn({s.o, s.c, s.k, s.k}, TensorOptions(gpu));
  const Tensor dy = randn({batch, s.o, s.out_h(), s.out_w()}, TensorOptions(gpu));
  ConvParams p;
  p.stride_h = p.stride_w = s.stride;
  p.pad_h = p.pad_w = s.pad;
  PassTimes t;
  t.fwd_ms = ms_per_call([&] { table.conv2d(x, weight, Tensor(), p); }, min_seconds);
  t.bwd_ms = ms_per_call(
      [&] {
        if (s.input_grad) table.conv2d_backward_input(dy, weight, x.sizes(), p);
        table.conv2d_backward_weight(dy, x, weight.sizes(), false, p);
      },
      min_seconds);
  return t;
}

// ---- 3. training steps ----

// Float32, or the forward and the loss under autocast: float16 with a GradScaler (PyTorch's AMP
// recipe), bfloat16 without one.
enum class Precision { Float32, Float16, BFloat16 };

struct TrainingRate {
  double ips = kNaN;
  int skipped = 0;  // timed steps the gradient scaler skipped for an inf or NaN gradient
};

TrainingRate training_rate(nn::Module& model, int64_t batch, int64_t image_size, int64_t classes, const Flags& f,
                           Precision precision = Precision::Float32) {
  const Device gpu = Device::cuda(0);
  model.to(gpu);
  model.train();
  const Tensor images = randn({batch, 3, image_size, image_size}, TensorOptions(gpu));
  const Tensor labels = randint(0, classes, {batch}, TensorOptions(kInt64).device(gpu));
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  std::optional<amp::GradScaler> scaler;
  if (precision == Precision::Float16) scaler.emplace();
  // Whether the optimizer stepped.
  auto step = [&] {
    optimizer.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(kCUDA, precision == Precision::BFloat16 ? kBFloat16 : kFloat16,
                             precision != Precision::Float32);
      loss = cross_entropy(model.forward(images), labels);
    }
    if (!scaler) {
      loss.backward();
      optimizer.step();
      return true;
    }
    scaler->scale(loss).backward();
    const bool stepped = scaler->step(optimizer);
    scaler->update();
    return stepped;
  };
  for (int i = 0; i < f.warmup; ++i) step();
  TrainingRate rate;
  cuda::Event start(true), end(true);
  start.record();
  for (int i = 0; i < f.steps; ++i) rate.skipped += step() ? 0 : 1;
  end.record();
  end.synchronize();
  rate.ips = batch * f.steps / (start.elapsed_ms(end) * 1e-3);
  return rate;
}

// ---- 4. the PyTorch yardstick ----

TorchResults run_torch(const Flags& f, const std::vector<ConvShape>& convs) {
  std::string specs;
  for (const ConvShape& s : convs) specs += (specs.empty() ? "" : ",") + s.spec();
  std::ostringstream args;
  args << "--tf32 " << f.tf32 << " --convs " << bench::shell_quote(specs) << " --conv-batch " << f.conv_batch
       << " --min-seconds " << f.min_seconds << " --batch50 " << f.batch50 << " --batch18 " << f.batch18
       << " --image-size " << f.image_size << " --cifar-size " << f.cifar_size << " --steps " << f.steps << " --warmup "
       << f.warmup << (f.models ? "" : " --no-models") << (f.models && f.amp ? " --amp 1" : "");
  return bench::run_pytorch(f.python, f.torch_script, args.str());
}

// ---- the report ----

struct ModelRun {
  std::string name, label;
  int64_t batch, image_size, classes;
  double step_flops_per_image = kNaN;
  double ips = kNaN;
  std::string error;
  Precision precision = Precision::Float32;
  int skipped = 0;
};

void print_conv_table(const std::vector<ConvShape>& convs, const std::vector<PassTimes>& ember, const TorchResults& t,
                      int64_t batch) {
  std::printf(
      "\nResNet-50 convolutions, batch %lld, ms per call (bwd = data + weight; the stem's weight only); "
      "vs_torch = torch ms / Ember ms\n",
      static_cast<long long>(batch));
  std::printf("%-24s %5s %9s %9s %9s %9s %9s %9s\n", "shape (C->O KxK HxW)", "count", "Ember fwd", "Ember bwd",
              "TFLOP/s", "torch fwd", "torch bwd", "vs_torch");
  double ember_total = 0, torch_total = 0;
  for (size_t i = 0; i < convs.size(); ++i) {
    const ConvShape& s = convs[i];
    auto found = t.convs.find(s.spec());
    const PassTimes theirs = found == t.convs.end() ? PassTimes{} : found->second;
    const double ours = ember[i].fwd_ms + ember[i].bwd_ms, yardstick = theirs.fwd_ms + theirs.bwd_ms;
    ember_total += s.count * ours;
    torch_total += s.count * yardstick;
    std::printf("%-24s %5d %9.3f %9.3f %9.2f %9.3f %9.3f %9.3f\n", s.label().c_str(), s.count, ember[i].fwd_ms,
                ember[i].bwd_ms, s.step_flops(batch) / (ours * 1e-3) * 1e-12, theirs.fwd_ms, theirs.bwd_ms,
                yardstick / ours);
  }
  std::printf("%-24s %5s %19.2f %9s %19.2f %9.3f\n", "network (sum x count)", "", ember_total, "", torch_total,
              torch_total / ember_total);
}

void print_model_table(const std::vector<ModelRun>& runs, const TorchResults& t, double peak_tflops, bool tf32) {
  std::printf("\nTraining step (SGD momentum 0.9), synthetic data, %s; MFU against %s peak\n",
              tf32 ? "TF32 on" : "float32, TF32 off", tf32 ? "the TF32" : "the float32");
  std::printf("%-28s %6s %6s %10s %11s %9s %13s %11s %9s\n", "model", "batch", "image", "GFLOP/img", "Ember img/s",
              "Ember MFU", "PyTorch img/s", "PyTorch MFU", "vs_torch");
  for (const ModelRun& m : runs) {
    const double theirs = m.name == "resnet50" ? t.resnet50_ips : t.resnet18_ips;
    const double mfu = m.step_flops_per_image * m.ips / (peak_tflops * 1e12);
    const double torch_mfu = m.step_flops_per_image * theirs / (peak_tflops * 1e12);
    std::printf("%-28s %6lld %6lld %10.2f %11.1f %8.1f%% %13.1f %10.1f%% %9.3f\n", m.label.c_str(),
                static_cast<long long>(m.batch), static_cast<long long>(m.image_size), m.step_flops_per_image * 1e-9,
                m.ips, 100 * mfu, theirs, 100 * torch_mfu, m.ips / theirs);
    if (!m.error.empty()) std::printf("  %s failed: %s\n", m.name.c_str(), m.error.c_str());
  }
  if (!t.unavailable.empty())
    std::printf("PyTorch: unavailable (%s); vs_torch = nan\n", t.unavailable.c_str());
  else
    std::printf("PyTorch %s: the faster of NCHW and channels_last\n", t.version.c_str());
}

// ResNet-50's mixed-precision runs next to PyTorch AMP's and next to Ember's own float32 step.
void print_amp_table(const ModelRun& float32, const std::vector<ModelRun>& runs, const TorchResults& t,
                     double peak16_tflops, int steps) {
  std::printf(
      "\nResNet-50 mixed precision (forward and loss under autocast), batch %lld; MFU against the 16-bit tensor-core "
      "peak; vs_f32 = over Ember's float32 step above\n",
      static_cast<long long>(float32.batch));
  std::printf("%-28s %11s %9s %7s %13s %11s %9s\n", "precision", "Ember img/s", "Ember MFU", "vs_f32", "PyTorch img/s",
              "PyTorch MFU", "vs_torch");
  for (const ModelRun& m : runs) {
    const double theirs = m.precision == Precision::Float16 ? t.resnet50_fp16_ips : t.resnet50_bf16_ips;
    const double mfu = m.step_flops_per_image * m.ips / (peak16_tflops * 1e12);
    const double torch_mfu = m.step_flops_per_image * theirs / (peak16_tflops * 1e12);
    std::printf("%-28s %11.1f %8.1f%% %7.3f %13.1f %10.1f%% %9.3f\n", m.label.c_str(), m.ips, 100 * mfu,
                m.ips / float32.ips, theirs, 100 * torch_mfu, m.ips / theirs);
    if (m.skipped > 0)
      std::printf("  the scaler skipped %d of the %d timed steps (an inf or NaN gradient: no optimizer step)\n",
                  m.skipped, steps);
    if (!m.error.empty()) std::printf("  %s failed: %s\n", m.label.c_str(), m.error.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::printf("%s", kUsage);
      return 0;
    }
  }
  const std::optional<Flags> parsed = parse_flags(argc, argv);
  if (!parsed) return 2;
  const Flags& f = *parsed;
  if (!cuda::is_available()) {
    std::fprintf(stderr, "gpu: no CUDA device (on the emulator, set EMBER_EMULATED_GPUS=1)\n");
    return 1;
  }
  const cuda::DeviceProperties device = cuda::device_properties(0);
  const std::optional<bench::PeakTflops> peak = bench::datasheet_peak(device);
  std::printf(
      "gpu benchmark: %s, sm_%d%d, %d SMs, %s, %.1f GiB\n", device.name.c_str(), device.major, device.minor,
      device.multi_processor_count,
      device.clock_khz > 0 ? (std::to_string(device.clock_khz / 1000) + " MHz peak SM clock").c_str() : "clock unknown",
      device.total_memory / double(1 << 30));
  if (peak) {
    std::printf("peak (%s datasheet, dense): float32 %.1f, TF32 %.1f, bfloat16 %.1f TFLOP/s\n", peak->source,
                peak->fp32, peak->tf32, peak->bf16);
  } else {
    std::printf("peak: unknown for this device (no datasheet row; %% of peak and MFU are nan)\n");
  }
  std::fflush(stdout);

  double gemm_vs_cublas = kNaN;
  if (f.gemm) {
    try {
      gemm_vs_cublas = run_gemm_section(f, peak, device.emulated);
    } catch (const std::exception& e) {
      std::printf("GEMM section failed: %s\n", e.what());
    }
    cuda::empty_cache();
  }

  manual_seed(0);
  auto resnet50 = models::make_model("resnet50", 3, f.image_size, 1000);
  auto resnet18 = models::make_model("resnet18", 3, f.cifar_size, 10);
  const Census census50 = bench::take_census(*resnet50, {3, f.image_size, f.image_size});
  const Census census18 = bench::take_census(*resnet18, {3, f.cifar_size, f.cifar_size});
  // Both switches, as the yardstick's --tf32 sets both of PyTorch's: cuDNN's defaults to on (as
  // PyTorch's does), and left so it made the first H100 run's "float32, TF32 off" rows TF32 on
  // Ember's side only (convolutions at 100+ TFLOP/s against a float32 peak of 67).
  cuda::set_matmul_allow_tf32(f.tf32);
  cuda::set_cudnn_allow_tf32(f.tf32);

  std::vector<PassTimes> conv_times(census50.convs.size()), heuristic_times(census50.convs.size());
  double conv_measured_vs_heuristic = kNaN;
  if (f.conv) {
    std::printf(
        "\ntiming %zu distinct ResNet-50 convolutions at batch %lld, with each pass's algorithm chosen by "
        "cuDNN's heuristic and by measurement...\n",
        census50.convs.size(), static_cast<long long>(f.conv_batch));
    std::fflush(stdout);
    try {
      // The heuristic's choice (cuDNN's first usable deterministic algorithm), then the measured
      // one (kernel_select's trials on each shape's first call), the mode this program runs in.
      double heuristic_total = 0, measured_total = 0;
      for (size_t i = 0; i < census50.convs.size(); ++i) {
        const ConvShape& shape = census50.convs[i];
        kernel_select::set_mode(kernel_select::Mode::Heuristic);
        heuristic_times[i] = time_conv(shape, f.conv_batch, f.min_seconds);
        kernel_select::set_mode(kernel_select::Mode::Benchmark);
        conv_times[i] = time_conv(shape, f.conv_batch, f.min_seconds);
        heuristic_total += shape.count * (heuristic_times[i].fwd_ms + heuristic_times[i].bwd_ms);
        measured_total += shape.count * (conv_times[i].fwd_ms + conv_times[i].bwd_ms);
      }
      conv_measured_vs_heuristic = heuristic_total / measured_total;
      std::printf(
          "ResNet-50's convolutions, summed over the network: %.2f ms with cuDNN's heuristic choice, %.2f ms "
          "with the measured one (%.3fx)\n",
          heuristic_total, measured_total, conv_measured_vs_heuristic);
    } catch (const std::exception& e) {
      std::printf("convolution section failed: %s\n", e.what());
    }
    cuda::empty_cache();
  }

  std::vector<ModelRun> runs = {
      {"resnet50", "resnet50 (ImageNet stem)", f.batch50, f.image_size, 1000, 3 * census50.forward_flops_per_image},
      {"resnet18", "resnet18 (CIFAR stem)", f.batch18, f.cifar_size, 10, 3 * census18.forward_flops_per_image},
  };
  if (f.models) {
    for (ModelRun& run : runs) {
      std::printf("training %s, batch %lld, %d + %d steps...\n", run.name.c_str(), static_cast<long long>(run.batch),
                  f.warmup, f.steps);
      std::fflush(stdout);
      try {
        nn::Module& model = run.name == "resnet50" ? *resnet50 : *resnet18;
        run.ips = training_rate(model, run.batch, run.image_size, run.classes, f).ips;
      } catch (const std::exception& e) {
        run.error = e.what();
      }
      cuda::empty_cache();
    }
  }
  resnet50.reset();
  resnet18.reset();
  cuda::empty_cache();

  // A fresh model for each, as the yardstick makes one per run: weights a float32 run has trained
  // on random labels could overflow float16 where fresh ones do not.
  std::vector<ModelRun> amp_runs = {
      {"resnet50", "fp16 autocast + GradScaler", f.batch50, f.image_size, 1000, runs[0].step_flops_per_image},
      {"resnet50", "bf16 autocast", f.batch50, f.image_size, 1000, runs[0].step_flops_per_image},
  };
  amp_runs[0].precision = Precision::Float16;
  amp_runs[1].precision = Precision::BFloat16;
  if (f.models && f.amp) {
    for (ModelRun& run : amp_runs) {
      std::printf("training resnet50 with %s, batch %lld, %d + %d steps...\n", run.label.c_str(),
                  static_cast<long long>(run.batch), f.warmup, f.steps);
      std::fflush(stdout);
      try {
        manual_seed(0);
        auto model = models::make_model("resnet50", 3, f.image_size, 1000);
        const TrainingRate rate = training_rate(*model, run.batch, run.image_size, run.classes, f, run.precision);
        run.ips = rate.ips;
        run.skipped = rate.skipped;
      } catch (const std::exception& e) {
        run.error = e.what();
      }
      cuda::empty_cache();
    }
  }

  TorchResults torch;
  if (!f.torch)
    torch.unavailable = "skipped (--no-torch)";
  else if (f.conv || f.models)
    torch = run_torch(f, f.conv ? census50.convs : std::vector<ConvShape>{});

  const double model_peak = peak ? (f.tf32 ? peak->tf32 : peak->fp32) : kNaN;
  if (f.conv) print_conv_table(census50.convs, conv_times, torch, f.conv_batch);
  if (f.models) print_model_table(runs, torch, model_peak, f.tf32);
  if (f.models && f.amp) print_amp_table(runs[0], amp_runs, torch, peak ? peak->bf16 : kNaN, f.steps);

  const ModelRun& r50 = runs[0];
  const ModelRun& r18 = runs[1];
  const ModelRun& fp16 = amp_runs[0];
  const ModelRun& bf16 = amp_runs[1];
  std::printf(
      "bench gpu: resnet50_ips=%.1f vs_torch=%.3f gemm_vs_cublas=%.3f resnet50_mfu=%.3f resnet18_ips=%.1f "
      "resnet18_vs_torch=%.3f tf32=%d resnet50_fp16_ips=%.1f resnet50_fp16_vs_torch=%.3f resnet50_bf16_ips=%.1f "
      "resnet50_bf16_vs_torch=%.3f conv_measured_vs_heuristic=%.3f\n",
      r50.ips, r50.ips / torch.resnet50_ips, gemm_vs_cublas, r50.step_flops_per_image * r50.ips / (model_peak * 1e12),
      r18.ips, r18.ips / torch.resnet18_ips, f.tf32 ? 1 : 0, fp16.ips, fp16.ips / torch.resnet50_fp16_ips, bf16.ips,
      bf16.ips / torch.resnet50_bf16_ips, conv_measured_vs_heuristic);
  return 0;
}

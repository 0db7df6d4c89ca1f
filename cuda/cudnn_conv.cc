// cuDNN's legacy convolution API (cudnn_cnn.h, kept in cuDNN 9). Descriptors are host-side and
// cheap, so each call builds its own; handles are per host thread and device (a handle's stream
// is handle state, and threads queue on their own current streams) and are bound to the current
// stream at each call; the algorithm for a problem is chosen once and cached.
// Names follow the forward pass throughout: x input, w weight, y output.
#include "cuda/cudnn_conv.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "cuda/api.h"

namespace ember::cuda {

namespace {

// The largest workspace one convolution may take; algorithms that need more are passed over.
// Ember's own path holds at most a 128 MB column buffer; cuDNN's GEMM-based and Winograd
// algorithms for ResNet-sized layers need far less than this, FFT ones on large images more.
constexpr size_t kWorkspaceLimit = size_t{512} << 20;

enum class Pass { Forward, BackwardData, BackwardFilter };

// What the cache is keyed by and what an error names.
struct Problem {
  Pass pass;
  Shape x, w, y;
  ConvParams p;
  DType dtype;
  cudnnMathType_t math;  // the precision asked for; the chosen algorithm's may be narrower
  int device;
};

struct Plan {
  bool supported = false;
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by pass
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  bool deterministic = true;
};

const char* op_name(Pass pass) {
  switch (pass) {
    case Pass::Forward:
      return "conv2d";
    case Pass::BackwardData:
      return "conv2d backward-data";
    case Pass::BackwardFilter:
      return "conv2d backward-weight";
  }
  return "conv2d";
}

[[noreturn]] void fail(cudnnStatus_t status, const char* call, const Problem& pb) {
  // cuDNN 9 keeps a per-thread message naming the check that failed, often more than the status
  // says. It is the thread's latest, which may be older than this failure: labelled as such.
  char detail[256] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  const ConvParams& p = pb.p;
  EMBER_FAIL(op_name(pb.pass), ": ", call, " failed on cuda:", pb.device, " with ", cudnnGetErrorString(status),
             " for input ", shape_str(pb.x), ", weight ", shape_str(pb.w), ", output ", shape_str(pb.y), " (",
             dtype_name(pb.dtype), ", stride ", p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w,
             ", dilation ", p.dilation_h, "x", p.dilation_w, ", groups ", p.groups, ")",
             detail[0] ? std::string("; cuDNN's last message: ") + detail : std::string());
}

void check(cudnnStatus_t status, const char* call, const Problem& pb) {
  if (status != CUDNN_STATUS_SUCCESS) fail(status, call, pb);
}

// True on success, false when cuDNN says it does not support the problem (Ember's kernels take
// it then); any other status is a misuse or a failure and raises.
bool ok(cudnnStatus_t status, const char* call, const Problem& pb) {
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED) return false;
  fail(status, call, pb);
}

bool data_type(DType dtype, cudnnDataType_t* type) {
  switch (dtype) {
    case kFloat32:
      *type = CUDNN_DATA_FLOAT;
      return true;
    case kFloat64:
      *type = CUDNN_DATA_DOUBLE;
      return true;
    case kFloat16:
      *type = CUDNN_DATA_HALF;
      return true;
    case kBFloat16:
      *type = CUDNN_DATA_BFLOAT16;
      return true;
    default:
      return false;
  }
}

// PyTorch's choices: cuDNN's default math lets float32 use TF32 tensor cores on Ampere and later,
// so float32 without TF32 asks for FMA units only; 16-bit types want tensor cores.
cudnnMathType_t math_type(DType dtype, bool allow_tf32) {
  if (dtype == kFloat32) return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  if (dtype == kFloat16 || dtype == kBFloat16) return CUDNN_TENSOR_OP_MATH;
  return CUDNN_DEFAULT_MATH;
}

// The legacy API takes int sizes and addresses at most 2^31 - 1 elements per tensor.
bool fits_int(const Problem& pb) {
  for (const Shape* s : {&pb.x, &pb.w, &pb.y}) {
    if (shape_numel(*s) > INT_MAX) return false;
  }
  const ConvParams& p = pb.p;
  for (int64_t v : {p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, p.groups}) {
    if (v > INT_MAX) return false;
  }
  return true;
}

int to_int(int64_t v) { return static_cast<int>(v); }

cudnnHandle_t handle_for(const Problem& pb) {
  // Kept for the thread's life and never destroyed, as blas.cc keeps cuBLAS's: creating one costs
  // far more than a call, and at exit the CUDA runtime may already be torn down.
  thread_local std::vector<cudnnHandle_t> handles;
  if (handles.size() <= static_cast<size_t>(pb.device)) handles.resize(pb.device + 1, nullptr);
  cudnnHandle_t& h = handles[pb.device];
  if (!h) check(cudnnCreate(&h), "cudnnCreate", pb);  // binds to the current device: the caller's guard
  return h;
}

struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// False when cuDNN does not support the problem's dtype or geometry.
bool describe(const Problem& pb, cudnnDataType_t type, Descriptors& d) {
  const Shape &x = pb.x, &w = pb.w, &y = pb.y;
  const ConvParams& p = pb.p;
  // 16-bit data accumulates in float32, as Ember's own GEMM does.
  const cudnnDataType_t compute = type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  return ok(cudnnCreateTensorDescriptor(&d.x), "cudnnCreateTensorDescriptor", pb) &&
         ok(cudnnCreateTensorDescriptor(&d.y), "cudnnCreateTensorDescriptor", pb) &&
         ok(cudnnCreateFilterDescriptor(&d.w), "cudnnCreateFilterDescriptor", pb) &&
         ok(cudnnCreateConvolutionDescriptor(&d.conv), "cudnnCreateConvolutionDescriptor", pb) &&
         ok(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, type, to_int(x[0]), to_int(x[1]), to_int(x[2]),
                                       to_int(x[3])),
            "cudnnSetTensor4dDescriptor", pb) &&
         ok(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, type, to_int(y[0]), to_int(y[1]), to_int(y[2]),
                                       to_int(y[3])),
            "cudnnSetTensor4dDescriptor", pb) &&
         ok(cudnnSetFilter4dDescriptor(d.w, type, CUDNN_TENSOR_NCHW, to_int(w[0]), to_int(w[1]), to_int(w[2]),
                                       to_int(w[3])),
            "cudnnSetFilter4dDescriptor", pb) &&
         ok(cudnnSetConvolution2dDescriptor(d.conv, to_int(p.pad_h), to_int(p.pad_w), to_int(p.stride_h),
                                            to_int(p.stride_w), to_int(p.dilation_h), to_int(p.dilation_w),
                                            CUDNN_CROSS_CORRELATION, compute),
            "cudnnSetConvolution2dDescriptor", pb) &&
         ok(cudnnSetConvolutionGroupCount(d.conv, to_int(p.groups)), "cudnnSetConvolutionGroupCount", pb) &&
         ok(cudnnSetConvolutionMathType(d.conv, pb.math), "cudnnSetConvolutionMathType", pb);
}

// One entry of cuDNN's ranked answer, whichever pass asked.
struct Candidate {
  int algo;
  cudnnStatus_t status;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};

template <class Perf>
std::vector<Candidate> candidates(const std::vector<Perf>& perf, int count) {
  std::vector<Candidate> out;
  for (int i = 0; i < std::min<int>(count, perf.size()); ++i)
    out.push_back({static_cast<int>(perf[i].algo), perf[i].status, perf[i].determinism, perf[i].mathType});
  return out;
}

// cuDNN's heuristic ranking for the pass, best first; false when it supports no algorithm.
bool ranked(cudnnHandle_t h, const Descriptors& d, const Problem& pb, std::vector<Candidate>& out) {
  int most = 0, count = 0;
  switch (pb.pass) {
    case Pass::Forward: {
      if (!ok(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &most), "cudnnGetConvolutionForwardAlgorithmMaxCount", pb))
        return false;
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(most, 1));
      if (!ok(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, most, &count, perf.data()),
              "cudnnGetConvolutionForwardAlgorithm_v7", pb))
        return false;
      out = candidates(perf, count);
      return true;
    }
    case Pass::BackwardData: {
      if (!ok(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &most),
              "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", pb))
        return false;
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(most, 1));
      if (!ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, most, &count, perf.data()),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7", pb))
        return false;
      out = candidates(perf, count);
      return true;
    }
    case Pass::BackwardFilter: {
      if (!ok(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &most),
              "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", pb))
        return false;
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(most, 1));
      if (!ok(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, most, &count, perf.data()),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7", pb))
        return false;
      out = candidates(perf, count);
      return true;
    }
  }
  return false;
}

cudnnStatus_t workspace_size(cudnnHandle_t h, const Descriptors& d, Pass pass, int algo, size_t* bytes) {
  switch (pass) {
    case Pass::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case Pass::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
    case Pass::BackwardFilter:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

// Float32 without TF32 must stay on FMA units (PyTorch asserts the same of cuDNN's answer), and
// no dtype may be converted down to half precision inside cuDNN.
bool keeps_precision(const Problem& pb, cudnnMathType_t math) {
  if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  return pb.math != CUDNN_FMA_MATH || math == CUDNN_FMA_MATH;
}

// The names trials and reports use: cuDNN's enum names, by pass.
std::string algorithm_name(Pass pass, int algo, cudnnMathType_t math) {
  static const char* forward[] = {"implicit-gemm", "implicit-precomp-gemm", "gemm", "direct", "fft", "fft-tiling",
                                  "winograd",      "winograd-nonfused"};
  static const char* data[] = {"algo0", "algo1", "fft", "fft-tiling", "winograd", "winograd-nonfused"};
  static const char* filter[] = {"algo0", "algo1", "fft", "algo3", "winograd", "winograd-nonfused", "fft-tiling"};
  const char* const* names = pass == Pass::Forward ? forward : pass == Pass::BackwardData ? data : filter;
  const int count = pass == Pass::Forward ? 8 : pass == Pass::BackwardData ? 6 : 7;
  std::string name = "cudnn-";
  name += algo >= 0 && algo < count ? names[algo] : "algo" + std::to_string(algo);
  if (math == CUDNN_TENSOR_OP_MATH) name += "-tensor-op";
  if (math == CUDNN_FMA_MATH) name += "-fma";
  return name;
}

// The ranking walked for every algorithm that cuDNN can run, that keeps the precision asked for,
// whose workspace (asked of cuDNN for that algorithm and math type) fits kWorkspaceLimit, and,
// with `deterministic_only`, that is deterministic: Ember's own kernels give the same bits on
// every run (col2im gathers rather than adding atomically), so by default a training run resumed
// from a checkpoint (which carries the kernel decisions) continues bit for bit; cuDNN's
// atomic-accumulating backward algorithms would lose that (PyTorch allows them unless
// use_deterministic_algorithms is set).
std::vector<Plan> usable(cudnnHandle_t h, Descriptors& d, const Problem& pb, bool deterministic_only) {
  std::vector<Plan> plans;
  std::vector<Candidate> list;
  if (!ranked(h, d, pb, list)) return plans;
  for (const Candidate& c : list) {
    if (c.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic_only && c.determinism != CUDNN_DETERMINISTIC) continue;
    if (!keeps_precision(pb, c.math)) continue;
    // The workspace depends on the math type as well as the algorithm.
    if (!ok(cudnnSetConvolutionMathType(d.conv, c.math), "cudnnSetConvolutionMathType", pb)) continue;
    size_t bytes = 0;
    if (workspace_size(h, d, pb.pass, c.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kWorkspaceLimit) continue;
    Plan plan;
    plan.supported = true;
    plan.algo = c.algo;
    plan.math = c.math;
    plan.workspace = bytes;
    plan.deterministic = c.determinism == CUDNN_DETERMINISTIC;
    plans.push_back(plan);
  }
  return plans;
}

// cudnnGet*Algorithm_v7, not cudnnFind*AlgorithmEx: the heuristics run no kernels. The calls
// below that run without a choice by measurement (cudnn_conv_forward & co.) take the ranking's
// first usable deterministic algorithm; cuda/conv.cc times them all through kernel_select.
Plan choose(cudnnHandle_t h, Descriptors& d, const Problem& pb) {
  const std::vector<Plan> plans = usable(h, d, pb, true);
  return plans.empty() ? Plan() : plans.front();
}

using Key = std::array<int64_t, 19>;

Key key_of(const Problem& pb) {
  const ConvParams& p = pb.p;
  return {static_cast<int64_t>(pb.pass),
          pb.x[0],
          pb.x[1],
          pb.x[2],
          pb.x[3],
          pb.w[0],
          pb.w[1],
          pb.w[2],
          pb.w[3],
          p.stride_h,
          p.stride_w,
          p.pad_h,
          p.pad_w,
          p.dilation_h,
          p.dilation_w,
          p.groups,
          static_cast<int64_t>(pb.dtype),
          static_cast<int64_t>(pb.math),
          pb.device};
}

struct Cache {
  std::mutex mutex;
  std::map<Key, Plan> plans;
};

Cache& cache() {
  static Cache instance;
  return instance;
}

Plan plan_for(cudnnHandle_t h, Descriptors& d, const Problem& pb) {
  Cache& c = cache();
  const Key key = key_of(pb);
  // Held while choosing, so that each key is chosen exactly once: the heuristics launch nothing,
  // and each key pays for them once in the process's life.
  std::lock_guard<std::mutex> lock(c.mutex);
  auto found = c.plans.find(key);
  if (found != c.plans.end()) return found->second;
  const Plan plan = choose(h, d, pb);
  c.plans.emplace(key, plan);
  return plan;
}

// What every call needs: the problem, the device's handle and the descriptors; false when cuDNN
// does not take the tensors (dtype, layout, sizes).
struct Call {
  Problem pb;
  cudnnDataType_t type;
  cudnnHandle_t handle = nullptr;
  Descriptors d;
};

bool prepare(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p, bool allow_tf32,
             Call& call) {
  if (!data_type(x.dtype(), &call.type) || w.dtype() != x.dtype() || y.dtype() != x.dtype()) return false;
  if (!x.is_contiguous() || !w.is_contiguous() || !y.is_contiguous()) return false;
  call.pb =
      Problem{pass, x.sizes(), w.sizes(), y.sizes(), p, x.dtype(), math_type(x.dtype(), allow_tf32), x.device().index};
  if (!fits_int(call.pb)) return false;
  call.handle = handle_for(call.pb);
  return describe(call.pb, call.type, call.d);
}

bool execute(Call& call, const Plan& plan, const Tensor& x, const Tensor& w, const Tensor& y) {
  const Problem& pb = call.pb;
  cudnnHandle_t h = call.handle;
  Descriptors& d = call.d;
  check(cudnnSetConvolutionMathType(d.conv, plan.math), "cudnnSetConvolutionMathType", pb);
  check(cudnnSetStream(h, current_stream(pb.device).handle()), "cudnnSetStream", pb);
  // From the caching allocator on the current stream, as every tensor here: cuDNN's kernels use
  // it in that stream's order, so it may be freed (and handed out again) once the call is queued.
  Tensor workspace;
  if (plan.workspace > 0)
    workspace = empty({static_cast<int64_t>(plan.workspace)}, TensorOptions(kUInt8).device(x.device()));
  void* ws = workspace.defined() ? workspace.data_ptr() : nullptr;
  // The output is overwritten (beta = 0). The factors are double for double data, float otherwise.
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const bool f64 = call.type == CUDNN_DATA_DOUBLE;
  const void* one = f64 ? static_cast<const void*>(&one64) : static_cast<const void*>(&one32);
  const void* zero = f64 ? static_cast<const void*>(&zero64) : static_cast<const void*>(&zero32);
  // A refusal at this point (a pointer alignment the chosen kernels do not take, say) still
  // leaves the convolution to Ember's kernels.
  switch (pb.pass) {
    case Pass::Forward:
      return ok(cudnnConvolutionForward(h, one, d.x, x.data_ptr(), d.w, w.data_ptr(), d.conv,
                                        static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), ws, plan.workspace, zero,
                                        d.y, y.data_ptr()),
                "cudnnConvolutionForward", pb);
    case Pass::BackwardData:
      return ok(cudnnConvolutionBackwardData(h, one, d.w, w.data_ptr(), d.y, y.data_ptr(), d.conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws, plan.workspace,
                                             zero, d.x, x.data_ptr()),
                "cudnnConvolutionBackwardData", pb);
    case Pass::BackwardFilter:
      return ok(cudnnConvolutionBackwardFilter(h, one, d.x, x.data_ptr(), d.y, y.data_ptr(), d.conv,
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws,
                                               plan.workspace, zero, d.w, w.data_ptr()),
                "cudnnConvolutionBackwardFilter", pb);
  }
  return false;
}

bool run(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p, bool allow_tf32) {
  DeviceGuard guard(x.device().index);
  Call call;
  if (!prepare(pass, x, w, y, p, allow_tf32, call)) return false;
  const Plan plan = plan_for(call.handle, call.d, call.pb);
  return plan.supported && execute(call, plan, x, w, y);
}

Pass to_pass(CudnnPass pass) {
  return pass == CudnnPass::Forward        ? Pass::Forward
         : pass == CudnnPass::BackwardData ? Pass::BackwardData
                                           : Pass::BackwardFilter;
}

}  // namespace

bool cudnn_conv_forward(const Tensor& input, const Tensor& weight, const Tensor& output, const ConvParams& p,
                        bool allow_tf32) {
  return run(Pass::Forward, input, weight, output, p, allow_tf32);
}

bool cudnn_conv_backward_data(const Tensor& grad_output, const Tensor& weight, const Tensor& grad_input,
                              const ConvParams& p, bool allow_tf32) {
  return run(Pass::BackwardData, grad_input, weight, grad_output, p, allow_tf32);
}

bool cudnn_conv_backward_filter(const Tensor& grad_output, const Tensor& input, const Tensor& grad_weight,
                                const ConvParams& p, bool allow_tf32) {
  return run(Pass::BackwardFilter, input, grad_weight, grad_output, p, allow_tf32);
}

std::vector<CudnnAlgorithm> cudnn_conv_algorithms(CudnnPass pass, const Tensor& x, const Tensor& w, const Tensor& y,
                                                  const ConvParams& p, bool allow_tf32, bool deterministic_only) {
  DeviceGuard guard(x.device().index);
  Call call;
  std::vector<CudnnAlgorithm> out;
  if (!prepare(to_pass(pass), x, w, y, p, allow_tf32, call)) return out;
  for (const Plan& plan : usable(call.handle, call.d, call.pb, deterministic_only))
    out.push_back({plan.algo, static_cast<int>(plan.math), plan.workspace, plan.deterministic,
                   algorithm_name(call.pb.pass, plan.algo, plan.math)});
  return out;
}

bool cudnn_conv_run(CudnnPass pass, const CudnnAlgorithm& algorithm, const Tensor& x, const Tensor& w, const Tensor& y,
                    const ConvParams& p, bool allow_tf32) {
  DeviceGuard guard(x.device().index);
  Call call;
  if (!prepare(to_pass(pass), x, w, y, p, allow_tf32, call)) return false;
  Plan plan;
  plan.supported = true;
  plan.algo = algorithm.algo;
  plan.math = static_cast<cudnnMathType_t>(algorithm.math);
  plan.workspace = algorithm.workspace;
  return execute(call, plan, x, w, y);
}

size_t cudnn_conv_cached_plans() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.plans.size();
}

}  // namespace ember::cuda

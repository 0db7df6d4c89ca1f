// PyTorch on the same GPU, for //tools/bench:gpu: runs tools/bench/pytorch_gpu.py as a child
// process, echoes its output and reads its records (the protocol is in the script's docstring).
// A missing python3, torch or CUDA device is a result, not an error: `unavailable` says which.
#pragma once

#include <cmath>
#include <map>
#include <string>

namespace ember::bench {

// One convolution's times, ms per call; NaN where not measured.
struct PassTimes {
  double fwd_ms = std::nan(""), bwd_ms = std::nan("");
};

struct TorchResults {
  std::string unavailable;  // why there are no model results; empty when the script finished
  std::string version;
  std::map<std::string, PassTimes> convs;  // by ConvShape::spec()
  double resnet50_ips = std::nan(""), resnet18_ips = std::nan("");
  double resnet50_fp16_ips = std::nan(""), resnet50_bf16_ips = std::nan("");  // AMP (--amp 1)
};

// `python` is a shell command prefix ("python3", "env -u LD_LIBRARY_PATH python3"); `arguments`
// are passed to the script as they are (quote them with shell_quote).
TorchResults run_pytorch(const std::string& python, const std::string& script, const std::string& arguments);

std::string shell_quote(const std::string& text);

}  // namespace ember::bench

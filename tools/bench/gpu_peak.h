// Datasheet peak rates of the GPUs the bench knows, dense (no 2:4 sparsity), in TFLOP/s: float32
// on the CUDA cores, TF32 and bfloat16 on the tensor cores. Used for "% of peak" and MFU; any other
// device reports its peak as unknown rather than a guess.
#pragma once

#include <optional>
#include <string>

#include "cuda/device_properties.h"

namespace ember::bench {

struct PeakTflops {
  const char* source;  // which datasheet row
  double fp32, tf32, bf16;
};

// The name and the compute capability must both match, so that a renamed or cut-down part is
// not measured against a bigger one's peak. H200 shares the H100's SM and clocks (its gain is
// memory), so the SXM rows agree.
inline std::optional<PeakTflops> datasheet_peak(const cuda::DeviceProperties& d) {
  const std::string& n = d.name;
  auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
  if (d.major == 9 && d.minor == 0 && (has("H100") || has("H200"))) {
    if (has("NVL")) return PeakTflops{has("H100") ? "H100 NVL" : "H200 NVL", 60.0, 417.5, 835.5};
    if (has("H100") && (has("PCIe") || has("PCIE"))) return PeakTflops{"H100 PCIe", 51.2, 378.0, 756.0};
    return PeakTflops{has("H100") ? "H100 SXM5" : "H200 SXM5", 66.9, 494.7, 989.4};
  }
  if (d.major == 8 && d.minor == 0 && has("A100")) return PeakTflops{"A100", 19.5, 156.0, 312.0};
  return std::nullopt;
}

}  // namespace ember::bench

#include "core/cpu/isa.h"

#include <dnnl.h>

#include <cstdlib>

#include "core/error.h"

namespace ember::cpu {

namespace {

Isa native_isa() {
  if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
  return Isa::Sse41;
}

struct Cap {
  Isa effective;
  bool lowered;
};

// oneDNN fixes its ISA on its first use and ignores later caps, so this runs before any oneDNN
// call: every entry into oneDNN (engine(), sgemm) asks isa() first.
Cap read_cap() {
  const Isa native = native_isa();
  const char* env = std::getenv("EMBER_CPU_ISA");
  if (env == nullptr || *env == '\0') return {native, false};
  const std::string value = env;
  Isa cap;
  dnnl_cpu_isa_t dnnl_cap;
  if (value == "avx512") {
    cap = Isa::Avx512, dnnl_cap = dnnl_cpu_isa_all;
  } else if (value == "avx2") {
    cap = Isa::Avx2, dnnl_cap = dnnl_cpu_isa_avx2;
  } else if (value == "sse41") {
    cap = Isa::Sse41, dnnl_cap = dnnl_cpu_isa_sse41;
  } else {
    throw Error("cpu: EMBER_CPU_ISA: expected avx512, avx2 or sse41, found \"" + value + "\"");
  }
  // Refused only after oneDNN's first use, which cannot have happened: see above.
  dnnl_set_max_cpu_isa(dnnl_cap);
  const Isa effective = cap < native ? cap : native;
  return {effective, effective != native};
}

const Cap& cap() {
  static const Cap instance = read_cap();
  return instance;
}

}  // namespace

Isa isa() { return cap().effective; }

std::string isa_description() {
  const char* names[] = {"sse41", "avx2", "avx512"};
  std::string out = names[static_cast<int>(isa())];
  if (cap().lowered) out += " (capped by EMBER_CPU_ISA)";
  return out;
}

bool has_avx2_fma() { return isa() >= Isa::Avx2; }

bool has_avx512f() { return isa() >= Isa::Avx512; }

bool has_avx512_core() {
  static const bool native = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return native && has_avx512f();
}

bool has_native_bf16() {
  static const bool native = [] {
    isa();  // applies EMBER_CPU_ISA before oneDNN reports its ISA
    // ISA values are bit sets; each includes the bits of the ISAs below it.
    const auto effective = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
    return (effective & bf16) == bf16;
  }();
  return native;
}

}  // namespace ember::cpu

// The instruction sets the CPU backend may use: what the CPU has, capped by EMBER_CPU_ISA.
//
// EMBER_CPU_ISA=avx2 makes an AVX-512 machine run the kernels an AVX2-only one would (Ember's own
// and oneDNN's, which gets the same cap), e.g. to reproduce a user's AVX2 figures or choices.
// Values: avx512 (no cap), avx2, sse41. A cap above what the CPU has changes nothing. The cap is
// read once, before the first oneDNN call; an unknown value is an Error at the first kernel call.
#pragma once

#include <string>

namespace ember::cpu {

enum class Isa { Sse41, Avx2, Avx512 };

// The effective level: min(the CPU's, the cap). Throws Error for a malformed EMBER_CPU_ISA.
Isa isa();
// "sse41", "avx2" or "avx512"; with " (capped by EMBER_CPU_ISA)" when the cap lowered it.
std::string isa_description();

bool has_avx2_fma();     // AVX2 and FMA, within the cap
bool has_avx512f();      // AVX-512 Foundation, within the cap
bool has_avx512_core();  // AVX-512 F/BW/VL/DQ, what oneDNN's Winograd and bf16 kernels need
// bf16 dot products (AVX512_BF16, or AMX), as oneDNN sees the CPU under the cap: where its bf16
// kernels run natively rather than emulated, and bf16 is worth choosing for speed.
bool has_native_bf16();

}  // namespace ember::cpu

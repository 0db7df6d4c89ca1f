// libFuzzer target for the safetensors reader: parse_safetensors on arbitrary bytes. An
// ember::Error is the expected answer to a bad file; a crash, a sanitizer report, any other
// exception or a tensor whose storage is smaller than its shape claims is a finding.
// Built and run by tools/fuzz/run_fuzzer safetensors (clang only; not part of the Bazel build).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/io/safetensors.h"

namespace {

// A tensor the reader hands out must be backed by all the bytes its shape and dtype describe.
void check_tensor(const std::string& name, const ember::Tensor& t) {
  size_t expected = 0;
  bool overflow = __builtin_mul_overflow(static_cast<size_t>(t.numel()), t.element_size(), &expected);
  if (t.numel() < 0 || overflow || !t.is_contiguous() || t.storage()->nbytes() < expected) {
    std::fprintf(stderr, "safetensors_fuzzer: tensor '%s' has %lld elements of %zu bytes but %zu bytes of storage\n",
                 name.c_str(), static_cast<long long>(t.numel()), t.element_size(), t.storage()->nbytes());
    std::abort();
  }
  // Read every byte so that AddressSanitizer checks the whole buffer.
  const volatile uint8_t* bytes = static_cast<const uint8_t*>(t.storage()->data());
  uint8_t sum = 0;
  for (size_t i = 0; i < expected; ++i) sum += bytes[i];
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ember::SafetensorsFile file = ember::parse_safetensors(data, size, "fuzz");
    for (const auto& [name, t] : file.tensors) check_tensor(name, t);
  } catch (const ember::Error&) {
    // Rejected cleanly: the expected outcome for a malformed file.
  }
  return 0;  // any other exception escapes and libFuzzer reports it as a crash
}

// DType properties and promotion (PyTorch's rules for tensor-tensor operands).
#include "core/dtype.h"

#include "core/error.h"

namespace ember {

size_t element_size(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return 4;
    case kFloat64:
      return 8;
    case kBFloat16:
      return 2;
    case kFloat16:
      return 2;
    case kInt64:
      return 8;
    case kInt32:
      return 4;
    case kUInt8:
      return 1;
    case kBool:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return "float32";
    case kFloat64:
      return "float64";
    case kBFloat16:
      return "bfloat16";
    case kFloat16:
      return "float16";
    case kInt64:
      return "int64";
    case kInt32:
      return "int32";
    case kUInt8:
      return "uint8";
    case kBool:
      return "bool";
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16 || dtype == kFloat16;
}

bool is_integral(DType dtype) { return !is_floating(dtype); }

namespace {
// Rank within a category: bool < integers < floats; larger rank wins inside a category.
int category(DType d) { return d == kBool ? 0 : (is_floating(d) ? 2 : 1); }
int width_rank(DType d) {
  switch (d) {
    case kBool:
      return 0;
    case kUInt8:
      return 1;
    case kInt32:
      return 2;
    case kInt64:
      return 3;
    case kFloat16:
      return 1;
    case kBFloat16:
      return 1;
    case kFloat32:
      return 2;
    case kFloat64:
      return 3;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  // bf16 and f16 cannot represent each other: both promote to f32.
  if ((a == kBFloat16 && b == kFloat16) || (a == kFloat16 && b == kBFloat16)) return kFloat32;
  return width_rank(a) >= width_rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

namespace detail {
void unsupported_dtype(const char* op, DType dtype) {
  throw_error(concat(op, ": dtype ", dtype_name(dtype), " is not supported"));
}
}  // namespace detail

}  // namespace ember

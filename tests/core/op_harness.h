// The table-driven op harness: an OpCase runs one Ember op on random inputs (random shapes with
// size-0/size-1 dims, non-contiguous layouts, every dtype it supports) on a given Device and
// compares every output with a float64 reference written with plain loops over host doubles.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/ember_core.h"

namespace ember::test {

// A host array of doubles in row-major order: what references read and return. `dtype` is the
// dtype of the Ember tensor it stands for (an input's dtype, or the dtype an output must have).
struct RefTensor {
  Shape shape;
  DType dtype = kFloat64;
  std::vector<double> values;
  // Optional, for 16-bit outputs: per element, the largest magnitude that the op's roundings on
  // the way happen at (OpCase::tolerance_scale), where the result cancels below its parts.
  std::vector<double> magnitude;

  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  double at(const std::vector<int64_t>& index) const;
};

// ---- reference building blocks: index arithmetic done by hand, never through Ember ops ----

int64_t count_elements(const Shape& shape);
// Row-major offset of `index` in `shape`.
int64_t flat_index(const Shape& shape, const std::vector<int64_t>& index);
// Calls fn for every index of `shape` in row-major order (once, with {}, for a 0-dim shape).
void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& fn);
// Broadcasts shapes by NumPy's rules; nullopt when they are incompatible.
std::optional<Shape> broadcast_all(const std::vector<Shape>& shapes);
// The element of `t` that broadcasting to a larger shape maps `out_index` to.
double broadcast_at(const RefTensor& t, const std::vector<int64_t>& out_index);
// Wraps a possibly negative dim into [0, ndim) (a 0-dim tensor accepts 0 and -1).
int64_t wrap(int64_t dim, int64_t ndim);

RefTensor ref_filled(const Shape& shape, DType dtype, double value);
// fn applied to the broadcast elements of `inputs`, giving a tensor of `dtype`.
RefTensor ref_elementwise(const std::vector<RefTensor>& inputs, DType dtype,
                          const std::function<double(const std::vector<double>&)>& fn);
// Reduces `dims` of x (empty = all); fn sees the reduced elements in row-major order.
RefTensor ref_reduce(const RefTensor& x, const std::vector<int64_t>& dims, bool keepdim, DType dtype,
                     const std::function<double(const std::vector<double>&)>& fn);

// The value `v` takes when stored as `dtype`: rounded to nearest even for floats (inf beyond the
// range), truncated toward zero and wrapped for integers, nonzero-ness for bool.
double round_to_dtype(double v, DType dtype);

// ---- the table ----

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int64_t integer(int64_t low, int64_t high);  // inclusive
  double uniform(double low, double high);
  bool chance(double p);
  template <typename T>
  const T& pick(const std::vector<T>& options) {
    return options[static_cast<size_t>(integer(0, static_cast<int64_t>(options.size()) - 1))];
  }

 private:
  std::mt19937_64 engine_;
};

struct ValueRange {
  double low = -2.0, high = 2.0;
  bool integers = false;  // whole numbers even for floating dtypes: ties, exact products
  bool nonzero = false;   // keeps |v| >= 0.25 (divisors)
  // For floating dtypes, one value in four is one of these (rounded to the dtype): infinities,
  // NaN, ties, the edges of a dtype's range.
  std::vector<double> specials;
};

struct InputSpec {
  ValueRange range;
  std::optional<DType> dtype;  // a fixed dtype instead of the case's (where's condition, copy_'s source)
  bool any_device = false;     // may live on another device than the other inputs (copy_'s source)
};

// Parameters drawn per trial, seen by both the Ember call and the reference.
struct OpArgs {
  std::vector<int64_t> dims;  // reductions: the dims (empty = all); single-dim ops: dims[0]
  bool keepdim = false;
  int64_t count = 1;            // split size, number of chunks
  std::vector<int64_t> params;  // op-specific integers drawn with the shapes (a convolution's geometry)
};

// Draws the logical input shapes (and the args that go with them) of one trial.
// `allow_empty` is false for ops that raise on empty reductions.
using ShapeGenerator = std::function<std::vector<Shape>(Rng&, OpArgs&, bool allow_empty)>;
ShapeGenerator elementwise_shapes(int inputs);  // broadcast against each other, ranks may differ
ShapeGenerator inplace_shapes(int inputs);      // input 0 has the broadcast shape, the rest broadcast to it
ShapeGenerator same_shape(int inputs);          // identical shapes, no args
ShapeGenerator reduction_shapes();              // any subset of dims, keepdim
ShapeGenerator one_dim_shapes(int inputs);      // identical shapes plus one dim in [-rank, rank)
ShapeGenerator cat_shapes(int inputs);          // equal except along dims[0]
ShapeGenerator stack_shapes(int inputs);        // identical, dims[0] in [-(rank + 1), rank]
ShapeGenerator split_shapes();                  // one tensor, dims[0], count >= 1
ShapeGenerator matmul_shapes();                 // 1-D, 2-D and batched pairs, broadcast batch dims
namespace detail {
void set_large_shapes(bool large);  // check_op_case's switch for HarnessOptions::large
}

using OpRun = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const OpArgs&)>;
using OpReference = std::function<std::vector<RefTensor>(const std::vector<RefTensor>&, const OpArgs&)>;

struct OpCase {
  std::string name;
  std::vector<DType> dtypes;
  std::vector<InputSpec> inputs;
  ShapeGenerator shapes;
  OpRun run;
  OpReference reference;  // float64, independent of Ember's ops
  // An error case: every trial's run must raise an ember::Error whose message holds this text
  // (no reference then). The harness reports a run that returns or raises anything else.
  std::string expect_error;
  bool allow_empty = true;
  int inplace_dest = -1;  // the input the op writes into (never given an overlapping layout)
  // How far an output may be from its reference rounded to the output's dtype. float32 and
  // float64: fixed bounds (1e-5, 1e-10 relative and absolute) times `tolerance_scale`. bfloat16
  // and float16, with u the dtype's unit roundoff (2^-8, 2^-11), r = tolerance_scale, e the
  // rounded reference, m the element's magnitude (from sum_terms below, else RefTensor::magnitude,
  // else the reference's |value|) and n its longest sum (1 without sum_terms):
  //   |got - e| <= (r + 1) u |e| + ((r - 1) u + n 2^-24) m + (r + 1) u * smallest normal.
  // So r is the number of roundings to the 16-bit dtype on the way (1: the output's only), each
  // at most u of the value it rounds, which is at most m; sums accumulate in float32 (n 2^-24 m);
  // the last term is float16's gradual underflow. A kernel that accumulates in 16 bits errs by
  // about u per term added and fails it.
  double tolerance_scale = 1.0;
  // Sums of products of inputs with non-negative weights (convolution, matmul, sum, mean):
  // `reference` applied to the inputs' absolute values gives each output element's magnitude,
  // sum |term|, and this the length of the longest sum in any output, from the trial's shapes.
  std::function<int64_t(const std::vector<Shape>&, const OpArgs&)> sum_terms;
  // Outputs equal the reference rounded to their dtype bit for bit (NaN matches NaN): casts,
  // copies and the ops that move elements round nothing else.
  bool exact = false;
  // The public ops `run` calls, which an error about its arguments must name (the user called
  // them); empty: the case's name is the op's.
  std::vector<std::string> ops;
  // `run` calls a KernelTable entry directly: the backend contract, whose callers check devices
  // and dtypes, so tests that hand ops bad arguments (tests/cuda/op_arguments_test.cc) skip it.
  bool kernel_table = false;
};

// `c` with the ops it calls, for a case whose name spells a variant ("clamp_int" calls clamp).
inline OpCase calling(std::vector<std::string> ops, OpCase c) {
  c.ops = std::move(ops);
  return c;
}

extern const std::vector<DType> kAllDTypes;       // the eight dtypes
extern const std::vector<DType> kNumericDTypes;   // all but bool
extern const std::vector<DType> kFloatingDTypes;  // f32 f64 bf16 f16
extern const std::vector<DType> kIntegerDTypes;   // i64 i32 u8

struct HarnessOptions {
  int trials = 10;  // per dtype
  // Dims up to a few hundred and up to ~150k elements per input, so that kernels split their work
  // across threads and take their blocked paths. Small shapes are what find shape bugs.
  bool large = false;
  std::vector<DType> only_dtypes;  // when set: the case's dtypes that are also in this list
};

// Runs random trials of `c` on `device`. Returns one line per failure: the case, dtype, input
// shapes/strides/layouts, args and the first mismatching element; empty when everything matched.
// Also fails a trial that modifies an input other than `inplace_dest`, or memory around a view.
std::vector<std::string> check_op_case(const OpCase& c, Device device, const HarnessOptions& options = {});

// The inputs of one trial of `c`, for tests that change them before calling `c.run`: shapes and
// args drawn as check_op_case draws them (small, no empty dims), every input contiguous on
// `device`, with its InputSpec's values and dtype (`dtype` unless the spec fixes one).
struct TrialInputs {
  std::vector<Tensor> tensors;
  OpArgs args;
};
TrialInputs make_trial_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed);

}  // namespace ember::test

// oneDNN engine, per-thread streams with OpenMP team sizing, and the NCHW -> channels-last copy.
#include "core/cpu/dnnl/runtime.h"

#include <omp.h>

#include <algorithm>
#include <unordered_map>

#include "core/cpu/isa.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::cpu::onednn {

const dnnl::engine& engine() {
  isa();  // applies EMBER_CPU_ISA to oneDNN before its first use
  static const dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

namespace {

// Every signal but those a fault raises on the faulting thread (which cannot wait) and those that
// cannot be held.
const sigset_t& asynchronous_signals() {
  static const sigset_t set = [] {
    sigset_t s;
    sigfillset(&s);
    for (int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGKILL, SIGSTOP})
      sigdelset(&s, synchronous);
    return s;
  }();
  return set;
}

// The workers of the calling thread's OpenMP team (libgomp keeps one pool per master thread) run
// oneDNN's kernels too: each holds the signals for good. Threads that libgomp creates here inherit
// the held mask from this thread; those an earlier region created are reached by the region itself.
void hold_signals_in_team(int threads) {
  SignalsHeld held;
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), nullptr);
  }
}

}  // namespace

SignalsHeld::SignalsHeld() { pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), &previous_); }

SignalsHeld::~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

// omp_set_num_threads sets a per-thread ICV, so each calling thread keeps its own record.
thread_local int omp_team_size = 0;

void size_openmp_team() {
  const int wanted = in_parallel_region() ? 1 : num_threads();
  if (wanted != omp_team_size) {
    omp_set_num_threads(wanted);
    omp_team_size = wanted;
    // A larger team may bring new workers (parallel_for's regions use at most this many threads).
    if (wanted > 1) hold_signals_in_team(wanted);
  }
}

OneThread::OneThread() : previous_(omp_get_max_threads()) {
  omp_set_num_threads(1);
  omp_team_size = 1;
}

OneThread::~OneThread() {
  omp_set_num_threads(previous_);
  omp_team_size = previous_;
}

dnnl::stream& stream() {
  size_openmp_team();
  thread_local dnnl::stream instance(engine());
  return instance;
}

std::optional<dnnl::memory::data_type> data_type(DType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case kFloat32:
      return dt::f32;
    case kBFloat16:
      // Without native bf16 instructions oneDNN would emulate or fall to its slow ref kernels.
      if (has_native_bf16()) return dt::bf16;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4) return false;
  const Shape expected = channels_last_strides(t.sizes());
  for (int64_t d = 0; d < 4; ++d)
    if (t.size(d) != 1 && t.stride(d) != expected[d]) return false;
  return true;
}

namespace {

// NCHW planes (any batch stride) to NHWC rows, one image per task. Pixels go in tiles so each
// channel's reads stay sequential while the writes fill whole cache lines.
template <typename Element>
void planes_to_channels_last(const Tensor& src, const Tensor& dst) {
  const int64_t n = src.size(0), c = src.size(1), pixels = src.size(2) * src.size(3);
  const int64_t batch_stride = src.stride(0);
  const auto* in = static_cast<const Element*>(src.data_ptr());
  auto* out = static_cast<Element*>(dst.data_ptr());
  parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
    constexpr int64_t kTile = 64;
    for (int64_t b = lo; b < hi; ++b) {
      const Element* image = in + b * batch_stride;
      Element* rows = out + b * pixels * c;
      for (int64_t p0 = 0; p0 < pixels; p0 += kTile) {
        const int64_t p1 = std::min(pixels, p0 + kTile);
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t p = p0; p < p1; ++p) rows[p * c + ch] = image[ch * pixels + p];
      }
    }
  });
}

// Each [C, H, W] image dense in NCHW order; the batch stride may be anything (a sliced batch).
bool has_nchw_images(const Tensor& t) {
  const int64_t h = t.size(2), w = t.size(3);
  return (t.size(1) == 1 || t.stride(1) == h * w) && (h == 1 || t.stride(2) == w) && (w == 1 || t.stride(3) == 1) &&
         (t.size(0) == 1 || t.stride(0) >= t.size(1) * h * w);
}

}  // namespace

Tensor to_channels_last(const Tensor& t) {
  if (is_channels_last(t)) return t;
  NoGradGuard no_grad;
  Tensor out = empty_channels_last(t.sizes(), t.options());
  if (t.numel() > 0 && has_nchw_images(t) && t.element_size() == 4) {
    planes_to_channels_last<uint32_t>(t, out);
  } else if (t.numel() > 0 && has_nchw_images(t) && t.element_size() == 2) {
    planes_to_channels_last<uint16_t>(t, out);
  } else {
    copy_into(out, t);  // rarer layouts (sliced widths, permuted spatial dims): the generic copy
  }
  return out;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Reorder make_reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  const dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, user_scratchpad());
  return Reorder{dnnl::reorder(pd), pd.scratchpad_desc()};
}

void execute(const Reorder& reorder, dnnl::memory& from, dnnl::memory& to, bool single_threaded) {
  dnnl::stream& s = stream();
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  Tensor scratch;
  if (reorder.scratchpad.get_size() > 0) {
    scratch = scratch_for(reorder.scratchpad);
    args.emplace(DNNL_ARG_SCRATCHPAD, user_memory(reorder.scratchpad, scratch));
  }
  if (single_threaded) omp_set_num_threads(1);
  {
    SignalsHeld held;
    reorder.primitive.execute(s, args);
    s.wait();
  }
  if (single_threaded) omp_set_num_threads(omp_team_size);
}

dnnl::memory user_memory(const dnnl::memory::desc& desc, const Tensor& t) {
  return dnnl::memory(desc, engine(), t.defined() ? t.data_ptr() : nullptr);
}

Tensor scratch_for(const dnnl::memory::desc& desc) {
  // Bytes rounded up to whole floats: blocked layouts may pad past the logical element count.
  const int64_t floats = static_cast<int64_t>((desc.get_size() + sizeof(float) - 1) / sizeof(float));
  return empty({std::max<int64_t>(floats, 1)}, TensorOptions(kFloat32));
}

}  // namespace ember::cpu::onednn

// oneDNN engine, per-thread streams with OpenMP team sizing, and the channels-last reorder cache.
#include "core/cpu/dnnl/runtime.h"

#include <omp.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::cpu::onednn {

const dnnl::engine& engine() {
  static const dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

dnnl::stream& stream() {
  // omp_set_num_threads sets a per-thread ICV, so each calling thread keeps its own record.
  thread_local int applied_threads = 0;
  const int wanted = in_parallel_region() ? 1 : num_threads();
  if (wanted != applied_threads) {
    omp_set_num_threads(wanted);
    applied_threads = wanted;
  }
  thread_local dnnl::stream instance(engine());
  return instance;
}

namespace {

// ISA values are bit sets; each includes the bits of the ISAs below it.
bool has_native_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

}  // namespace

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

Shape channels_last_strides(const Shape& sizes) {
  const int64_t c = sizes[1], h = sizes[2], w = sizes[3];
  return {h * w * c, 1, w * c, c};
}

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4) return false;
  const Shape expected = channels_last_strides(t.sizes());
  for (int64_t d = 0; d < 4; ++d)
    if (t.size(d) != 1 && t.stride(d) != expected[d]) return false;
  return true;
}

namespace {

// One cached reorder from a strided layout (the key) to NHWC.
struct ReorderEntry {
  dnnl::memory::desc src, dst;
  dnnl::reorder primitive;
};

std::shared_ptr<const ReorderEntry> channels_last_reorder(const Tensor& t, dnnl::memory::data_type type) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<const ReorderEntry>> cache;
  std::vector<int64_t> key = {static_cast<int64_t>(t.dtype())};
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  const dnnl::memory::dims dims(t.sizes().begin(), t.sizes().end());
  const dnnl::memory::dims strides(t.strides().begin(), t.strides().end());
  dnnl::memory::desc src(dims, type, strides);
  dnnl::memory::desc dst(dims, type, dnnl::memory::format_tag::nhwc);
  auto entry = std::make_shared<const ReorderEntry>(
      ReorderEntry{src, dst, dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src, engine(), dst))});
  cache.emplace(std::move(key), entry);
  return entry;
}

}  // namespace

Tensor to_channels_last(const Tensor& t) {
  if (is_channels_last(t)) return t;
  NoGradGuard no_grad;
  Tensor out = empty_strided(t.sizes(), channels_last_strides(t.sizes()), t.options());
  bool expressible = t.numel() > 0;
  for (int64_t d = 0; d < t.dim(); ++d) expressible = expressible && t.stride(d) > 0;
  const auto type = data_type(t.dtype());
  if (!expressible || !type) {
    copy_into(out, t);
    return out;
  }
  auto entry = channels_last_reorder(t, *type);
  dnnl::stream& s = stream();
  dnnl::memory from = user_memory(entry->src, t), to = user_memory(entry->dst, out);
  entry->primitive.execute(s, from, to);
  s.wait();
  return out;
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

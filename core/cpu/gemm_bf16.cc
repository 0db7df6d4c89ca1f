// bf16 GEMM on oneDNN's matmul primitive (autocast's linear and matmul), where the CPU has native
// bf16: bf16 A and B, products accumulated in float32, alpha and beta applied to the float32 sum
// and C rounded to bf16 once, as the widening path in gemm.cc computes it, without widening A and
// B first. Primitives are made once per shape and cached; each batch element is one execution.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/gemm.h"

namespace ember::cpu {

namespace {

using dnnl::memory;

struct MatmulPrimitive {
  dnnl::matmul primitive;
  memory::desc a, b, c, scratchpad;
};

// Row-major [rows, cols] with leading dimension ld, or its transpose as stored ([cols, rows]).
memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  const memory::dims strides = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc({rows, cols}, memory::data_type::bf16, strides);
}

// nullptr where oneDNN refuses the shape or has only its reference kernel (widening to float32
// and oneDNN's sgemm is faster than that).
std::shared_ptr<const MatmulPrimitive> create(const GemmArgs& g) {
  auto made = std::make_shared<MatmulPrimitive>();
  made->a = matrix(g.m, g.k, g.lda, g.trans_a);
  made->b = matrix(g.k, g.n, g.ldb, g.trans_b);
  made->c = matrix(g.m, g.n, g.ldc, false);
  dnnl::primitive_attr attr = onednn::user_scratchpad();
  if (g.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(g.alpha)});
  if (g.beta != 0.0) {
    dnnl::post_ops sum;
    sum.append_sum(static_cast<float>(g.beta));
    attr.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(made->a, made->b, made->c), attr, onednn::engine());
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
  made->primitive = dnnl::matmul(pd);
  made->scratchpad = pd.scratchpad_desc();
  return made;
}

std::shared_ptr<const MatmulPrimitive> lookup(const GemmArgs& g) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<const MatmulPrimitive>> cache;
  int64_t alpha_bits = 0, beta_bits = 0;
  std::memcpy(&alpha_bits, &g.alpha, sizeof(double));
  std::memcpy(&beta_bits, &g.beta, sizeof(double));
  std::vector<int64_t> key = {g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, alpha_bits, beta_bits};
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  std::shared_ptr<const MatmulPrimitive> made;
  try {
    made = create(g);
  } catch (const dnnl::error&) {
    made = nullptr;  // remembered: oneDNN is asked once per shape
  }
  cache.emplace(std::move(key), made);
  return made;
}

}  // namespace

bool gemm_bf16_onednn(const GemmArgs& g) {
  if (g.dtype != kBFloat16 || !onednn::data_type(kBFloat16) || g.m == 0 || g.n == 0 || g.k == 0) return false;
  const std::shared_ptr<const MatmulPrimitive> prim = lookup(g);
  if (!prim) return false;
  dnnl::stream& stream = onednn::stream();
  Tensor scratch = prim->scratchpad.get_size() > 0 ? onednn::scratch_for(prim->scratchpad) : Tensor();
  const auto* a = static_cast<const BFloat16*>(g.a);
  const auto* b = static_cast<const BFloat16*>(g.b);
  auto* c = static_cast<BFloat16*>(g.c);
  const dnnl::engine& engine = onednn::engine();
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(prim->a, engine, const_cast<BFloat16*>(a + batch * g.stride_a))},
        {DNNL_ARG_WEIGHTS, memory(prim->b, engine, const_cast<BFloat16*>(b + batch * g.stride_b))},
        {DNNL_ARG_DST, memory(prim->c, engine, c + batch * g.stride_c)}};
    if (scratch.defined()) args.emplace(DNNL_ARG_SCRATCHPAD, onednn::user_memory(prim->scratchpad, scratch));
    onednn::SignalsHeld held;
    prim->primitive.execute(stream, args);
    stream.wait();
  }
  return true;
}

}  // namespace ember::cpu

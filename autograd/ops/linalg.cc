// Gradient of bmm, the one GEMM primitive every matmul form reduces to:
// dA = dC · Bᵀ, dB = Aᵀ · dC (batch dims broadcast by matmul are summed by expand's backward).
#include "autograd/function.h"
#include "autograd/ops/ops.h"
#include "autograd/saved.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {

class BmmBackward final : public Node {
 public:
  BmmBackward(const Tensor& a, const Tensor& b, bool save_a, bool save_b) {
    if (save_a) a_ = SavedTensor(a);
    if (save_b) b_ = SavedTensor(b);
  }
  std::string name() const override { return "BmmBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(*this, 0)) ga = ember::bmm(g, b_.unpack(name()).transpose(1, 2));
    if (needs_input_grad(*this, 1)) gb = ember::bmm(a_.unpack(name()).transpose(1, 2), g);
    return {ga, gb};
  }
  void release_saved() override {
    a_.reset();
    b_.reset();
  }

 private:
  SavedTensor a_, b_;
};

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::bmm(a, b);
  }
  // dA needs B and dB needs A: save only what a required gradient reads.
  auto node = std::make_shared<BmmBackward>(a, b, b.requires_grad(), a.requires_grad());
  connect(node, {&a, &b});
  return attach(node, y);
}

}  // namespace ember::autograd

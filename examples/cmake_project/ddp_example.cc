// DistributedDataParallel from outside Ember's tree: run it as `mpirun -np 2 ./ddp_example`.
// Each rank trains on its own half of a synthetic regression batch; DDP averages the gradients,
// so every rank must end with the same weights. The program checks that (an all-reduce of the
// weights' sum, min against max) and exits non-zero where the ranks differ.
#include <cstdio>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp.h"

using namespace ember;

int main() {
  auto world = comm::init();  // the rank and world size from mpirun's environment
  manual_seed(0);             // the same initial weights on every rank (DDP broadcasts rank 0's anyway)
  auto model = nn::Sequential(nn::Linear(8, 32), nn::ReLU(), nn::Linear(32, 1));
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(model.ptr(), world);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.05).momentum(0.9));

  manual_seed(100 + world->rank());  // each rank its own data
  Tensor x = randn({64, 8});
  Tensor y = x.sum({1}, /*keepdim=*/true) * 0.5;
  float last = 0;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss(ddp->forward(x), y);
    loss.backward();  // returns once the gradients are averaged over the ranks
    opt.step();
    last = loss.item<float>();
  }

  Tensor total = zeros({1});
  for (const Tensor& p : ddp->parameters()) total = total + p.detach().sum().reshape({1});
  Tensor low = total.clone(), high = total.clone();
  world->all_reduce(low, comm::ReduceOp::Min)->wait();
  world->all_reduce(high, comm::ReduceOp::Max)->wait();
  const bool same = low.item<float>() == high.item<float>();
  std::printf("ddp_example: rank %d of %d, loss %.5f, weights' sum %.6f, %s on every rank\n", world->rank(),
              world->size(), last, total.item<float>(), same ? "the same" : "NOT the same");
  return same ? 0 : 1;
}
